"""The FlashAttention-3 host wrapper (nlpcore.kernels.flash_fa3) where CI runs: on the CPU.

What runs here: the refusals (argument named, expected shape given), the reasons the Hopper
kernel declines, the fallback to the portable Triton kernel (under Triton's interpreter,
checked against float64), and — where the installed Triton has Gluon's Hopper API — the
kernel compiled ahead of time for sm_90a with its structure read off the PTX. Its numbers are
checked on a Hopper GPU by tests/test_flash_fa3_gpu.py.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="the FlashAttention-3 wrapper needs PyTorch")
if not torch.cuda.is_available():
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("triton was imported before TRITON_INTERPRET=1 could be set", allow_module_level=True)
    os.environ["TRITON_INTERPRET"] = "1"  # the fallback runs under the interpreter
pytest.importorskip("triton", reason="the FlashAttention-3 wrapper needs Triton")

from nlpcore.lab.exercises.triton import check_triton as ct  # noqa: E402
from nlpcore.kernels import flash_fa3  # noqa: E402
from nlpcore.kernels import flash_triton as ft  # noqa: E402

DEVICE = "cpu" if ft.INTERPRET else "cuda"
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _qkv(shape=(1, 2, 40, 32), dtype=torch.float16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=gen).to(dtype).to(DEVICE) for _ in range(3)]


@pytest.mark.parametrize("bad, match", [
    (lambda q, k, v: (q.numpy(), k, v), r"q must be a torch.Tensor of shape \(B, H, N, d\)"),
    (lambda q, k, v: (q[0], k, v), r"q must have shape \(B, H, N, d\), got \(2, 40, 32\)"),
    (lambda q, k, v: (q, k.float(), v), r"k has dtype torch.float32, expected q's dtype torch.float16"),
    (lambda q, k, v: (q, k, v[:, :, :7]), r"v must have k's shape \(1, 2, 40, 32\)"),
    (lambda q, k, v: (q, k[:, :1], v[:, :1]), r"k must have shape \(B, H, Nk, d\) = \(1, 2, Nk, 32\)"),
    (lambda q, k, v: (q[:, :, :0], k, v), r"N must be positive"),
])
def test_refusals_name_the_argument(bad, match):
    q, k, v = _qkv()
    if DEVICE != "cpu" and "numpy" in str(bad.__code__.co_names):
        pytest.skip("numpy() needs a CPU tensor")
    with pytest.raises((TypeError, ValueError), match=match):
        flash_fa3.forward(*bad(q, k, v))


def test_pingpong_needs_warp_specialisation():
    with pytest.raises(ValueError, match="pingpong=True needs warp_spec=True"):
        flash_fa3.forward(*_qkv(), warp_spec=False, pingpong=True)


@pytest.mark.skipif(DEVICE != "cpu", reason="the reasons below are the CPU's")
def test_reasons_to_decline_and_strict_mode():
    q, k, v = _qkv()
    assert "needs a CUDA GPU" in flash_fa3.why_not_fa3(q, k, v)
    with pytest.raises(RuntimeError, match="cannot run here: tensors are on cpu"):
        flash_fa3.forward(q, k, v, fallback=False)


@pytest.mark.parametrize("n, causal", [(40, False), (37, True)])
def test_fallback_is_the_portable_kernel_and_correct(n, causal):
    q, k, v = _qkv((1, 2, n, 32), seed=n)
    if flash_fa3.why_not_fa3(q, k, v) is None:
        pytest.skip("a Hopper GPU runs the FlashAttention-3 kernel itself (tests/test_flash_fa3_gpu.py)")
    o, lse = flash_fa3.forward(q, k, v, causal=causal)
    o_ft, lse_ft = ft.forward(q, k, v, causal=causal)
    assert torch.equal(o, o_ft) and torch.equal(lse, lse_ft)  # the very same kernel
    ref_o, ref_lse, _ = ct.reference(q, k, v, causal=causal)
    plain_o, _ = ct.plain(q, k, v, causal=causal)
    verdict = ct.compare(o, ref_o, ct.flash_bound(plain_o, ref_o))
    assert verdict.ok, f"o: max|Δ| {verdict.err:.3g} > {verdict.bound:.3g} {verdict.where} (N={n}, causal={causal})"
    assert ct.compare(lse, ref_lse, 1e-3).ok


def test_attention_backward_matches_float64():
    q, k, v = _qkv((1, 1, 24, 16), seed=5)
    if flash_fa3.why_not_fa3(q, k, v) is None:
        pytest.skip("covered on the GPU")
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    do = torch.randn_like(q)
    flash_fa3.attention(*leaves, causal=True).backward(do)
    _, _, ref_grads = ct.reference(q, k, v, do, causal=True)
    _, plain_grads = ct.plain(q, k, v, do, causal=True)
    for name, got, want, plain in zip("qkv", (t.grad for t in leaves), ref_grads, plain_grads):
        verdict = ct.compare(got, want, ct.flash_bound(plain, want))
        assert verdict.ok, f"d{name}: max|Δ| {verdict.err:.3g} > {verdict.bound:.3g} {verdict.where}"


def _gluon_hopper():
    try:
        from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma  # noqa: F401
        from triton.experimental.gluon._runtime import GluonASTSource  # noqa: F401
    except ImportError:
        return False
    return True


def _compiled(expr):
    """stdout of `expr` evaluated after `import flash_fa3_gluon as k`, in a fresh process (this
    one runs Triton's interpreter, which would wrap the Gluon kernel): ahead-of-time compiles
    for sm_90a need no GPU."""
    env = {key: val for key, val in os.environ.items() if key != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "py"), env.get("PYTHONPATH", "")])
    code = f"import sys; from nlpcore.kernels import flash_fa3_gluon as k; sys.stdout.write({expr})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.skipif(not _gluon_hopper(), reason="this Triton has no Gluon Hopper API (Triton >= 3.6)")
@pytest.mark.parametrize("warp_spec", [True, False])
def test_compiles_for_sm90a_with_fa3s_structure(warp_spec):
    """Ahead-of-time compile for sm_90a (no GPU needed) and read the roles off the PTX."""
    from nlpcore.kernels import flash_fa3_gluon as kern

    ptx = _compiled(f"k.compile_for_hopper(128, 'bf16', causal=True, warp_spec={warp_spec}, "
                    f"pingpong={warp_spec}).asm['ptx']")
    assert "wgmma.mma_async" in ptx and "wgmma.wait_group.sync.aligned 1" in ptx  # async, overlapped
    assert "cp.async.bulk.tensor.3d" in ptx and "mbarrier.try_wait.parity" in ptx  # TMA + barriers
    regs = sorted({int(r) for r in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx)})
    if warp_spec:  # the producer gives registers back, the consumers take them
        assert kern.PRODUCER_REGS.value in regs and kern.CONSUMER_REGS.value in regs, regs
    else:
        assert regs == [], regs
    assert math.isclose(kern.LN2.value, math.log(2))


@pytest.mark.skipif(not _gluon_hopper(), reason="this Triton has no Gluon Hopper API (Triton >= 3.6)")
def test_three_consumer_variant_compiles_for_sm90a():
    """Three consumer warpgroups (FlashAttention-3's d = 64 layout), fused K/V barriers and the
    balanced causal schedule compile for sm_90a; the consumers take 160 registers each."""
    from nlpcore.kernels import flash_fa3_gluon as kern

    ptx = _compiled("k.compile_for_hopper(64, 'bf16', causal=True, consumers=3, stages=3, kv_fused=True, "
                    "balance=True).asm['ptx']")
    regs = {int(r) for r in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx)}
    assert kern.CONSUMER_REGS_3.value in regs and kern.PRODUCER_REGS.value in regs, regs
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor.3d" in ptx


@pytest.mark.skipif(not _gluon_hopper(), reason="this Triton has no Gluon Hopper API (Triton >= 3.6)")
def test_two_q_buffers_compile_and_fit():
    """Two Q buffers per consumer at d = 128: Q x 2, O and the two-slot K/V ring use 224 KiB of
    the 227 a program may have, and the compiled kernel says the same."""
    from nlpcore.kernels import flash_fa3_gluon as kern

    assert kern.fits(128, 128, 2, True, 2, q_bufs=2) and not kern.fits(128, 128, 3, True, 2, q_bufs=2)
    out = _compiled("(lambda c: str(c.metadata.shared) + '\\n' + c.asm['ptx'])"
                    "(k.compile_for_hopper(128, 'bf16', causal=True, q_bufs=2))")
    shared, ptx = out.split("\n", 1)
    assert 224 * 1024 <= int(shared) <= kern.SMEM_BYTES, shared
    assert "wgmma.wait_group.sync.aligned 1" in ptx and "cp.async.bulk.tensor.3d" in ptx


@pytest.mark.skipif(not _gluon_hopper(), reason="this Triton has no Gluon Hopper API (Triton >= 3.6)")
@pytest.mark.parametrize("args, consumers", [("128, 'bf16', causal=False", 2),
                                             ("64, 'bf16', causal=True, consumers=3, stages=3", 3)])
def test_named_barriers_replace_the_warpgroup_syncs(args, consumers):
    """named=True: the ping-pong token and the K/V slot releases become per-warp bar.arrive on
    named barriers (the token counts two warpgroups, a release every consumer warp and the
    producer's), the producer waits with bar.sync; the consumers' one-thread mbarrier.arrive
    (each behind a warpgroup-wide bar.sync) is left for Q's release alone, and Triton's own
    barrier ids stay below the first one the kernel takes."""
    from nlpcore.kernels import flash_fa3_gluon as kern

    plain, named = (_compiled(f"k.compile_for_hopper({args}, named={flag}).asm['ptx']") for flag in (False, True))
    release = kern.PRODUCER_THREADS.value + consumers * kern.WG_THREADS.value
    arrive_counts = set(re.findall(r"bar\.arrive %r\d+, (\d+);", named))
    assert arrive_counts == {str(2 * kern.WG_THREADS.value), str(release)}, arrive_counts
    assert re.search(rf"bar\.sync %r\d+, {release};", named) and "bar.arrive" not in plain
    one_thread = r"mbarrier\.arrive\.shared::cta\.b64 _"
    assert len(re.findall(one_thread, named)) == consumers < len(re.findall(one_thread, plain))
    group_syncs = [len(re.findall(r"bar\.sync\s+\d+, 128;", ptx)) for ptx in (plain, named)]
    assert group_syncs[1] < group_syncs[0], group_syncs
    triton_ids = {int(i) for i in re.findall(r"\b(?:bar|barrier)\.sync\s+(\d+)[,;]", named)}
    assert max(triton_ids) < kern.FREE_K_BAR.value, triton_ids


def _generated(text, marker):
    start = text.index("<!-- generated table: " + marker)
    start = text.index("\n", start) + 1
    return text[start:text.index("<!-- end generated table -->", start)].strip()


def test_choice_table_is_the_sweeps_rule():
    """flash_fa3.CHOICES is what bench/fa3_h200_variants.py's rule picks from the recorded sweep
    (the fastest candidate that passed its float64 check, per head dim, mask and N)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import fa3_h200_variants as sweep
    finally:
        sys.path.pop(0)
    record = json.loads((ROOT / "bench" / "results" / "fa3_h200_variants.json").read_text(encoding="utf-8"))
    want = [(d, c, n_max, flash_fa3.Variant(**kw)) for d, c, n_max, kw in sweep.choices(record)]
    assert list(flash_fa3.CHOICES) == want
    for row in record["rows"]:  # every shape's choice passed its check in that run
        name = sweep.best(row)
        assert row["fwd"][name]["check"]["ok"], (row["d"], row["n"], row["causal"], name)
        assert flash_fa3.choose(row["d"], row["causal"], row["n"]) == flash_fa3.Variant(**row["fwd"][name]["variant"])


def test_withdrawn_variants_are_skipped_alike_in_python_and_on_the_page():
    """The rule and Episode 5's sweep table skip the same withdrawn Variant fields, and a
    withdrawn field is one the kernel's Variant no longer has."""
    import dataclasses

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import fa3_h200_variants as sweep
    finally:
        sys.path.pop(0)
    js = (ROOT / "site" / "js" / "fa3-episode.js").read_text(encoding="utf-8")
    listed = re.search(r"const WITHDRAWN = \[([^\]]*)\]", js).group(1)
    assert sorted(re.findall(r'"(\w+)"', listed)) == sorted(sweep.WITHDRAWN)
    assert not set(sweep.WITHDRAWN) & {f.name for f in dataclasses.fields(flash_fa3.Variant)}
    record = json.loads((ROOT / "bench" / "results" / "fa3_h200_variants_run6.json").read_text(encoding="utf-8"))
    for row in record["rows"]:
        assert "cross" not in row["fwd"][sweep.best(row)]["variant"], (row["d"], row["n"], row["causal"])


_FA3_MD = (ROOT / "bench" / "FA3.md").read_text(encoding="utf-8")
_MARKERS = re.findall(r"<!-- generated table: (\S+) (--markdown(?:-fa3)?) bench/results/(\S+) -->", _FA3_MD)


def test_fa3_md_generates_the_current_records():
    """The records the page and the claims read are among FA3.md's generated tables."""
    records = {record for _, _, record in _MARKERS}
    assert {"triton_h200.json", "fa3_h200.json", "fa3_h200_variants.json", "fa3_ncu.json"} <= records, records


@pytest.mark.parametrize("script, flag, record", _MARKERS, ids=[m[2] for m in _MARKERS])
def test_fa3_md_tables_are_the_records(script, flag, record):
    """Every table of bench/FA3.md is generated from a recorded H200 run, never typed."""
    env = {key: val for key, val in os.environ.items() if key != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "py"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), flag, str(ROOT / "bench" / "results" / record)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _generated(_FA3_MD, f"{script} {flag} bench/results/{record}") == proc.stdout.strip()
