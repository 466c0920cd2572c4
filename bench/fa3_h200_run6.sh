#!/bin/sh
# H200 run 6 (one call, 560 s; bench/FA3.md): the GPU tests (with the new variants: two Q buffers, cross-item
# overlap), the variant sweep, flash_fa3.CHOICES rewritten from it by the rule, then the fa3
# column of bench/triton_h200.py on all 12 shapes (all columns from one run), then, if time is
# left, Nsight Compute on NCU_SHAPES. The call gets BUDGET seconds (default 510); the benchmark
# gets what the steps before it left (run 6 itself used bash's $SECONDS, which the device's sh
# does not have, so the benchmark was given 510 s and the call was cut off at 560 s; the clock
# below is date's). On the device machine, from the repository root:
#   OUT=<folder> NCU_SHAPES="128,1024,1 64,1024,1" sh bench/fa3_h200_run6.sh
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH="$PWD/py" PYTHONUNBUFFERED=1
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
timeout 120 python3 -m pytest tests/test_flash_fa3_gpu.py -q -n 8 -p no:cacheprovider > "$OUT/fa3_pytest.log" 2>&1
rc=$?
tail -4 "$OUT/fa3_pytest.log"
[ $rc -eq 124 ] && { echo "GPU tests timed out after 120 s (a variant may hang): no sweep"; exit 1; }
echo "tests done at $(elapsed) s"
python3 bench/fa3_h200_variants.py --out "$OUT" --timeout 150 | tail -16
python3 bench/fa3_h200_variants.py --choices "$OUT/fa3_h200_variants.json" --write && cp py/nlpcore/kernels/flash_fa3.py "$OUT/"
BUDGET=${BUDGET:-510}
left=$((BUDGET - $(elapsed)))
echo "sweep done at $(elapsed) s; ${left} s left for triton_h200.py"
timeout $left python3 bench/triton_h200.py --out "$OUT" > /tmp/triton_h200.out 2>&1
echo "triton_h200.py exit $? at $(elapsed) s"
tail -16 /tmp/triton_h200.out
left=$((BUDGET - $(elapsed)))
if [ -n "$NCU_SHAPES" ] && [ $left -gt 60 ]; then
  cmd="ncu --clock-control none -k regex:fa3_fwd|fprop|sdpa|fmha|attn --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --csv --page raw python3 bench/fa3_ncu.py --shapes $NCU_SHAPES"
  timeout $((left - 5)) ncu --clock-control none -k 'regex:fa3_fwd|fprop|sdpa|fmha|attn' --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --csv --page raw \
    python3 bench/fa3_ncu.py --shapes $NCU_SHAPES > /tmp/fa3_ncu.csv 2> /tmp/fa3_ncu.err
  echo "ncu exit $? at $(elapsed) s"; tail -3 /tmp/fa3_ncu.err
  python3 bench/fa3_ncu.py --trim /tmp/fa3_ncu.csv --out "$OUT/fa3_ncu.json" --shapes $NCU_SHAPES --command "$cmd"
fi
