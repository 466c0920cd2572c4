#!/bin/sh
# The H200 run behind bench/results/triton_h200.json (its "fa3" column), fa3_h200.json (the
# ablations), fa3_ncu.csv (Nsight Compute) and fa3_pytest.log. On the device machine, from the
# repository root:  OUT=<folder> sh bench/fa3_h200_run.sh   (OUT defaults to bench/results)
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH="$PWD/py" PYTHONUNBUFFERED=1
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
timeout 300 python3 bench/triton_h200.py --out "$OUT" > "$OUT/triton_h200.out" 2>&1
tail -16 "$OUT/triton_h200.out"
timeout 150 python3 bench/fa3_h200.py --out "$OUT" > "$OUT/fa3_h200.log" 2>&1
tail -7 "$OUT/fa3_h200.log"
timeout 120 ncu --clock-control none -k regex:'fa3_fwd|fprop|sdpa|fmha|attn' -c 4 --section SpeedOfLight \
  --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --csv --page raw \
  python3 bench/fa3_ncu.py > "$OUT/fa3_ncu.csv" 2> "$OUT/fa3_ncu.err"
echo "ncu exit $? ($(wc -l < "$OUT/fa3_ncu.csv") lines)"; tail -3 "$OUT/fa3_ncu.err"
timeout 120 python3 -m pytest tests/test_flash_fa3_gpu.py -q -n 8 -p no:cacheprovider > "$OUT/fa3_pytest.log" 2>&1
tail -3 "$OUT/fa3_pytest.log"
