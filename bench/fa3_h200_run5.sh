#!/bin/sh
# H200 run 5, after the variant sweep and `--choices --write` (flash_fa3.CHOICES): the GPU tests, the fa3
# column of bench/results/triton_h200.json (all columns from one run), the ablations on the new
# defaults (fa3_h200.json) and, where the time allows, Nsight Compute on the shapes that still
# trail cuDNN (fa3_ncu.json). On the device machine, from the repository root:
#   OUT=<folder> NCU_SHAPES="64,1024,1 64,4096,1" sh bench/fa3_h200_run5.sh
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH="$PWD/py" PYTHONUNBUFFERED=1
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
timeout 75 python3 -m pytest tests/test_flash_fa3_gpu.py -q -n 8 -p no:cacheprovider > "$OUT/fa3_pytest.log" 2>&1
tail -3 "$OUT/fa3_pytest.log"
timeout 220 python3 bench/triton_h200.py --out "$OUT" > /tmp/triton_h200.out 2>&1
tail -16 /tmp/triton_h200.out
[ -n "$ABLATE" ] && { timeout 120 python3 bench/fa3_h200.py --out "$OUT" > "$OUT/fa3_h200.log" 2>&1; tail -7 "$OUT/fa3_h200.log"; }
if [ -n "$NCU_SHAPES" ]; then
  cmd="ncu --clock-control none -k regex:fa3_fwd|fprop|sdpa|fmha|attn --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --csv --page raw python3 bench/fa3_ncu.py --shapes $NCU_SHAPES"
  timeout 70 ncu --clock-control none -k 'regex:fa3_fwd|fprop|sdpa|fmha|attn' --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --csv --page raw \
    python3 bench/fa3_ncu.py --shapes $NCU_SHAPES > "$OUT/fa3_ncu.csv" 2> /tmp/fa3_ncu.err
  echo "ncu exit $?"; tail -3 /tmp/fa3_ncu.err
  python3 bench/fa3_ncu.py --trim "$OUT/fa3_ncu.csv" --out "$OUT/fa3_ncu.json" --shapes $NCU_SHAPES --command "$cmd"
fi
