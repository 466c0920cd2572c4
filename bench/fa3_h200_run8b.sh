#!/bin/sh
# Run 8, second call (bench/FA3.md, "Run 8"): flash_fa3.CHOICES rewritten by the rule from the
# first call's sweep (bench/results/fa3_h200_variants_run8.json), then with those choices the fa3
# column of bench/triton_h200.py on all 12 shapes (every column from one run), the ablations of
# bench/fa3_h200.py on the shipped variants, and Nsight Compute on NCU_SHAPES if time is left.
# On the device machine, from the repository root:
#   OUT=<folder> NCU_SHAPES="64,1024,0 128,1024,0" sh bench/fa3_h200_run8b.sh
# Copy back flash_fa3.py, triton_h200.json/.log, fa3_h200.json and fa3_ncu.json.
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH="$PWD/py" PYTHONUNBUFFERED=1
OUT=${OUT:-bench/results}
BUDGET=${BUDGET:-560}
mkdir -p "$OUT"
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
python3 bench/fa3_h200_variants.py --choices bench/results/fa3_h200_variants_run8.json --write &&
  cp py/nlpcore/kernels/flash_fa3.py "$OUT/"
timeout $((BUDGET - 200 - $(elapsed))) python3 bench/triton_h200.py --out "$OUT" > /tmp/triton_h200.out 2>&1
echo "triton_h200.py exit $? at $(elapsed) s"; tail -16 /tmp/triton_h200.out
timeout $((BUDGET - 70 - $(elapsed))) python3 bench/fa3_h200.py --out "$OUT" 2>&1 | tail -8
echo "fa3_h200.py done at $(elapsed) s"
left=$((BUDGET - $(elapsed)))
if [ -n "$NCU_SHAPES" ] && [ $left -gt 40 ]; then
  cmd="ncu --clock-control none -k regex:fa3_fwd|fprop|sdpa|fmha|attn --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --csv --page raw python3 bench/fa3_ncu.py --shapes $NCU_SHAPES"
  timeout $((left - 5)) ncu --clock-control none -k 'regex:fa3_fwd|fprop|sdpa|fmha|attn' --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --csv --page raw \
    python3 bench/fa3_ncu.py --shapes $NCU_SHAPES > /tmp/fa3_ncu.csv 2> /tmp/fa3_ncu.err
  echo "ncu exit $? at $(elapsed) s"; tail -3 /tmp/fa3_ncu.err
  python3 bench/fa3_ncu.py --trim /tmp/fa3_ncu.csv --out "$OUT/fa3_ncu.json" --shapes $NCU_SHAPES --command "$cmd"
fi
