"""The 60-minute lab F08.01, "FlashAttention: Exact Attention That Respects the Memory
Hierarchy" (browser): twelve steps on lab.html that cycle predict -> run -> measure -> explain
over the lab page's comparison, the visualizer, the IO model and a timing of the learner's own
GPU, and find where tiling wins and where it loses (small M, small N).

One step, one statement file: ``steps/NN-<id>.md`` holds its text, its question, its choices
and the name of its checker (format: :mod:`.statements`). Beside them:
:mod:`.settings` (the sizes the steps use), :mod:`.answers` (strict parsing of an answer),
:mod:`.truths` (the true answers computed from the library) and :mod:`.checkers` (one verdict
function per kind of step).

The page (site/js/lab-steps.js) renders :func:`export` and asks :func:`check` for a verdict
(through ``nlpcore.web``), passing what it observed: the last ``lab:compared`` detail
(``status``, ``maxAbsErr``, ``params``, ``plan``) and, once the learner has timed the shaders,
``timing`` = ``{"adapter", "d", "rows": [{"n", "tiled_ms", "naive_ms"}]}``. Every true answer
is computed at check time -- from the library or from what the page observed -- never typed in
as a constant.
"""
from __future__ import annotations

from typing import Optional

from . import answers, checkers, statements
from .settings import (IO_D, IO_M, IO_N, NUMBER_RTOL, OK_STATUSES, REFUSE_D, SMALL_M_D,  # noqa: F401
                       SMALL_M_N, TILE_D, TIMING_D, TIMING_SIZES, VIZ_D, VIZ_M, VIZ_N)
from .truths import io_ratio, io_ratio_shortcut, plan_refuses, skipped_tiles, smallest_winning_m  # noqa: F401

TITLE = "FlashAttention: Exact Attention That Respects the Memory Hierarchy"
CODE = "F08.01"
TIER = "browser"
MINUTES = 60

STEPS = statements.read_all()
for _step_spec in STEPS:
    if _step_spec["checker"] not in checkers.CHECKERS:
        raise ValueError("step %r names checker %r; the checkers are %s"
                         % (_step_spec["id"], _step_spec["checker"], sorted(checkers.CHECKERS)))


def export() -> list:
    """The steps as plain data for the page (numbered from 1); choices as their texts only."""
    out = []
    for number, step in enumerate(STEPS, start=1):
        item = {k: v for k, v in step.items() if k not in ("answer", "checker")}
        answer = {k: v for k, v in step["answer"].items() if k not in ("choices", "right")}
        if "choices" in step["answer"]:
            answer["choices"] = [c["text"] for c in step["answer"]["choices"]]
        item["answer"] = answer
        item["number"] = number
        out.append(item)
    return out


def _step(step_id: str) -> dict:
    for step in STEPS:
        if step["id"] == step_id:
            return step
    raise ValueError("step must be one of %s, got %r" % ([s["id"] for s in STEPS], step_id))


def check(step: str, answer=None, observed: Optional[dict] = None) -> dict:
    """Check one guided-lab answer against the truth computed now.

    ``observed`` is what the page saw (module docstring). Returns {"status": "pass"|"fail",
    "message"}; the message says what is right, or why not, without giving the number away.
    """
    spec = _step(step)
    value, problem = answers.parse(spec, answer)
    if problem:
        return checkers.verdict(False, problem)
    return checkers.CHECKERS[spec["checker"]](spec, value, observed)
