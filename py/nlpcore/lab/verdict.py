"""The verdict: phase 2 of a grade, where no learner code ever ran.

:func:`judge` turns what :func:`nlpcore.lab.session.collect` returned (unpacked by
:mod:`nlpcore.lab.wire`) into the finished grade: every check's ``judge`` computes the expected
values with the untouched library and compares, and :func:`finish` applies every rule of the
grade (``passed``; a grade that had to restore anything cannot pass; the seed in the failure
messages; a Predict step's incomplete prediction is refused, ungraded). :func:`conclude`
finishes a grade whose page-run checks (WebGPU) came back, and :func:`verify_js` judges one of
them from its job and outputs, without running learner code.
:func:`grade` runs both phases in this interpreter, the data crossing through
:mod:`nlpcore.lab.wire` as between two (tests, Python without processes).
"""
from __future__ import annotations

import os
import time
from typing import List, Optional

from . import model, session, wire
from .model import Check, CheckFailed, Exercise, Step, result


# ------------------------------------------------------------------------------------------
# Phase 2: where no learner code ever ran
# ------------------------------------------------------------------------------------------

def judge(exercise: Exercise, step_id: str, phase: dict) -> dict:
    """The finished grade from what :func:`nlpcore.lab.session.collect` returned (unpacked by
    :func:`nlpcore.lab.wire.unpack`): {exercise, step, checks, passed, record, report,
    elapsed_ms, stdout, stderr, traceback, restored, seed}. Every rule of the verdict is here:
    ``passed`` needs at least one graded check and every graded check passing, and a grade
    whose learner side changed the interpreter (``restored``) cannot pass."""
    step = exercise.step(step_id)
    start = time.perf_counter()
    model.set_seed(phase["seed"])
    model.set_outside((phase.get("outside") or {}).get("peak_growth"))
    verdicts, collected = phase["verdicts"], phase["collected"]
    if phase.get("stopped"):            # the learner's process ended without a result
        verdicts = {i: result(c.id, c.title, "error", phase["stopped"])
                    for i, c in enumerate(step.checks) if c.runner != "local"}
    checks, incomplete = [], []  # incomplete: failed completeness checks, judged here
    timing = dict(phase.get("timing") or {})  # check index -> ms, learner part + judging
    only = phase.get("only")            # "rerun this check alone": the others are left out
    with session.quiet():
        for i, check in enumerate(step.checks):
            if only is not None and check.id not in only:
                continue
            if check.runner == "local":
                checks.append(result(check.id, check.title, "local", check.explain,
                                     command=check.command, runner="local"))
            elif i in verdicts:
                checks.append(_learner_verdict(step, check, verdicts[i]))
            elif i in collected:
                judging_started = time.perf_counter()
                checks.append(_judged(check, check.judge, collected[i]))
                timing[i] = timing.get(i, 0.0) + (time.perf_counter() - judging_started) * 1e3
                if check.id in COMPLETENESS_CHECKS and checks[-1]["status"] == "fail":
                    incomplete.append(checks[-1])
            else:
                checks.append(result(check.id, check.title, "error",
                                     "the grader received nothing for this check"))
    at = {c.id: i for i, c in enumerate(step.checks)}
    checks = [dict(c, ms=round(timing[at[c["id"]]], 1)) if at[c["id"]] in timing else c for c in checks]
    phase = dict(phase, refused=refusal(step, incomplete))
    return finish(exercise, step, checks, phase, judged_ms=(time.perf_counter() - start) * 1e3)


def _learner_verdict(step: Step, check: Check, verdict: dict) -> dict:
    """A verdict the learner's side decided (the code did not load, a collect failed, a refused
    call, a page job). For a Python step it can only be a failure, an error or a page job: the
    learner's side never passes a check of learner code, only this judge does, so a "pass" from
    there (a rewritten record) is refused."""
    if step.language == "python" and verdict.get("status") not in ("fail", "error", "pending"):
        return result(check.id, check.title, "error", "the side that ran your code reported %r "
                      "for this check, which only the judge may decide" % verdict.get("status"))
    return verdict


# A Predict step's checks that ask only "is every part of the answer there?" (their message
# names what is missing, e.g. "peak_elements is still None").
COMPLETENESS_CHECKS = ("recorded", "complete")


def refusal(step: Step, missing: List[dict]) -> Optional[str]:
    """Why a Predict step's answer is refused, from its completeness checks that the judge
    failed (``missing``), or None. A refused answer is not a prediction: nothing of it is graded
    (see :func:`finish`), so that filling one part at a time cannot narrow in on the answer
    before the first prediction is recorded. (Code that failed to load, or was refused for the
    modules it calls, fails in phase 1 with its own message and is not "incomplete".)"""
    if step.kind != "Predict" or not missing:
        return None
    return ("Not recorded: your prediction is incomplete \u2014 %s. Nothing was graded; your "
            "first complete answer is the one kept." % "; ".join(c["message"] or c["title"] for c in missing))


def finish(exercise: Exercise, step: Step, checks: List[dict], phase: dict,
           judged_ms: float = 0.0) -> dict:
    """The grade's rules applied to its checks (also after the page ran its jobs)."""
    restored = list(phase.get("restored") or [])
    checks = _wait_for_the_compiler(step, checks)
    seed = phase.get("seed")
    refused = phase.get("refused")  # from judge(); conclude() passes the grade, which keeps it
    if refused:  # every check "not-run", the completeness checks too: the summary says what is missing
        checks = [c if c["status"] == "local" else
                  result(c["id"], c["title"], "not-run", "not run: the prediction is incomplete",
                         runner=c.get("runner"))
                  for c in checks]
    if restored:
        why = ("your code changed the grader's interpreter (%s), so this grade cannot pass"
               % ", ".join(restored[:3]))
        checks = [dict(c, status="fail", message=why) if c["status"] == "pass" else c
                  for c in checks]
    checks = [dict(c, message="%s (inputs seeded with %d)" % (c["message"], seed))
              if c["status"] == "fail" and seed is not None and c.get("runner", "python") == "python"
              and "(inputs seeded with" not in c["message"] else c for c in checks]
    checks = [dict(c, completeness=True) if c["id"] in COMPLETENESS_CHECKS else c for c in checks]
    graded = [c for c in checks if c["status"] != "local"]
    out = {"exercise": exercise.id, "step": step.id, "checks": checks,
           "passed": bool(graded) and all(c["status"] == "pass" for c in graded),
           "record": phase.get("record") or {}, "report": phase.get("report"),
           "elapsed_ms": round(phase.get("elapsed_ms", 0.0) + judged_ms, 1),
           "stdout": phase.get("stdout", ""), "stderr": phase.get("stderr", ""),
           "traceback": phase.get("traceback", ""), "restored": restored, "seed": seed,
           "refused": refused,
           # as data, for the page: an incomplete Predict answer, and what stopped the code loading
           "incomplete": bool(refused), "problem": phase.get("problem")}
    if phase.get("only") is not None:  # some checks alone: never a pass of the step
        out.update(passed=False, only=list(phase["only"]))
    return out


def _judged(check: Check, fn, *args, **details) -> dict:
    """One judge's verdict. No learner code runs here, so an exception other than CheckFailed is
    the grader's own failure, and reported as such."""
    try:
        message = fn(*args)
    except CheckFailed as fail:
        return result(check.id, check.title, "fail", fail.message, **dict(details, **fail.details))
    except Exception as err:  # a bug in the grader, not in the learner's code
        return result(check.id, check.title, "error",
                      "the grader itself failed (%s: %s) -- a fault of the grader, not of your "
                      "code; please report it" % (type(err).__name__, err), **details)
    return result(check.id, check.title, "pass", message or "", **details)


def grade(exercise: Exercise, step_id: str, code: str, seed: Optional[int] = None) -> dict:
    """Both phases in this interpreter, the collected data crossing through
    :mod:`nlpcore.lab.wire` as it would between two: for exercises built in a test, and for
    Python without subprocesses. :func:`nlpcore.lab.grade` runs phase 1 in a fresh interpreter."""
    seed = new_seed() if seed is None else seed
    return judge(exercise, step_id, wire.unpack(wire.pack(session.collect(exercise, step_id, code, seed))))


def conclude(exercise: Exercise, step_id: str, code: str, grade: dict, ran: dict) -> dict:
    """The finished grade once the page ran its pending jobs: ``ran`` maps a pending check's id
    to ``{"outputs": {name: bytes}}`` or ``{"error": message, "fails_all": bool}`` (the page's
    runner could not run it; ``fails_all`` when the code itself is unusable, a shader that does
    not compile: every graded check then errors with that message). Judge side: the learner's
    code does not run."""
    step = exercise.step(step_id)
    checks, unusable = [], None
    for c in grade["checks"]:
        if c["status"] == "pending":
            got = ran.get(c["id"])
            if not isinstance(got, dict):
                c = result(c["id"], c["title"], "error", "the page did not run this check",
                           runner=c.get("runner"))
            elif "outputs" in got:
                c = verify_js(exercise, step_id, c["id"], code, c.get("job"), got["outputs"])
            else:
                c = result(c["id"], c["title"], "error", "could not run on %s: %s"
                           % (c.get("runner"), got.get("error")), runner=c.get("runner"))
                if got.get("fails_all") and unusable is None:
                    unusable = str(got.get("error"))
        checks.append(c)
    if unusable is not None:
        checks = [c if c["status"] in ("local", "error") else
                  result(c["id"], c["title"], "error", "not graded: %s" % unusable,
                         runner=c.get("runner")) for c in checks]
    compiled = any(isinstance(ran.get(c["id"]), dict) and "outputs" in ran[c["id"]]
                   for c in grade["checks"] if c["status"] == "pending")
    # No page job ran, and none for a reason that condemns the shader (no WebGPU in this
    # browser, say): there is no compiler to wait for, so the Python checks' own verdicts stand.
    no_compiler = not compiled and unusable is None
    checks = [_after_the_compiler(c, compiled, no_compiler) for c in checks]
    return finish(exercise, step, checks, grade)


WAITING = "waiting"     # a Python check of a shader, held until the page's compiler accepts it


def _wait_for_the_compiler(step: Step, checks: List[dict]) -> List[dict]:
    """In a step whose code only the page compiles (a WGSL shader), a Python check that passed,
    and any check that failed because the Python reader could not read the shader (marked
    ``unreadable``), waits (status WAITING, its verdict kept in ``held``) while page jobs are
    pending: a shader that does not compile must pass nothing, and the compiler's message
    comes first."""
    if step.language == "python" or not any(c["status"] == "pending" for c in checks):
        return checks
    return [dict(c, status=WAITING, held={"status": c["status"], "message": c["message"]},
                 message="waits for the page to compile your shader: %s" % c["message"])
            if (c["status"] == "pass" and c.get("runner", "python") == "python")
            or (c["status"] == "fail" and c.get("unreadable")) else c
            for c in checks]


def _after_the_compiler(c: dict, compiled: bool, no_compiler: bool = False) -> dict:
    """A WAITING check once the page is done: its held verdict where the page compiled the
    shader or has no compiler (a pass then says it was checked without compiling); an error
    where the page ran nothing of it."""
    if c["status"] != WAITING:
        return c
    held = c.get("held") or {}
    if (compiled or no_compiler) and held.get("status") in ("pass", "fail"):
        note = ("" if compiled or held["status"] != "pass" else
                " (checked without compiling: the page could not run your shader)")
        return dict({k: v for k, v in c.items() if k != "held"}, status=held["status"],
                    message=held.get("message", "") + note)
    return result(c["id"], c["title"], "error", "not run: the page did not compile your "
                  "shader, so its Python-side checks were not graded")


def new_seed() -> int:
    """A seed for one grade's inputs (shown in the messages, so a failure can be reproduced)."""
    return int.from_bytes(os.urandom(4), "little") % 1000000


def verify_js(exercise: Exercise, step_id: str, check_id: str, code: str, job, outputs) -> dict:
    """Second half of a JS-run check: the page ran ``job`` (collected once, by :func:`nlpcore.lab.session.collect`)
    and hands back ``outputs``; the verdict is computed here without running the learner's code
    (``verify`` sees the job, the outputs and the source text only)."""
    step = exercise.step(step_id)
    check = next((c for c in step.checks if c.id == check_id), None)
    if check is None or check.runner in ("python", "local"):
        raise ValueError("check must name a JS-run check of step %r, got %r" % (step_id, check_id))
    if not isinstance(code, str):
        raise TypeError("code must be a str of source, got %s" % type(code).__name__)
    with session.quiet():
        return _judged(check, check.verify, {"source": code}, job, outputs, runner=check.runner)
