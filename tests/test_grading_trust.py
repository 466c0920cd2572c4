"""What learner code can and cannot learn or reach while it is graded (issue 22, closing note's
points b and d), in CPython 3.11 and in Python 3.8 / NumPy 1.17 (.venv38, the page's versions).

Each attack runs as a learner would submit it, through ``nlpcore.lab.grade`` (the learner's
phase in a fresh process), in a batch per interpreter. Where an attack needs to tell us what it
saw, it writes to a file (a channel outside the grade, which a real learner would not have).

- Break it's kernels: the suite gets six stand-ins that only their behaviour tells apart --
  same name, qualname, module, docstring, defaults, no closure, no attributes; reading their
  ``__code__`` fails the grade; the hidden module's file is refused; their order is drawn from
  the operating system's entropy, not from the grade's seed; no frame on the stack while the
  suite runs (walked with ``sys._getframe``/``f_back``/``f_locals``, from a test or from inside
  the kernel through ``__array__``/``__index__``, or from a caught exception's traceback) holds a
  kernel's identity or is a hidden kernel's own frame.
- Frames: ``sys.settrace``/``sys.setprofile``/``sys.addaudithook`` are refused while a grade runs
  (a trace function could rewrite a grader frame's variables); code compiled under an nlpcore
  file name (to pass for the grader's own code) is refused; reading ``f_code`` of grader frames
  from ``inspect.stack()`` fails the grade, while honest ``inspect.stack()`` and
  ``traceback.print_stack()`` pass.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap

import pytest

from nlpcore import lab
from nlpcore.lab.exercises import module

ROOT = pathlib.Path(__file__).resolve().parents[1]
PY38 = ROOT / ".venv38" / "bin" / "python"
KERNEL_IDS = ("clean", "missing-rescale", "dropped-tail", "zero-init-max", "global-max",
              "unguarded-inf")
BREAK = lab.exercise("break-it").step("break").solution
COMPOSE = lab.exercise("online-softmax").step("compose").solution
FULL_SCORES = module("online-softmax", "wrong_answers").FULL_SCORES    # the (Nq, Nk) scores whole
BACKWARD = lab.exercise("backward").step("scratch").solution
DENSE_BACKWARD = module("backward", "wrong_answers").DENSE_BACKWARD     # P and dS whole

# A learner's side channel for the tests: appends one JSON line to the file named by LOG.
LOG_HELPER = textwrap.dedent("""
    import json as _json, sys as _sys
    def _log(value):
        with open(LOG, "a") as f:
            f.write(_json.dumps(value) + "\\n")
""")

# Walks out from the caller with sys._getframe and f_back (no f_code: not audited), noting every
# str in each frame's locals (and one level into their lists, tuples and dicts), and any frame
# whose globals are a hidden kernel's (__name__ "kernel").
FRAME_WALK = textwrap.dedent("""
    def _strings(value):
        if isinstance(value, str):
            return [value]
        if isinstance(value, dict):
            value = list(value.keys()) + list(value.values())
        if isinstance(value, (list, tuple)):
            return [v for v in value if isinstance(v, str)]
        return []
    def _is_kernel(value):
        return getattr(value, "__globals__", {}).get("__name__") == "kernel"
    def _walk():
        seen, kernel_frames, kernels = [], 0, 0
        frame = _sys._getframe(1)
        while frame is not None:
            if frame.f_globals.get("__name__") == "kernel":
                kernel_frames += 1
            if frame.f_globals.get("__name__") != "learner":
                for value in list(frame.f_locals.values()):
                    seen += _strings(value)
                    items = value if isinstance(value, (list, tuple)) else [value]
                    kernels += sum(1 for item in items if _is_kernel(item))
            frame = frame.f_back
        return {"strings": sorted(set(seen)), "kernel_frames": kernel_frames, "kernels": kernels}
""")


def _break_suite(extra: str) -> str:
    return BREAK + "\n" + LOG_HELPER + FRAME_WALK + textwrap.dedent(extra)


ATTACKS = {
    # (b) every non-behavioural attribute, logged per kernel; the suite is the solution's, so an
    # honest grade that walks frames (f_back, f_locals) must still pass
    "break: attributes and frames": ("break-it", "break", _break_suite("""
        def test_zz_record(softmax):
            _log({"attrs": [softmax.__name__, softmax.__qualname__, softmax.__module__,
                            softmax.__doc__, repr(softmax.__defaults__),
                            repr(softmax.__kwdefaults__), repr(softmax.__closure__),
                            sorted(softmax.__dict__), type(softmax).__name__],
                  "walk": _walk()})
    """)),
    # (b) inside the kernel: an __array__ and an __index__ of the learner's walk the frames
    "break: frames from inside the kernel": ("break-it", "break", _break_suite("""
        import numpy as _np
        class _Spy:
            def __array__(self, dtype=None):
                _log({"inside": _walk()})
                return _np.zeros((1, 4))
        class _Block:
            def __index__(self):
                _log({"inside": _walk()})
                return 2
        def test_zz_spy(softmax):
            softmax(_Spy(), _Block())
    """)),
    # (b) the hidden module's globals, searched for the kernels (one level into containers)
    "break: the hidden module's globals": ("break-it", "break", _break_suite("""
        _hidden = _sys.modules["nlpcore.lab.exercises.break-it.hidden"]
        def _found(value):
            if isinstance(value, dict):
                value = list(value.values())
            items = value if isinstance(value, (list, tuple)) else [value]
            return sum(1 for item in items for one in (item if isinstance(item, tuple) else (item,))
                       if _is_kernel(one))
        _log({"kernels": sum(_found(v) for v in list(vars(_hidden).values()))})
    """)),
    # (b) a caught exception's traceback, walked inwards (tb_next, tb_frame): no hidden kernel
    "break: traceback of a kernel error": ("break-it", "break", _break_suite("""
        import numpy as _np
        def test_zz_error(softmax):
            try:
                softmax(_np.float64(1.0), block=0)
            except Exception as err:
                tb, names = err.__traceback__, []
                while tb is not None:
                    names.append(tb.tb_frame.f_globals.get("__name__"))
                    tb = tb.tb_next
                _log({"traceback": names, "context": repr(err.__context__)})
    """)),
    # (b) the stand-in's code: recognising a kernel by __code__ fails the grade
    "break: __code__": ("break-it", "break", _break_suite("""
        def test_zz_code(softmax):
            _log({"consts": len(softmax.__code__.co_consts)})
    """)),
    # (b) the hidden module's file, read to recognise its kernels: refused
    "break: reading hidden.py": ("break-it", "break", _break_suite("""
        def test_zz_file(softmax):
            hidden = _sys.modules["nlpcore.lab.exercises.break-it.hidden"]
            _log({"file": len(open(hidden.__file__).read())})
    """)),
    # (b) a trace function, to watch the hidden kernel run: refused
    "break: settrace": ("break-it", "break", _break_suite("""
        def _tracer(frame, event, arg):
            _log({"traced": frame.f_globals.get("__name__")})
            return None
        def test_zz_trace(softmax):
            try:
                _sys.settrace(_tracer)
                softmax([[1.0, 2.0]])
            finally:
                _sys.settrace(None)
    """)),
    # (d) honest stack printing in a graded kernel
    "compose: inspect.stack and print_stack": ("online-softmax", "compose", COMPOSE.replace(
        "def attention(", "import inspect, traceback, io\n\ndef attention(", 1).replace(
        "    n_q, d = q.shape\n",
        "    n_q, d = q.shape\n    _names = [f.function for f in inspect.stack()]\n"
        "    traceback.print_stack(file=io.StringIO())\n", 1)),
    # (d) a grader frame's code reached through inspect.stack(): the guards' originals are
    # constants of code objects; reaching them fails the grade
    "compose: f_code of grader frames": ("online-softmax", "compose", COMPOSE.replace(
        "def attention(", "import inspect\n\ndef attention(", 1).replace(
        "    n_q, d = q.shape\n",
        "    _consts = [len(f.frame.f_code.co_consts) for f in inspect.stack()]\n"
        "    n_q, d = q.shape\n", 1)),
    # (d) learner code compiled as a grader file, to pass for the grader: refused
    "compose: compiled as nlpcore": ("online-softmax", "compose", textwrap.dedent("""
        import nlpcore.lab as _lab
        import nlpcore.kernels.reference as _ref
        _ns = {}
        exec(compile("def attention(q, k, v, block_q, block_k, causal=False):\\n"
                     "    return ref.forward(q, k, v, causal=causal)\\n", _lab.__file__, "exec"),
             {"ref": _ref}, _ns)
        attention = _ns["attention"]
    """)),
    # (d) a trace function that rewrites a grader frame's variable (the tiled check's peak) as
    # the frame runs, for a kernel that holds the full score matrix, then removes itself:
    # refused before it is set
    "compose: settrace into the peak": ("online-softmax", "compose", COMPOSE.replace(
        "def attention(", textwrap.dedent("""
        import sys as _sys
        def _rewrite(frame, event, arg):
            if event == "line" and "peak" in frame.f_locals and "base" in frame.f_locals:
                frame.f_locals["peak"] = 0
                _sys.settrace(None)
            return _rewrite
        def _arm():
            frame = _sys._getframe(1)
            while frame is not None:
                frame.f_trace = _rewrite
                frame = frame.f_back
            _sys.settrace(_rewrite)

        def attention("""), 1).replace("    n_q, d = q.shape\n", "    _arm()\n" + FULL_SCORES
                                       + "    n_q, d = q.shape\n", 1)),
    # (a) a forger: talks the measured peak down by patching the grader's measure (and puts it
    # back before the grade ends, so the restore sees nothing), holds the full score matrix
    "compose: forged peak, full scores": ("online-softmax", "compose", textwrap.dedent("""
        import numpy as np
        import nlpcore.lab.working_set as _ws
        _measure = _ws.measure
        _ws.measure = lambda fn, *a, **k: (fn(*a, **k), 0)

        def attention(q, k, v, block_q, block_k, causal=False):
            if k.shape[0] == 16384:         # the tiled check's call: put the grader back
                _ws.measure = _measure
        """) + FULL_SCORES),
    # (a) the same, the full matrix computed in a process it forks and leaves behind
    "compose: forged peak, full scores in a forked child": ("online-softmax", "compose",
                                                            textwrap.dedent("""
        import os, numpy as np
        import nlpcore.lab.working_set as _ws
        _measure = _ws.measure
        _ws.measure = lambda fn, *a, **k: (fn(*a, **k), 0)

        def _full(q, k, v, causal):
        """) + FULL_SCORES + textwrap.dedent("""
        def attention(q, k, v, block_q, block_k, causal=False):
            if q.shape[0] != 2048:
                return _full(q, k, v, causal)
            _ws.measure = _measure
            read, write = os.pipe()
            if os.fork() == 0:
                o, lse = _full(q, k, v, causal)
                os.write(write, np.concatenate([o.ravel(), lse]).tobytes())
                import time
                time.sleep(60)
                os._exit(0)
            data = b""
            size = 8 * (q.shape[0] * v.shape[1] + q.shape[0])
            while len(data) < size:
                data += os.read(read, size - len(data))
            flat = np.frombuffer(data)
            return flat[:-q.shape[0]].reshape(q.shape[0], v.shape[1]), flat[-q.shape[0]:]
        """)),
    # (a) the forger on the backward: the whole P and dS at once, the measured peak talked down
    "backward: forged peak, dense P": ("backward", "scratch", BACKWARD.replace(
        "def backward(", textwrap.dedent("""
        import nlpcore.lab.working_set as _ws
        _peak = _ws.peak_memory
        _ws.peak_memory = lambda fn: (fn(), 0)

        def backward("""), 1).replace("    n_q, d = q.shape\n", "    if k.shape[0] == 16384:\n"
                                       "        _ws.peak_memory = _peak\n" + DENSE_BACKWARD
                                       + "    n_q, d = q.shape\n", 1)),
    # (d) the weak suite, plus a test that walks the frames (f_back, f_locals) and rewrites
    # every kill matrix and verdict it finds there: in the page's report, which runs the tests
    # once more after the checks collected, this reached the collected matrix (a pass before)
    "break: rewriting the grade through frames": ("break-it", "break",
                                                  lab.exercise("break-it").step("break").starter
                                                  + LOG_HELPER + textwrap.dedent("""
        def test_zz_rewrite(softmax):
            frame, found = _sys._getframe(1), 0
            while frame is not None:
                for value in list(frame.f_locals.values()):
                    for item in (list(value.values()) if isinstance(value, dict) else []):
                        if isinstance(item, dict) and "clean" in item:
                            for kid, row in item.items():
                                for t in list(row):
                                    row[t] = "pass" if kid == "clean" else "AssertionError"
                            found += 1
                        elif isinstance(item, dict) and item.get("status") in ("fail", "error"):
                            item["status"] = "pass"
                            found += 1
                frame = frame.f_back
            _log({"found": found})
    """)),
    # (b, d) an audit hook of the learner's would see the grader's events (the stand-ins' code,
    # the files it opens): refused, it never sees one
    "break: addaudithook": ("break-it", "break", _break_suite("""
        def _spy(event, args):
            if event in ("exec", "compile", "open", "object.__getattr__"):
                _log({"event": event})
        _sys.addaudithook(_spy)             # (an audit hook's refusal is silent: not added)
        _log({"called": "addaudithook"})
    """)),
}

# Review 2, D1-D3, D7, D9, D10: the learner process reaching outside itself. Each attempt is
# made at load time, caught, and logged by the name of what it raised; then the honest solution
# follows, so only the refusals can fail the grade.
TRY_HELPER = textwrap.dedent("""
    def _try(label, fn):
        try:
            fn()
            _log({label: "went through"})
        except BaseException as err:
            _log({label: type(err).__name__})
""")

def _outside(attempts: str, step_solution: str = COMPOSE) -> str:
    return LOG_HELPER + TRY_HELPER + textwrap.dedent(attempts) + "\n" + step_solution


OUTSIDE = {
    # D1: the peak the operating system keeps, reset through /proc/self/clear_refs, by each way
    # of opening a file; D7: the zygote's reply pipe through /proc/<ppid>/fd (opened, not written)
    "outside: /proc": _outside("""
        import os, io, pathlib
        _try("open", lambda: open("/proc/self/clear_refs", "w").write("5"))
        _try("io.open", lambda: io.open("/proc/self/clear_refs", "w"))
        _try("os.open", lambda: os.open("/proc/self/clear_refs", os.O_WRONLY))
        _try("bytes path", lambda: os.open(b"/proc/self/status", os.O_RDONLY))
        _try("pathlib", lambda: pathlib.Path("/proc/self/clear_refs").write_text("5"))
        _try("the zygote's pipe", lambda: open("/proc/%d/fd/1" % os.getppid(), "wb"))
        _try("dir_fd of /", lambda: os.open("/", os.O_RDONLY))
        def _relative():
            here = os.getcwd()
            os.chdir("/")
            try:
                return open("proc/self/clear_refs", "w")
            finally:
                os.chdir(here)
        _try("relative", _relative)
    """),
    # D1: memory tracemalloc does not see
    "outside: mmap": _outside("""
        import mmap
        _try("mmap", lambda: mmap.mmap(-1, 1 << 20))
    """),
    # D2, D3: processes, by every door (a child that slipped through would exit at once)
    "outside: processes": _outside("""
        import os, subprocess, pty, sys as _s
        def _fork(fn):
            def run():
                if fn() == 0:
                    os._exit(0)
            return run
        _try("os.fork", _fork(os.fork))
        _try("pty.fork", _fork(lambda: pty.fork()[0]))
        _try("subprocess", lambda: subprocess.run([_s.executable, "-c", "pass"]))
        _try("os.system", lambda: os.system("true"))
        _try("os.popen", lambda: os.popen("true").read())
        _try("os.posix_spawn", lambda: os.posix_spawn("/bin/true", ["true"], dict(os.environ)))
        _try("os.spawnv", lambda: os.spawnv(os.P_WAIT, "/bin/true", ["true"]))
        _try("os.execv", lambda: os.execv("/bin/true", ["true"]))
        def _mp():
            from multiprocessing import util
            util.spawnv_passfds(b"/bin/true", [b"/bin/true"], [])
        _try("multiprocessing", _mp)
        import importlib.util, _posixsubprocess
        _spec = importlib.util.find_spec("_posixsubprocess")
        _try("a fresh _posixsubprocess", lambda: importlib.util.module_from_spec(_spec).fork_exec())
        if hasattr(os, "pidfd_open"):
            import _imp, importlib.machinery
            def _fresh_posix():
                spec = importlib.machinery.ModuleSpec("posix", importlib.machinery.BuiltinImporter)
                return _imp.create_builtin(spec).pidfd_open(os.getppid())
            _try("pidfd of a fresh posix", _fresh_posix)
    """),
    # D9: signals to the grader (signal 0: tests the right, harms nothing if it went through)
    "outside: signals": _outside("""
        import os, signal
        _try("kill the zygote", lambda: os.kill(os.getppid(), 0))
        _try("kill the group", lambda: os.kill(0, 0))
        _try("killpg", lambda: os.killpg(os.getpgid(os.getppid()), 0))
        _try("itself", lambda: os.kill(os.getpid(), 0))
        if hasattr(os, "pidfd_open"):
            _try("pidfd", lambda: os.pidfd_open(os.getppid()))
    """),
    # D10: the memory cap, raised back
    "outside: the memory cap": _outside("""
        import resource
        _soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
        _log({"cap": [_soft, _hard]})
        _try("setrlimit", lambda: resource.setrlimit(resource.RLIMIT_AS, (_hard, _hard)))
    """),
}
REFUSED_OUTSIDE = {
    "outside: /proc": {"open", "io.open", "os.open", "bytes path", "pathlib", "the zygote's pipe",
                       "dir_fd of /", "relative"},
    "outside: mmap": {"mmap"},
    "outside: processes": {"os.fork", "pty.fork", "subprocess", "os.system", "os.popen",
                           "os.posix_spawn", "os.spawnv", "os.execv", "multiprocessing",
                           "a fresh _posixsubprocess", "pidfd of a fresh posix"},
    "outside: signals": {"kill the zygote", "kill the group", "killpg", "pidfd"},
    "outside: the memory cap": {"setrlimit"},
}
ATTACKS.update({name: ("online-softmax", "compose", code) for name, code in OUTSIDE.items()})
# D8: ring's schedule count rewritten through attend's closure, or through the frames of attend
# while it converts an argument of the learner's (__array__), then the ring skipped
ATTACKS["ring: rewriting attend's count"] = ("ring", "compose", LOG_HELPER + textwrap.dedent("""
    import numpy as np
    def merge(a, b):
        return a
    class _Spy:
        def __init__(self, devices):
            self.devices = devices
        def __array__(self, dtype=None, copy=None):
            frame, found = _sys._getframe(1), 0
            while frame is not None:
                for value in list(frame.f_locals.values()):
                    for item in (value if isinstance(value, tuple) else (value,)):
                        if isinstance(item, list) and len(item) == self.devices \\
                                and all(type(c) is int for c in item):
                            item[:] = [self.devices] * self.devices
                            found += 1
                frame = frame.f_back
            _log({"found": found})
            return np.arange(1)
    def ring_forward(n, devices, attend):
        for cell in attend.__closure__ or ():
            value = cell.cell_contents
            if isinstance(value, list) and len(value) == devices:
                value[:] = [devices] * devices
                _log({"closure": True})
        try:
            attend(0, _Spy(devices), np.arange(1))
        except ValueError:
            pass
        return np.zeros((n, 3)), np.zeros(n)
"""))
# D6: the outside case judged on its first rows only; this kernel computes only those
ATTACKS["compose: outside case, first rows only"] = ("online-softmax", "compose", COMPOSE + textwrap.dedent("""
    _attention = attention
    def attention(q, k, v, block_q, block_k, causal=False):
        if q.shape[0] > 1000:
            o, lse = _attention(q[:16], k, v, block_q, block_k, causal)
            n = q.shape[0] - 16
            return np.vstack([o, np.zeros((n, v.shape[1]))]), np.concatenate([lse, np.zeros(n)])
        return _attention(q, k, v, block_q, block_k, causal)
"""))

BATCH = r"""
import json, sys
from nlpcore import lab
from nlpcore.lab.exercises import module
jobs = json.load(sys.stdin)
out = []
from nlpcore.lab import verdict
for ex, step, code, seed in jobs:
    if ex.startswith("one:"):   # both phases in this interpreter, as in the page: no outside count
        r = verdict.grade(lab.exercise(ex[4:]), step, code, seed)
    else:
        r = lab.grade(ex, step, code, seed=seed)
    out.append({"passed": r["passed"], "restored": r["restored"],
                "checks": [[c["id"], c["status"], c["message"][:300]] for c in r["checks"]]})
print("RESULT" + json.dumps(out))
"""

FORGERS_IN_ONE = ("compose: forged peak, full scores", "backward: forged peak, dense P")
ORDER_SEED = 4242       # the same seed for every grade of the order test
ORDER_GRADES = 8        # the clean kernel's place must not repeat in all of them ((1/6)^7)
ORDER_SUITE = BREAK + "\n" + LOG_HELPER + textwrap.dedent("""
    import numpy as _np
    def test_zz_place(softmax):
        x = _np.random.RandomState(0).randn(2, 19) - 900.0
        x[0, :8] = -_np.inf
        x[1] += 1000.0
        _log({"clean": bool(_np.allclose(softmax(x, block=8), reference_softmax(x)))})
""")

INTERPRETERS = [pytest.param(sys.executable, id="py3")] + [
    pytest.param(str(PY38), id="py38", marks=pytest.mark.skipif(
        not PY38.exists(), reason="no Python 3.8 + NumPy 1.17 venv (.venv38)"))]


def _run_batch(python: str, jobs) -> list:
    env = {"PYTHONPATH": str(ROOT / "py"), "PATH": os.environ.get("PATH", ""),
           "HOME": os.environ.get("HOME", "/tmp")}
    done = subprocess.run([python, "-c", BATCH], input=json.dumps(jobs), cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=600)
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT")), None)
    assert line is not None, done.stderr[-3000:]
    return json.loads(line[len("RESULT"):])


_results: dict = {}


def _graded(python: str):
    """{attack name: (grade, log lines)} and the order test's logs, for one interpreter (once)."""
    if python not in _results:
        folder = tempfile.mkdtemp(prefix="g4trust-")
        logs, jobs = {}, []
        attacks = dict(ATTACKS)
        for name in FORGERS_IN_ONE:
            ex, step, code = ATTACKS[name]
            attacks[name + " (one interpreter)"] = ("one:" + ex, step, code)
        for i, (name, (ex, step, code)) in enumerate(sorted(attacks.items())):
            logs[name] = os.path.join(folder, "attack%d.log" % i)
            jobs.append([ex, step, "LOG = %r\n" % logs[name] + code, 1234])
        order_logs = [os.path.join(folder, "order%d.log" % i) for i in range(ORDER_GRADES)]
        jobs += [["break-it", "break", "LOG = %r\n" % path + ORDER_SUITE, ORDER_SEED]
                 for path in order_logs]
        grades = _run_batch(python, jobs)
        out = {}
        for (name, path), grade in zip(sorted(logs.items()), grades):
            out[name] = (grade, _lines(path))
        out["order"] = [(grade, _lines(path)) for path, grade in zip(order_logs, grades[len(logs):])]
        _results[python] = out
    return _results[python]


def _lines(path: str) -> list:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _statuses(grade) -> dict:
    return {cid: status for cid, status, _ in grade["checks"]}


@pytest.mark.parametrize("python", INTERPRETERS)
def test_break_its_kernels_look_the_same_and_no_frame_names_them(python):
    grade, lines = _graded(python)["break: attributes and frames"]
    assert grade["passed"] and grade["restored"] == [], grade
    lines = lines[:6]      # the grade's six kernels (then the page's report runs the shown ones)
    attrs = [line["attrs"] for line in lines]
    assert len(attrs) == 6 and all(a == attrs[0] for a in attrs), attrs
    assert attrs[0][0] == "softmax" and attrs[0][6] == "None" and attrs[0][7] == []
    for line in lines:
        assert line["walk"]["kernel_frames"] == 0
        assert not set(line["walk"]["strings"]) & set(KERNEL_IDS), line["walk"]["strings"]


@pytest.mark.parametrize("python", INTERPRETERS)
def test_no_learner_code_runs_while_a_hidden_kernel_is_on_the_stack(python):
    grade, lines = _graded(python)["break: frames from inside the kernel"]
    inside = [line["inside"] for line in lines][:12]  # __array__ and __index__, once per kernel
    assert len(inside) == 12, lines
    assert all(w["kernel_frames"] == 0 for w in inside), inside
    assert all(not set(w["strings"]) & set(KERNEL_IDS) for w in inside), inside
    assert all(w["kernels"] == 0 for w in inside), inside   # review 2, D4: no frame holds one


@pytest.mark.parametrize("python", INTERPRETERS)
def test_no_module_global_lists_the_hidden_kernels(python):
    """Review 2, D4: the stand-in's kernel matched by identity against a map of the hidden
    kernels kept in the hidden module's globals. No global of it holds a kernel now."""
    grade, lines = _graded(python)["break: the hidden module's globals"]
    assert lines and lines[0]["kernels"] == 0, lines


@pytest.mark.parametrize("python", INTERPRETERS)
def test_a_kernel_error_carries_no_traceback_into_the_kernel(python):
    """Walking a stand-in's error inwards (tb_next, tb_frame) reaches no hidden kernel: reading
    the stand-in's frame is refused now (it is nlpcore's code), so the walk stops there and the
    grade reports it; the six lines logged come from the other checks' (not hidden) kernels."""
    grade, lines = _graded(python)["break: traceback of a kernel error"]
    assert "audited: tb_frame of hidden.py" in grade["restored"], grade
    assert all(line["traceback"][:1] == ["learner"] and "nlpcore.lab.exercises.break-it.hidden"
               not in line["traceback"] and line["context"] == "None" for line in lines), lines


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("name", ["break: __code__", "break: reading hidden.py", "break: settrace"])
def test_recognising_a_kernel_by_its_code_file_or_run_fails_the_grade(python, name):
    grade, lines = _graded(python)[name]
    assert not grade["passed"], grade
    if name == "break: settrace":
        assert not any(line.get("traced") == "kernel" for line in lines), lines
        assert any("sys.settrace" in r for r in grade["restored"]), grade["restored"]
    if name == "break: reading hidden.py":
        assert lines == [] and _statuses(grade)["clean"] == "fail", grade


@pytest.mark.parametrize("python", INTERPRETERS)
def test_the_kernels_order_comes_from_the_os_not_from_the_seed(python):
    """The same seed, eight grades: the clean kernel's place among the six calls changes (all
    eight the same by chance: (1/6)^7)."""
    places = []
    for grade, lines in _graded(python)["order"]:
        assert grade["passed"], grade
        lines = lines[:6]
        clean = [i for i, line in enumerate(lines) if line["clean"]]
        assert len(lines) == 6 and len(clean) == 1, lines
        places.append(clean[0])
    assert len(set(places)) > 1, places


@pytest.mark.parametrize("python", INTERPRETERS)
def test_honest_stack_printing_passes(python):
    grade, _ = _graded(python)["compose: inspect.stack and print_stack"]
    assert grade["passed"] and grade["restored"] == [], grade


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("name", ["compose: f_code of grader frames", "compose: compiled as nlpcore",
                                  "compose: settrace into the peak"])
def test_frames_and_spoofed_code_do_not_reach_the_grader(python, name):
    grade, _ = _graded(python)[name]
    assert not grade["passed"], grade
    if name == "compose: settrace into the peak":
        assert _statuses(grade)["tiled"] != "pass", grade
        assert any("sys.settrace" in r for r in grade["restored"]), grade["restored"]
    if name == "compose: compiled as nlpcore":
        assert all(status != "pass" for cid, status in _statuses(grade).items()), grade


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("name", ["compose: forged peak, full scores",
                                  "backward: forged peak, dense P"])
def test_a_forged_peak_is_caught_by_the_operating_systems_count(python, name):
    """Learner code that talks the measured peak down (here: patches the grader's measure and
    puts it back before the grade ends, so nothing is restored) passed the tiled check with the
    full score matrix before; the runner's ru_maxrss of the learner process and of the processes
    it left behind (reaped by the zygote, their subreaper) now fails it."""
    grade, _ = _graded(python)[name]
    tiled = next(c for c in grade["checks"] if c[0] == "tiled")
    assert tiled[1] == "fail" and "operating system" in tiled[2], grade
    assert all(status == "pass" for cid, status, _ in grade["checks"] if cid != "tiled"), grade


@pytest.mark.parametrize("python", INTERPRETERS)
def test_a_forged_peak_computed_in_a_forked_child_is_refused(python):
    """The forger's full matrix computed in a process it forks (the outside case only; its
    memory was counted from outside before): the fork is refused now (review 2, D2)."""
    grade, _ = _graded(python)["compose: forged peak, full scores in a forked child"]
    tiled = next(c for c in grade["checks"] if c[0] == "tiled")
    assert tiled[1] == "fail" and "os.fork is refused" in tiled[2], grade
    assert not grade["passed"] and "audited: os.fork" in grade["restored"], grade


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("name", ["compose: forged peak, full scores", "backward: forged peak, dense P"])
def test_without_the_outside_count_the_forged_peak_passes(python, name):
    """The limit the README states: graded in one interpreter, as the page grades (its learner
    worker reports the peak and nothing counts it from outside), the same forgery passes."""
    grade, _ = _graded(python)[name + " (one interpreter)"]
    assert grade["passed"] and grade["restored"] == [], grade


@pytest.mark.parametrize("python", INTERPRETERS)
def test_frames_reach_no_record_of_the_grade_to_rewrite(python):
    grade, lines = _graded(python)["break: rewriting the grade through frames"]
    assert not grade["passed"], grade
    assert not any(line["found"] for line in lines), lines
    assert {c[1] for c in grade["checks"] if c[0].startswith("kills-")} >= {"fail"}, grade


def test_the_judge_refuses_a_pass_decided_where_the_learners_code_ran():
    """A rewritten record (or a forged result) that says "pass" for a check of a Python step is
    not taken: only the judge passes a check."""
    from nlpcore.lab import verdict
    ex = lab.exercise("online-softmax")
    step = ex.step("compose")
    phase = {"seed": 1, "collected": {}, "restored": [], "stdout": "", "stderr": "",
             "traceback": "", "report": None, "record": {}, "elapsed_ms": 0.0,
             "verdicts": {i: {"id": c.id, "title": c.title, "status": "pass", "message": "ok"}
                          for i, c in enumerate(step.checks)}}
    grade = verdict.judge(ex, "compose", phase)
    assert not grade["passed"]
    assert all(c["status"] == "error" and "only the judge" in c["message"] for c in grade["checks"])


@pytest.mark.parametrize("python", INTERPRETERS)
def test_a_learners_audit_hook_is_refused_and_sees_nothing(python):
    grade, lines = _graded(python)["break: addaudithook"]
    assert not grade["passed"] and any("sys.addaudithook" in r for r in grade["restored"]), grade
    assert lines and not any("event" in line for line in lines), lines


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("name", sorted(OUTSIDE))
def test_the_learner_process_cannot_reach_outside_itself(python, name):
    """Review 2, D1-D3, D7, D9, D10: every way out is refused (RefusedCall, where learner code
    can catch it), and the grade fails even when it was caught, naming what was tried."""
    grade, lines = _graded(python)[name]
    seen = {}
    for line in lines:
        seen.update(line)
    expected = {label for label in REFUSED_OUTSIDE[name]
                if "pidfd" not in label or label in seen}
    assert {label: seen.get(label) for label in expected} == {
        label: "RefusedCall" for label in expected}, seen
    if name == "outside: signals":
        assert seen["itself"] == "went through", seen
    if name == "outside: the memory cap":
        soft, hard = seen["cap"]
        assert soft == hard and soft > 0, seen      # D10: the hard limit is the cap
    if name != "outside: processes":    # (pidfd_open, multiprocessing: refused, not audited)
        assert not grade["passed"] and any(r.startswith("audited: ") for r in grade["restored"]), grade
    else:
        assert not grade["passed"] and "audited: os.fork" in grade["restored"], grade


def test_a_request_that_ran_is_never_sent_again(monkeypatch):
    """Review 2, D9: a zygote that does not answer (the learner's code stopped it) is not sent
    the same code again; the grade says what happened."""
    from nlpcore.lab import runner
    sent = []
    monkeypatch.setattr(runner, "_send", lambda stream, data: sent.append(data))

    def no_answer(stream, deadline=None):
        raise OSError("no answer in time")
    monkeypatch.setattr(runner, "_receive", no_answer)
    try:
        reply = runner._ask({"code": "pass"}, 0.1)
    finally:
        runner._stop_zygote()
    assert len(sent) == 1 and "stop or kill" in reply["why"], (sent, reply)


@pytest.mark.parametrize("python", INTERPRETERS)
def test_the_outside_case_is_judged_on_rows_drawn_per_grade(python):
    """Review 2, D6: all rows of the outside case come back, and the judge checks rows drawn
    from os.urandom, so a kernel that computes only the first rows fails."""
    grade, _ = _graded(python)["compose: outside case, first rows only"]
    tiled = next(c for c in grade["checks"] if c[0] == "tiled")
    assert tiled[1] == "fail" and "drawn at random" in tiled[2], grade
    assert all(status == "pass" for cid, status, _ in grade["checks"] if cid != "tiled"), grade


def test_the_tiled_failure_names_a_whole_copy_of_k_or_v():
    """Review 2, D5: a tiled kernel that copies K whole fails the tiled check (the statements
    say so), and the message says what to change."""
    code = COMPOSE.replace("    n_q, d = q.shape\n", "    n_q, d = q.shape\n    k = np.array(k)\n", 1)
    assert code != COMPOSE
    grade = lab.grade("online-softmax", "compose", code)
    tiled = next(c for c in grade["checks"] if c["id"] == "tiled")
    assert tiled["status"] == "fail" and "whole copy of K or V" in tiled["message"], tiled
    assert "np.asarray(x, dtype)" in tiled["message"], tiled
    folder = ROOT / "py" / "nlpcore" / "lab" / "exercises"
    for name in ("online-softmax/compose.md", "backward/scratch.md", "backward/harden.md"):
        assert "whole copy of K or V" in (folder / name).read_text(), name


@pytest.mark.parametrize("python", INTERPRETERS)
def test_ring_attends_count_is_out_of_the_learners_reach(python):
    """Review 2, D8: attend has no closure, and no frame on the stack while learner code runs
    inside attend (an argument's __array__) holds its count; the skipped ring fails schedule."""
    grade, lines = _graded(python)["ring: rewriting attend's count"]
    assert not any(line.get("closure") for line in lines), lines
    assert [line["found"] for line in lines if "found" in line][:1] == [0], lines
    assert dict((c[0], c[1]) for c in grade["checks"])["schedule"] == "fail", grade
