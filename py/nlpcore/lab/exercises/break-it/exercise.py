"""Exercise ``break-it``: predict a weak suite's kill matrix, then write tests that kill every
mutant of a clean online-softmax kernel. The kernel, mutants and suites are in
:mod:`mutants` beside this file; the kill matrix is computed live (in Pyodide on the page)."""
from __future__ import annotations

import copy
import types

from nlpcore.lab.model import Check, CheckFailed, Exercise, Folder, Step
from . import hidden
from . import mutants as mu

HERE = Folder(__file__)  # this exercise's folder: statements, starters, solutions

# The Break-it starter is the weak suite itself (so the two can never differ), framed for the
# learner: what a test receives, and where to add.
_BREAK_STARTER = mu.WEAK_SUITE_SOURCE.replace(
    "import numpy as np\n",
    "import numpy as np\n\n"
    "# Your test suite. Each test_* function receives a kernel `softmax(x, block)` and must pass\n"
    "# on the clean kernel and fail (assert or raise) on as many mutants as possible.\n"
    "# This starts as a copy of the weak suite: it kills only some of the five mutants.\n",
    1,
) + "\n\n# TODO: add tests so that every mutant is killed.\n"


def _weak_matrix():
    return mu.kill_matrix(mu.load_suite(mu.WEAK_SUITE_SOURCE))


def _collect_prediction(ns):
    """Phase 1: the prediction as plain data ({str: [str]}), or a description of what it is."""
    pred = ns["prediction"]
    if not isinstance(pred, dict):
        return type(pred).__name__
    out = {}
    for mid, tests in pred.items():
        if tests is None:  # the starter's "not answered yet"
            out[str(mid)] = None
        elif not isinstance(tests, (list, tuple, set)):
            out[str(mid)] = type(tests).__name__
        else:
            out[str(mid)] = [t if isinstance(t, str) else repr(t) for t in tests]
    return out


def _check_prediction_shape(pred):
    weak = list(mu.load_suite(mu.WEAK_SUITE_SOURCE))
    if not isinstance(pred, dict):
        raise CheckFailed("prediction must be a dict {mutant: [test names]}",
                          expected="dict", got=pred)
    missing = [m for m in mu.MUTANTS if m not in pred]
    unknown = [m for m in pred if m not in mu.MUTANTS]
    if missing or unknown:
        raise CheckFailed("prediction must have one entry per mutant",
                          expected="keys %s" % ", ".join(mu.MUTANTS),
                          got="missing %s; unknown %s" % (missing or "none", unknown or "none"))
    unanswered = [m for m in mu.MUTANTS if pred[m] is None]
    if unanswered:  # the starter's placeholders: [] is an answer ("no test kills it"), None is not
        raise CheckFailed("%s %s still None: replace %s with a list of test names ([] if no "
                          "test of the weak suite kills it)"
                          % (", ".join(unanswered), "is" if len(unanswered) == 1 else "are",
                             "it" if len(unanswered) == 1 else "each"),
                          expected="a list of test names for every mutant",
                          got="no answer yet for %d of %d mutants: %s"
                          % (len(unanswered), len(mu.MUTANTS), ", ".join(unanswered)))
    for mid, tests in pred.items():
        if not isinstance(tests, list):
            raise CheckFailed("prediction[%r] must be a list of test names" % mid, got=tests)
        bad = [t for t in tests if t not in weak]
        if bad:
            raise CheckFailed("prediction[%r] names tests that are not in the weak suite" % mid,
                              expected="names among %s" % ", ".join(weak), got=", ".join(bad))
    return "a prediction for each of the 5 mutants"


def _check_prediction(pred):
    _check_prediction_shape(pred)
    matrix = _weak_matrix()
    live = mu.killers(matrix)
    table = mu.matrix_table(matrix)
    wrong = []
    parts = {}  # row -> "right" | "wrong": what a page may show before it shows the answer
    for mid, tests in live.items():
        guess = sorted(set(pred.get(mid, ())))
        parts[mid] = "right" if guess == sorted(tests) else "wrong"
        if guess != sorted(tests):
            wrong.append("%s: you said %s, it is %s" % (mid, guess or "none", sorted(tests) or "none"))
    if wrong:
        raise CheckFailed("%d of 5 rows of your prediction differ from the live kill matrix"
                          % len(wrong), expected="; ".join("%s: %s" % (m, t or "none")
                                                           for m, t in live.items()),
                          got="; ".join(wrong), table=table, parts=parts)
    survivors = [m for m, t in live.items() if not t]
    return ("all 5 rows right. The weak suite lets %d mutants survive: %s"
            % (len(survivors), ", ".join(survivors)))


def _learner_tests(ns):
    tests = mu.tests_in(ns)
    if not tests:
        raise CheckFailed("define at least one test: a function named test_... that takes "
                          "the kernel `softmax`", expected="def test_something(softmax): ...",
                          got="no test_* functions")
    return tests


def _collect_matrix(ns):
    """Phase 1: the learner's kill matrix as plain data ({kernel: {test: outcome string}}),
    over the hidden kernels (:mod:`hidden`: the same bugs written differently from the shown
    ones). The suite gets them as stand-ins that only their behaviour tells apart, made for this
    grade in an order drawn from the operating system's entropy (:func:`hidden.for_suite`);
    each column is filled before anyone knows which kernel it belongs to (:func:`hidden.identify`
    reads that once every test ran), and the tests' module state (values, function defaults and
    attributes) is put back before every kernel, so a suite can neither recognise a kernel by
    its code, name or frames nor count its way to one."""
    tests = _learner_tests(ns)
    reset = _state_keeper(ns)
    stand_ins = hidden.for_suite()
    columns = []
    for kernel in stand_ins:
        reset()
        columns.append({str(t): str(mu.outcome(fn, kernel)) for t, fn in tests.items()})
    matrix = {hidden.identify(kernel): column for kernel, column in zip(stand_ins, columns)}
    return {kid: matrix[kid] for kid in ["clean"] + list(mu.MUTANTS)}


def _state_keeper(ns):
    """A function that puts the learner's module-level values, and its functions' defaults and
    attributes, back to deep copies of what they are now (what cannot be copied is left)."""
    saved, functions = {}, []
    for name, value in list(ns.items()):
        if name.startswith("__"):
            continue
        if isinstance(value, types.FunctionType):
            try:
                functions.append((value, copy.deepcopy(value.__defaults__),
                                  copy.deepcopy(value.__kwdefaults__), copy.deepcopy(value.__dict__)))
            except BaseException:  # learner objects may refuse to be copied
                pass
        elif not isinstance(value, (types.ModuleType, type)):
            try:
                saved[name] = copy.deepcopy(value)
            except BaseException:
                pass

    def reset():
        for name, value in saved.items():
            ns[name] = copy.deepcopy(value)
        for fn, defaults, kwdefaults, attrs in functions:
            fn.__defaults__, fn.__kwdefaults__ = copy.deepcopy(defaults), copy.deepcopy(kwdefaults)
            fn.__dict__.clear()
            fn.__dict__.update(copy.deepcopy(attrs))
    return reset


def _check_clean(matrix):
    failing = [(t, r) for t, r in matrix["clean"].items() if r != "pass"]
    if failing:
        raise CheckFailed("%d of your tests fail on the clean kernel: a test must accept "
                          "correct code" % len(failing),
                          expected="every test passes on the clean kernel",
                          got="; ".join("%s: %s" % f for f in failing)[:400],
                          table=mu.matrix_table(matrix))
    return "%d tests, all pass on the clean kernel" % len(matrix["clean"])


def _check_kills(mutant_id):
    def judge(matrix):
        clean_fail = [t for t, r in matrix["clean"].items() if r != "pass"]
        killers = [t for t, r in matrix[mutant_id].items()
                   if r != "pass" and t not in clean_fail]
        if not killers:
            what, line, after = mu.MUTANTS[mutant_id]
            raise CheckFailed("no test (that passes on the clean kernel) kills %s (the bug: %s, "
                              "line %d)" % (mutant_id, what, line),
                              expected="at least one test fails on the mutant",
                              got="all %d tests pass on it" % len(matrix["clean"]))
        return "killed by " + ", ".join(killers)
    return judge


def report_break(ns) -> dict:
    """The learner's full kill matrix, for the page to draw below the checks (computed while
    the learner's tests exist, like the checks' collect)."""
    return {"table": mu.matrix_table(mu.kill_matrix(mu.tests_in(ns)))}


def build() -> Exercise:
    kernel_panel = {"title": "The clean kernel", "code": mu.CLEAN_SOURCE, "language": "python"}
    mutant_panel = {"title": "Five one-line mutants",
                    "code": "\n".join("# %s: %s (line %d)\n-%s\n+%s\n"
                                      % (m["id"], m["what"], m["line"], m["before"], m["after"])
                                      for m in mu.mutant_lines()), "language": "diff"}
    weak_panel = {"title": "The weak test suite", "code": mu.WEAK_SUITE_SOURCE,
                  "language": "python"}
    predict = Step(
        id="predict", kind="Predict", title="Predict the kill matrix", minutes=20,
        statement=HERE.statement("predict"),
        starter=HERE.starter("predict"), solution=HERE.solution("predict"),
        hints=(
            "Subtracting any constant $c \\geq \\max x$ gives the same softmax in exact "
            "arithmetic. A mutant that only changes *which* constant is subtracted is wrong "
            "only when floating point underflows: $e^{-800} = 0$ in float64.",
            "test_rows_sum_to_one uses $N = 30$ with blocks of 8; the other tests use "
            "multiples of the block.",
            "Which test has a row whose first block is all $-\\infty$? None.",
        ),
        required=("prediction",), record=("prediction",),
        checks=(
            Check("complete", "a prediction per mutant", collect=_collect_prediction,
                  judge=_check_prediction_shape),
            Check("matrix", "prediction = live kill matrix", collect=_collect_prediction,
                  judge=_check_prediction),
        ))
    break_it = Step(
        id="break", kind="Break it", title="Write tests that kill all five", minutes=30,
        statement=HERE.statement("break"),
        starter=_BREAK_STARTER, solution=HERE.solution("break"),
        hints=(
            "Compare against a plain softmax that subtracts the row max (and gives zeros for "
            "an all -inf row).",
            "Input whose max grows from block to block (e.g. `np.linspace`) kills "
            "missing-rescale; N = 19 with block 8 kills dropped-tail.",
            "Rows ≈ -900 kill zero-init-max; two rows 1000 apart kill global-max (e^{-1000} underflows to 0; e^{-500} does not); a row whose "
            "first 8 entries are -inf kills unguarded-inf.",
        ),
        report=report_break,
        checks=(Check("clean", "every test passes on the clean kernel",
                      collect=_collect_matrix, judge=_check_clean),)
        + tuple(Check("kills-" + mid, "kills " + mid, collect=_collect_matrix,
                      judge=_check_kills(mid)) for mid in mu.MUTANTS),
    )
    return Exercise(
        id="break-it", title="Break it: mutants and a kill matrix",
        tier="browser", minutes=50,
        summary=("Five one-line bugs in an online-softmax kernel and a weak test suite that "
                 "misses some. Predict the kill matrix, then write tests that kill them all."),
        steps=(predict, break_it),
        sources=("Milakov & Gimelshein 2018, arXiv:1805.02867 (the kernel's online normaliser)",),
        extra={"panels": [kernel_panel, mutant_panel, weak_panel],
               "mutants": mu.mutant_lines(),
               "weak_suite_misses": list(mu.WEAK_SUITE_MISSES),
               "reports": {"break": "kill-matrix"}})
