"""The checks of both steps. GPU checks have two halves (see :mod:`nlpcore.lab.model`):
:meth:`GpuCase.prepare` fixes the plan, refuses a shader over the memory budget and returns a
dispatch spec carrying the shader inline, its loops guarded (:mod:`.guard`); the page runs it
(``site/js/exercises/wgsl.js``) and :meth:`GpuCase.verify` reads the loop guard's trips, then
compares what came back with the CPU mirror. The Python-only checks (interface, memory
budget, the mirror with the learner's plan) run without WebGPU too.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from nlpcore.kernels import flash_wgsl_mirror as mirror
from nlpcore.kernels import tiling
from nlpcore import tolerances
from nlpcore.lab.judging import assert_close, shapes_of
from nlpcore.lab.model import Check, CheckFailed

from .cases import TIMING_CASES, Case, _host, _tile_plan, expected, reference64
from . import guard
from .expressions import ShaderError
from .interface import BINDINGS, REQUIRED_USE, check_interface
from .reader import ShaderInfo, parse_shader
from .sizing import STORAGE_LIMIT, Layout, layout, refusal

MAX_INVOCATIONS = tiling.WEBGPU_DEFAULT_INVOCATIONS
# GPU vs mirror, both float32: the same sums, possibly added in another order.
TOLERANCE = {"atol": tolerances.GRADER["float32"].atol, "rtol": tolerances.GRADER["float32"].rtol}



def _source(ns) -> str:
    source = ns.get("source")
    if not isinstance(source, str) or not source.strip():
        raise CheckFailed("the editor is empty: write a WGSL compute shader",
                          expected="WGSL source", got=repr(source)[:40])
    return source


def _plan_for(ns, case: Case) -> Tuple[ShaderInfo, Layout]:
    """The learner's interface and layout for this case; CheckFailed (a refusal) when the
    interface is wrong or the workgroup arrays exceed the limit."""
    info = parse_shader(_source(ns))
    host = _host(case)
    try:
        check_interface(info)
        lay = layout(info, host)
    except ShaderError as err:
        raise CheckFailed(str(err), expected="the interface of the starter shader", unreadable=True)
    if lay.bytes_used > STORAGE_LIMIT:
        raise CheckFailed(refusal(lay, info, host), expected="<= %d bytes" % STORAGE_LIMIT,
                          got="%d bytes" % lay.bytes_used, layout=dict(lay.as_dict(), case=case.id))
    if lay.invocations > MAX_INVOCATIONS:
        raise CheckFailed("refused: @workgroup_size gives %d invocations, over WebGPU's default "
                          "maxComputeInvocationsPerWorkgroup of %d" % (lay.invocations, MAX_INVOCATIONS),
                          expected="<= %d" % MAX_INVOCATIONS, got=str(lay.invocations))
    return info, lay


class GpuCase:
    """prepare/verify of one GPU check (runner "webgpu")."""

    def __init__(self, case: Case):
        self.case = case

    def _spec(self, ns) -> Tuple[dict, guard.Guarded]:
        """The dispatch spec and the guarded shader it runs (rebuilt by verify, never taken
        from the page)."""
        source = _source(ns)
        info, lay = _plan_for(ns, self.case)
        # A shader that leaves bindings unused still goes to the page, which compiles it first:
        # a compiler error then reaches the learner before this (verify reports the unused ones).
        br, bc = lay.env["BR"], lay.env["BC"]
        q, k, v, mask, _, _ = expected(self.case, br, bc)
        spec = mirror.dispatch_spec(q, k, v, causal=self.case.causal, mask=mask,
                                    plan=_tile_plan(self.case, lay))
        n_k = spec["meta"]["n_k"]
        try:
            guarded = guard.instrument(
                source, guard.work_budget(n_k, self.case.d, self.case.dv, br, bc, lay.invocations),
                binding=max(list(info.bindings) + [b for b, _, _ in BINDINGS]) + 1)
        except ShaderError as err:
            raise CheckFailed(str(err), expected="a shader the loop guard can count", unreadable=True)
        spec["shader"] = "your-shader.wgsl"
        spec["code"] = guarded.code  # the learner's lines, every loop bounded
        spec["constants"] = dict(lay.constants)
        unbound = [b for b in spec["bindings"] if not info.uses(b["name"])]
        spec["bindings"] = [b for b in spec["bindings"] if info.uses(b["name"])]
        if any(l.function == "main" or info.uses(l.function) for l in guarded.loops):
            # the trips buffer, bound only when a loop can run: WebGPU rejects a binding that
            # the entry point does not use
            spec["bindings"].append({"binding": guarded.binding, "type": "storage",
                                     "name": guarded.name, "data": None, "size": guarded.size,
                                     "output": True})
        spec["meta"].update({
            "case": self.case.id, "case_text": self.case.describe(br, bc),
            "layout": lay.as_dict(),
            # the page compiles `source` for its messages (the learner's columns) and times it
            "guard": dict(guarded.meta(), source=source),
        })
        if self.case.id in TIMING_CASES:  # the same inputs through the lab's reference shader
            auto = tiling.plan(self.case.d, 4, dv=self.case.dv)
            spec["meta"]["reference"] = {"shader": mirror.FLASH_SHADER,
                                         "constants": auto.constants(),
                                         "workgroups": [-(-q.shape[1] // auto.br), 1, q.shape[0]],
                                         "br": auto.br, "bc": auto.bc,
                                         "bindings": unbound}  # those the learner's shader lacks
        return spec, guarded

    def spec(self, ns) -> dict:
        return self._spec(ns)[0]

    def prepare(self, ns) -> dict:
        """The case's dispatch spec; where the Python reader cannot read the shader (a
        CheckFailed marked ``unreadable``), a job that only has the page compile it
        (:func:`compile_only`), so that the compiler's message comes before the reader's."""
        try:
            return self.spec(ns)
        except CheckFailed as fail:
            if not fail.details.get("unreadable"):
                raise
            return compile_only(_source(ns), fail.message)

    def verify(self, ns, job, outputs) -> str:
        spec, guarded = self._spec(ns)  # rebuilt from the case, not trusted from the page
        _require_use(parse_shader(_source(ns)), "no result")
        br, bc = spec["meta"]["layout"]["br"], spec["meta"]["layout"]["bc"]
        context = "%s [%s; BR=%d, BC=%d]" % (self.case.title, self.case.describe(br, bc), br, bc)
        outputs = outputs or {}
        if any(b["name"] == guarded.name for b in spec["bindings"]):
            try:
                trips = guard.trips(guarded, outputs.get(guarded.name))
            except ValueError as err:
                raise CheckFailed("the page did not return the loop guard's record (%s), so this "
                                  "run proves nothing" % err, expected="outputs o, lse and %s"
                                  % guarded.name, got=sorted(outputs))
            invocations = int(np.prod(spec["workgroups"])) * spec["meta"]["layout"]["workgroup_size"]
            stopped = guard.describe_trips(guarded, trips, invocations)
            if stopped:
                raise CheckFailed("%s: %s" % (context, stopped), expected="every loop ends within "
                                  "its budget", got="stopped by the loop guard")
        q, k, v, mask, o_want, lse_want = expected(self.case, br, bc)
        missing = [n for n in ("o", "lse") if n not in outputs]
        if missing:
            raise CheckFailed("the page returned no %s buffer" % " or ".join(missing),
                              expected="outputs o and lse", got=sorted(outputs))
        o, lse = mirror.decode_outputs(spec, outputs)
        shapes = shapes_of(q=q, k=k, v=v, o=o_want)
        if not np.any(o) and np.any(o_want):
            raise CheckFailed("%s: your kernel left o all zeros — nothing was written back "
                              "(the final write of o and lse?)" % context, expected="o ≈ the mirror's output",
                              got="all zeros", shapes=shapes, tolerance=_tol_text())
        err_o = assert_close("o", o, o_want, shapes=shapes, context=context, **TOLERANCE)
        err_lse = assert_close("lse", lse, lse_want, shapes=shapes, context=context, **TOLERANCE)
        return ("max |Δ| o = %.2g, lse = %.2g vs the CPU mirror (tolerance %s) on %s; BR=%d, BC=%d"
                % (err_o, err_lse, _tol_text(), self.case.describe(br, bc), br, bc))


COMPILE_ONLY_SIZE = 4      # rows, keys and head dim of the lab shader's stand-in run


def compile_only(source: str, why: str) -> dict:
    """A page job for a shader the Python reader could not read (``why``): the page compiles
    the learner's ``source`` (``meta.guard.source``, for its messages; a compile error fails
    every check with the compiler's message) and then runs the lab's own shader on a tiny
    input in its place, which nothing judges: :meth:`GpuCase.verify` rebuilds the spec from
    the source and so reports the reader's message, once the compiler accepted the shader."""
    n = COMPILE_ONLY_SIZE
    zeros = np.zeros((1, n, n), dtype=np.float32)                   # (B, N, d)
    spec = mirror.dispatch_spec(zeros, zeros, zeros, plan=tiling.plan(n, 4))
    spec["meta"].update({"compile_only": why,
                         "guard": {"source": source, "name": "", "loops": []}})
    return spec


def _tol_text() -> str:
    return "|Δ| <= %g + %g·|expected|, float32" % (TOLERANCE["atol"], TOLERANCE["rtol"])


def gpu_check(case: Case) -> Check:
    g = GpuCase(case)
    return Check(case.id, case.title, runner="webgpu", prepare=g.prepare, verify=g.verify)


# ------------------------------------------------------------------------------------------
# Checks that run in Python alone (also without WebGPU)
# ------------------------------------------------------------------------------------------

def _require_use(info: ShaderInfo, what: str) -> None:
    """CheckFailed unless the shader uses every binding the kernel needs: an untouched starter
    (TODOs in place) passes no check."""
    unused = [n for n in REQUIRED_USE if not info.uses(n)]
    if unused:
        raise CheckFailed("%s: your shader declares but never uses %s — the kernel must read "
                          "params, q, k, v and write o and lse (see the TODOs)"
                          % (what, ", ".join(unused)), expected="every binding in use",
                          got="unused: " + ", ".join(unused))


def _check_interface(ns) -> str:
    info = parse_shader(_source(ns))
    try:
        check_interface(info)
    except ShaderError as err:
        raise CheckFailed(str(err), expected="the interface of the starter shader", unreadable=True)
    _require_use(info, "interface incomplete")
    plan = ", ".join("%s = %s" % (n, info.overrides[n] or "set by the host")
                     for n in ("BR", "BC", "KS", "SPART") if n in info.overrides)
    return "bindings 0-6, overrides D, DV%s and @compute fn main (line %d) are in place" % (
        (", " + plan) if plan else "", info.entry_line)


def _budget(cases):
    def run(ns) -> str:
        info = parse_shader(_source(ns))
        _require_use(info, "not measured yet")
        if not info.workgroup:
            raise CheckFailed("your shader keeps nothing in workgroup memory: a tiled kernel "
                              "stages its K and V tiles there (var<workgroup>), for every "
                              "invocation of the workgroup to share", expected="K/V tiles in "
                              "var<workgroup> arrays", got="no var<workgroup> array")
        worst = None
        for case in cases:
            _, lay = _plan_for(ns, case)
            if worst is None or lay.bytes_used > worst[1].bytes_used:
                worst = (case, lay)
        case, lay = worst
        return ("largest use %d of %d bytes (%s) on %s, BR=%d, BC=%d"
                % (lay.bytes_used, STORAGE_LIMIT, ", ".join("%s %d" % (n, b) for n, b, _ in lay.arrays),
                   case.describe(lay.env["BR"], lay.env["BC"]), lay.env["BR"], lay.env["BC"]))
    return run


def _mirror(cases):
    def run(ns) -> str:
        _require_use(parse_shader(_source(ns)), "not checked yet")
        worst = 0.0
        for case in cases:
            _, lay = _plan_for(ns, case)
            br, bc = lay.env["BR"], lay.env["BC"]
            q, k, v, mask, o, lse = expected(case, br, bc)
            o64, lse64 = reference64(case, br, bc)
            shapes = shapes_of(q=q, k=k, v=v)
            context = "mirror with BR=%d, BC=%d on %s" % (br, bc, case.describe(br, bc))
            worst = max(worst, assert_close("o", o, o64, shapes=shapes, context=context),
                        assert_close("lse", lse, lse64, shapes=shapes, context=context))
        return ("the CPU mirror with your tile plan matches the float64 reference on all %d cases "
                "(max |Δ| %.2g); these are the values the GPU checks compare against"
                % (len(cases), worst))
    return run


def _changed(run, starter: str):
    """``run``, failing first while the source is the untouched ``starter`` (whitespace aside):
    a Harden starter already has the interface and plan these checks look at, and must pass
    nothing before the learner hardened it."""
    untouched = " ".join(starter.split())

    def checked(ns) -> str:
        if " ".join(_source(ns).split()) == untouched:
            raise CheckFailed("this is the untouched starter: harden it first (see the TODOs); "
                              "this check runs on your changed shader",
                              expected="your hardened shader", got="the starter")
        return run(ns)
    return checked


def python_checks(cases, starter: str = None) -> Tuple[Check, ...]:
    """The checks that run in Python alone; with ``starter`` (a Harden step), each fails while
    the source is still that starter."""
    runs = (_check_interface, _budget(cases), _mirror(cases))
    if starter is not None:
        runs = tuple(_changed(run, starter) for run in runs)
    return (
        Check("interface", "Interface: bindings, overrides, entry point (runs without WebGPU)",
              run=runs[0]),
        Check("budget", "Workgroup memory fits %d bytes (runs without WebGPU)" % STORAGE_LIMIT,
              run=runs[1]),
        Check("mirror", "Mirror only: the CPU mirror with your plan vs float64 (runs without WebGPU)",
              run=runs[2]),
    )
