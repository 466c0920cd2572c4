#!/bin/sh
# H200 run 4 (after causal work items were ordered longest first): the GPU tests, then both
# launches with and without ping-pong on the 12 shapes (bench/results/fa3_h200_launch.json).
# On the device machine, from the repository root:  OUT=<folder> sh bench/fa3_h200_run4.sh
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH="$PWD/py" PYTHONUNBUFFERED=1
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
timeout 80 python3 -m pytest tests/test_flash_fa3_gpu.py -q -x -n 8 -p no:cacheprovider > "$OUT/fa3_pytest.log" 2>&1
status=$?
tail -4 "$OUT/fa3_pytest.log"
[ "$status" -eq 0 ] || exit "$status"
timeout 110 python3 bench/fa3_h200.py --launch --out "$OUT" > "$OUT/fa3_h200_launch.log" 2>&1
tail -14 "$OUT/fa3_h200_launch.log"
