"""Benchmark: what isolating the graders costs (issue 14), in CPython.

What it measures, per step of every Python-graded exercise: the wall time of grading the step's
reference solution (``nlpcore.lab.grade``, median of repeated runs after one warm-up: the
learner's phase runs in a forked process, nlpcore.lab.runner, so the judge's own CPU time is
recorded beside it but is not the whole cost), and the
parts isolation adds to every grade: taking the interpreter snapshot (``Snapshot.take``, once
per page, again after an exercise is first built) and restoring it when nothing was changed
(``Snapshot.restore``, once per grade). CPU time (``time.process_time``), so that other
processes on a shared machine do not inflate it.

The page's own numbers (Pyodide, wall time) come from
tests/browser/test_exercise_page_solutions.py, which prints them and holds each step under 1 s,
and from bench/exercise_page.py (ready, first grade and regrade on exercise.html).

Run:  .venv/bin/python bench/grading_cost.py                  (about 10 s)
      .venv/bin/python bench/grading_cost.py --repeats 1 --out /tmp/x.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (bench/common.py, next to this file)

OUT = Path(__file__).resolve().parent / "results" / "grading_cost.json"
SKIP = ("wgsl",)   # its checks run on a GPU in the page, not in Python
BUDGET_MS = 1000   # the page's bar (wall time in Pyodide); CPython CPU time must be far below


def wall_ms(fn, repeats: int) -> float:
    """Median wall-clock milliseconds of ``fn()`` over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return common.median(times)


def cpu_ms(fn, repeats: int) -> float:
    """Median CPU milliseconds of ``fn()`` over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append((time.process_time() - start) * 1e3)
    return common.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="runs per measurement (median)")
    parser.add_argument("--out", type=Path, default=OUT, help="where to write the JSON record")
    args = parser.parse_args(argv)

    from nlpcore import lab
    from nlpcore.lab import sandbox

    steps = []
    for ex in lab.exercises():
        if ex.id in SKIP:
            continue
        for step in ex.steps:
            first = lab.grade(ex.id, step.id, step.solution)            # warm-up
            if not first["passed"] or first["restored"]:
                raise SystemExit("%s/%s: the solution must pass and restore nothing, got %s"
                                 % (ex.id, step.id, first["restored"]))
            ms = cpu_ms(lambda: lab.grade(ex.id, step.id, step.solution), args.repeats)
            wall = wall_ms(lambda: lab.grade(ex.id, step.id, step.solution), args.repeats)
            steps.append({"exercise": ex.id, "step": step.id, "grade_cpu_ms": round(ms, 2),
                          "grade_wall_ms": round(wall, 2)})
    snapshot = sandbox.Snapshot.take()     # (the grader's own snapshot is sealed: not returned)
    take_ms = cpu_ms(sandbox.Snapshot.take, args.repeats)
    restore_ms = cpu_ms(snapshot.restore, args.repeats)
    slowest = max(steps, key=lambda s: s["grade_wall_ms"])
    targets = [common.target(
        "every step grades in under %d ms of wall time (CPython, learner phase in a fresh "
        "process)" % BUDGET_MS,
        slowest["grade_wall_ms"] < BUDGET_MS,
        "%s/%s: %.1f ms" % (slowest["exercise"], slowest["step"], slowest["grade_wall_ms"]),
        "< %d ms" % BUDGET_MS)]
    record = {
        "benchmark": "grading_cost", "recorded_at": common.now_iso(), "machine": common.machine(),
        "parameters": {"repeats": args.repeats},
        "command": " ".join(["bench/grading_cost.py"] + list(argv if argv is not None else sys.argv[1:])),
        "targets": targets,
        "steps": steps,
        "snapshot": {"take_cpu_ms": round(take_ms, 2), "restore_unchanged_cpu_ms": round(restore_ms, 2),
                     "namespaces": len(snapshot.namespaces), "functions": len(snapshot.functions),
                     "classes": len(snapshot.classes), "containers": len(snapshot.containers),
                     "objects": len(snapshot.instances)},
    }
    print(common.table(["exercise", "step", "grade wall ms", "judge CPU ms"],
                       [[s["exercise"], s["step"], s["grade_wall_ms"], s["grade_cpu_ms"]]
                        for s in steps]))
    print("snapshot take %.1f ms, restore (nothing changed) %.1f ms; %d namespaces, %d functions"
          % (take_ms, restore_ms, len(snapshot.namespaces), len(snapshot.functions)))
    print("targets:")
    common.print_targets(targets)
    common.write_result(args.out, record)
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
