#!/bin/sh
# H200 run 6 (one call): the GPU tests (with the new variants: two Q buffers, cross-item
# overlap), the variant sweep, flash_fa3.CHOICES rewritten from it by the rule, then the fa3
# column of bench/triton_h200.py on all 12 shapes (all columns from one run). Each step gets
# what is left of the call's 590 s. On the device machine, from the repository root:
#   OUT=<folder> sh bench/fa3_h200_run6.sh
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
left=$((590 - SECONDS))
echo "sweep done at ${SECONDS} s; ${left} s left for triton_h200.py"
timeout $left python3 bench/triton_h200.py --out "$OUT" > /tmp/triton_h200.out 2>&1
echo "triton_h200.py exit $? at ${SECONDS} s"
tail -16 /tmp/triton_h200.out
