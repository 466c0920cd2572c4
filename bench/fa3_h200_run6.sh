#!/bin/sh
# H200 run 6 (one call): the GPU tests (with the new variants: two Q buffers, cross-item
# overlap), the variant sweep, flash_fa3.CHOICES rewritten from it by the rule, then the fa3
# column of bench/triton_h200.py on all 12 shapes (all columns from one run), then, if time is
# left, Nsight Compute on NCU_SHAPES. The call gets BUDGET seconds (default 510); the benchmark
# gets what the steps before it left. On the device machine, from the repository root:
#   OUT=<folder> NCU_SHAPES="128,1024,1 64,1024,1" sh bench/fa3_h200_run6.sh
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH="$PWD/py" PYTHONUNBUFFERED=1
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
timeout 120 python3 -m pytest tests/test_flash_fa3_gpu.py -q -n 8 -p no:cacheprovider > "$OUT/fa3_pytest.log" 2>&1
rc=$?
tail -4 "$OUT/fa3_pytest.log"
[ $rc -eq 124 ] && { echo "GPU tests timed out after 120 s (a variant may hang): no sweep"; exit 1; }
echo "tests done at ${SECONDS} s"
python3 bench/fa3_h200_variants.py --out "$OUT" --timeout 150 | tail -16
python3 bench/fa3_h200_variants.py --choices "$OUT/fa3_h200_variants.json" --write && cp py/nlpcore/kernels/flash_fa3.py "$OUT/"
BUDGET=${BUDGET:-510}
left=$((BUDGET - SECONDS))
echo "sweep done at ${SECONDS} s; ${left} s left for triton_h200.py"
timeout $left python3 bench/triton_h200.py --out "$OUT" > /tmp/triton_h200.out 2>&1
echo "triton_h200.py exit $? at ${SECONDS} s"
tail -16 /tmp/triton_h200.out
left=$((BUDGET - SECONDS))
if [ -n "$NCU_SHAPES" ] && [ $left -gt 60 ]; then
  cmd="ncu --clock-control none -k regex:fa3_fwd|fprop|sdpa|fmha|attn --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --csv --page raw python3 bench/fa3_ncu.py --shapes $NCU_SHAPES"
  timeout $((left - 5)) ncu --clock-control none -k 'regex:fa3_fwd|fprop|sdpa|fmha|attn' --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --csv --page raw \
    python3 bench/fa3_ncu.py --shapes $NCU_SHAPES > /tmp/fa3_ncu.csv 2> /tmp/fa3_ncu.err
  echo "ncu exit $? at ${SECONDS} s"; tail -3 /tmp/fa3_ncu.err
  python3 bench/fa3_ncu.py --trim /tmp/fa3_ncu.csv --out "$OUT/fa3_ncu.json" --shapes $NCU_SHAPES --command "$cmd"
fi
