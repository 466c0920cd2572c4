#!/bin/sh
# What run 6 left undone (bench/FA3.md, "Run 6"), in one call of about 400 s: flash_fa3.CHOICES
# rewritten from run 6's sweep by the rule (withdrawn candidates skipped), the GPU tests, the
# fa3 column of bench/triton_h200.py on all 12 shapes (all columns from one run), then Nsight
# Compute on NCU_SHAPES if time is left. On the device machine, from the repository root:
#   OUT=<folder> NCU_SHAPES="128,1024,1 64,1024,1" sh bench/fa3_h200_run7.sh
# Copy back flash_fa3.py, triton_h200.json/.log, fa3_pytest.log and fa3_ncu.json; then make
# fa3_h200_variants_run6.json the current sweep (FA3.md says how).
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH="$PWD/py" PYTHONUNBUFFERED=1
OUT=${OUT:-bench/results}
BUDGET=${BUDGET:-540}
mkdir -p "$OUT"
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
python3 bench/fa3_h200_variants.py --choices bench/results/fa3_h200_variants_run6.json --write &&
  cp py/nlpcore/kernels/flash_fa3.py "$OUT/"
timeout 90 python3 -m pytest tests/test_flash_fa3_gpu.py -q -n 8 -p no:cacheprovider > "$OUT/fa3_pytest.log" 2>&1
echo "GPU tests exit $? at $(elapsed) s"; tail -2 "$OUT/fa3_pytest.log"
timeout $((BUDGET - 60 - $(elapsed))) python3 bench/triton_h200.py --out "$OUT" > /tmp/triton_h200.out 2>&1
echo "triton_h200.py exit $? at $(elapsed) s"; tail -16 /tmp/triton_h200.out
left=$((BUDGET - $(elapsed)))
if [ -n "$NCU_SHAPES" ] && [ $left -gt 40 ]; then
  cmd="ncu --clock-control none -k regex:fa3_fwd|fprop|sdpa|fmha|attn --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --csv --page raw python3 bench/fa3_ncu.py --shapes $NCU_SHAPES"
  timeout $((left - 5)) ncu --clock-control none -k 'regex:fa3_fwd|fprop|sdpa|fmha|attn' --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --csv --page raw \
    python3 bench/fa3_ncu.py --shapes $NCU_SHAPES > /tmp/fa3_ncu.csv 2> /tmp/fa3_ncu.err
  echo "ncu exit $? at $(elapsed) s"; tail -3 /tmp/fa3_ncu.err
  python3 bench/fa3_ncu.py --trim /tmp/fa3_ncu.csv --out "$OUT/fa3_ncu.json" --shapes $NCU_SHAPES --command "$cmd"
fi
