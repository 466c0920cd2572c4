#!/bin/sh
# Run 8, first call (bench/FA3.md, "Run 8"): named-barrier hand-overs. A smoke test of the named
# variants (a hang or a wrong answer sets FA3_SKIP_NAMED=1 for what follows), the GPU tests, and
# the variant sweep with every candidate twice (mbarrier and named-barrier hand-overs). On the
# device machine, from the repository root:
#   OUT=<folder> sh bench/fa3_h200_run8.sh
# Copy back $OUT/fa3_h200_variants.json (-> bench/results/fa3_h200_variants_run8.json),
# fa3_pytest.log and smoke.log; the second call (fa3_h200_run8b.sh) adopts the choices.
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH="$PWD/py" PYTHONUNBUFFERED=1
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
timeout 120 python3 - > "$OUT/smoke.log" 2>&1 <<'PY'
import torch
from nlpcore.kernels import flash_fa3
from nlpcore.lab.exercises.triton import check_triton as ct
V = flash_fa3.Variant
for d, var in ((128, V(named=True)), (128, V(named=True, snake=True, q_bufs=2)), (64, V(consumers=3, stages=3, named=True)),
               (64, V(stages=2, pingpong=False, named=True))):
    for causal in (False, True):
        q, k, v = (torch.randn(2, 16, 1000, d, device="cuda").bfloat16() for _ in range(3))
        o, lse = flash_fa3.forward(q, k, v, causal=causal, fallback=False, variant=var)
        torch.cuda.synchronize()
        ref, _, _ = ct.reference(q, k, v, causal=causal)
        verdict = ct.compare(o, ref, ct.flash_bound(ct.plain(q, k, v, causal=causal)[0], ref))
        print(d, causal, var, "ok" if verdict.ok else "WRONG", f"{verdict.err:.3g} <= {verdict.bound:.3g}", flush=True)
        assert verdict.ok
print("SMOKE OK")
PY
rc=$?
cat "$OUT/smoke.log" | tail -12
if [ $rc -ne 0 ]; then echo "named smoke failed (exit $rc): sweeping without named barriers"; export FA3_SKIP_NAMED=1; fi
echo "smoke done at $(elapsed) s"
timeout 150 python3 -m pytest tests/test_flash_fa3_gpu.py -q -n 8 -p no:cacheprovider > "$OUT/fa3_pytest.log" 2>&1
echo "GPU tests exit $? at $(elapsed) s"; tail -3 "$OUT/fa3_pytest.log"
left=$((570 - $(elapsed)))
python3 bench/fa3_h200_variants.py --out "$OUT" --timeout $((left / 2)) 2>&1 | grep -v "^|"
echo "sweep done at $(elapsed) s"
python3 bench/fa3_h200_variants.py --choices "$OUT/fa3_h200_variants.json"
