#!/bin/bash
# The WGSL tiers on the H200, both engines (bench/README.md, "WGSL tiers on the H200"). Run from a
# folder holding py/, bench/ and wgsl/, with the carried .gl/ (Vulkan loader), .whl/ (wgpu) and
# DAWN (node.xz, dawn.node.xz) given as $GL, $WHL, $DAWN. Usage: h200_tiers.sh probe|full OUTDIR
set -u
mode=$1; out=$2
for f in $GL/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_RUNTIME_DIR=/tmp/xdg PYTHONUNBUFFERED=1
mkdir -p $XDG_RUNTIME_DIR /tmp/dawn
python3 -m pip install -q --no-deps --no-index --break-system-packages $WHL/*.whl
xz -dc $DAWN/node.xz > /tmp/dawn/node && xz -dc $DAWN/dawn.node.xz > /tmp/dawn/dawn.node && chmod +x /tmp/dawn/node
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv
common="--node /tmp/dawn/node --dawn-node /tmp/dawn/dawn.node"
if [ "$mode" = probe ]; then
  PYTHONPATH=py:${ROOT:-.} timeout 300 python3 bench/webgpu_attention.py --tiers portable,subgroup,f16,int8 --engines dawn,wgpu-py \
    --d 64,128 --heads 16 --sizes 1024,4096 --causal no,yes --repeats 2 --accuracy $common --out $out/probe.json
else
  PYTHONPATH=py:${ROOT:-.} timeout 560 python3 bench/webgpu_attention.py --tiers ${TIERS:-portable,subgroup,f16,int8} \
    --engines ${ENGINES:-dawn,wgpu-py} --d 64,128 --heads 1,16 --sizes ${SIZES:-1024,2048,4096,8192,16384} \
    --causal no,yes --repeats 3 --accuracy ${SDPA---sdpa} $common --out $out/webgpu_h200.json
fi
