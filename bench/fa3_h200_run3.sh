#!/bin/sh
# H200 run 3 (after the persistent launch was added): the GPU tests, then persistent vs
# per-item launch on the 12 benchmark shapes (bench/results/fa3_h200_persistent.json).
# On the device machine, from the repository root:  OUT=<folder> sh bench/fa3_h200_run3.sh
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH="$PWD/py" PYTHONUNBUFFERED=1
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
timeout 110 python3 -m pytest tests/test_flash_fa3_gpu.py -q -x -n 8 -p no:cacheprovider > "$OUT/fa3_pytest.log" 2>&1
status=$?
tail -5 "$OUT/fa3_pytest.log"
[ "$status" -eq 0 ] || exit "$status"
timeout 130 python3 bench/fa3_h200.py --persistent --out "$OUT" > "$OUT/fa3_h200_persistent.log" 2>&1
tail -15 "$OUT/fa3_h200_persistent.log"
