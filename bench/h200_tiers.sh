#!/bin/bash
# The WGSL tiers on the H200, both engines (bench/README.md, "WGSL tiers on the H200"). Run from a
# folder holding py/, bench/ and wgsl/, with the carried .gl/ (Vulkan loader), .whl/ (wgpu) and
# DAWN (node.xz, dawn.node.xz) given as $GL, $WHL, $DAWN. Usage: h200_tiers.sh probe|full OUTDIR
# (probe: N = 16384, 16 heads, d = $DS (64) only, causal $CAUSAL (no,yes), with the variants
# ($VARIANTS: keys of webgpu_tiers.VARIANTS, default all) and $ACCURACY (e.g. --accuracy);
# full: the recorded grid). $TESTS (pytest arguments, e.g. tests/test_wgsl_variants.py) runs
# those tests first on the H200's adapters (wgpu-py, and Dawn for tests that take $DAWN_NODE),
# output in OUTDIR/pytest.txt.
set -u
mode=$1; out=$2
for f in $GL/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_RUNTIME_DIR=/tmp/xdg PYTHONUNBUFFERED=1
mkdir -p $XDG_RUNTIME_DIR /tmp/dawn
python3 -m pip install -q --no-deps --no-index --break-system-packages $WHL/*.whl
xz -dc $DAWN/node.xz > /tmp/dawn/node && xz -dc $DAWN/dawn.node.xz > /tmp/dawn/dawn.node && chmod +x /tmp/dawn/node
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv
# The SM clock, power and throttle reasons every 200 ms while the benchmark runs: the 16-head
# timings of the earlier run were bimodal (repeats 3-4x apart), and this says whether clocks moved.
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active,utilization.gpu \
  --format=csv -lms 200 > $out/clocks.csv 2>&1 &
common="--node /tmp/dawn/node --dawn-node /tmp/dawn/dawn.node"
if [ -n "${TESTS:-}" ]; then
  DAWN_NODE=/tmp/dawn/dawn.node NODE=/tmp/dawn/node PYTHONPATH=py:${ROOT:-.} timeout 120 \
    python3 -m pytest -q -rs -p no:cacheprovider $TESTS > $out/pytest.txt 2>&1
  echo "pytest $TESTS: rc $? ($(tail -1 $out/pytest.txt))"
fi
if [ "$mode" = probe ]; then
  PYTHONPATH=py:${ROOT:-.} timeout 300 python3 bench/webgpu_attention.py --tiers ${TIERS:-portable,subgroup,f16,int8} \
    --engines ${ENGINES:-dawn,wgpu-py} --d ${DS:-64} --heads 16 --sizes 16384 --causal ${CAUSAL:-no,yes} --repeats ${REPEATS:-5} \
    --tier-variants${VARIANTS:+=$VARIANTS} ${ACCURACY:-} $common --out $out/probe.json
else
  PYTHONPATH=py:${ROOT:-.} timeout 560 python3 bench/webgpu_attention.py --tiers ${TIERS:-portable,subgroup,f16,int8} \
    --engines ${ENGINES:-dawn,wgpu-py} --d 64,128 --heads 1,16 --sizes ${SIZES:-1024,2048,4096,8192,16384} \
    --causal no,yes --repeats ${REPEATS:-5} --accuracy --tier-variants ${SDPA---sdpa} $common --out $out/webgpu_h200.json
fi
