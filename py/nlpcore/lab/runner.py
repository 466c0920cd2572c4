"""Phase 1 of a CPython grade in a fresh interpreter, with a time limit.

``python -m nlpcore.lab.runner FD`` reads one request ``{exercise, step, code, seed, paths}``
(JSON) on stdin, runs :func:`nlpcore.lab.session.collect` and writes its result, packed by
:mod:`nlpcore.lab.wire`, to the pipe ``FD``; then it ends at once (``os._exit``), so nothing
the learner's code left behind (threads, ``atexit``, ``__del__``, ``gc`` callbacks, signal
handlers) runs after it. The parent (:func:`collect`) is the judge: it never imports or runs
the learner's code. Whatever the learner's code does -- loop for ever, recurse until the C
stack overflows, call ``os._exit``, kill itself with a signal, flood its output -- the parent
gets a phase-1 result naming the cause, and the next grade starts another interpreter.

The next interpreter is started while the current grade is judged (``_spare``): it has
imported NumPy and the grader already when the next grade arrives.
"""
from __future__ import annotations

import importlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from typing import Optional

TIME_LIMIT_S = 30.0         # a grade's learner phase, wall clock (the page's limit is its own)
OUTPUT_BYTES = 1 << 16      # bytes written straight to the process's stdout/stderr that are kept
RESULT_BYTES = 256 << 20    # largest phase-1 result accepted

_spare: list = []           # one started interpreter waiting for a request


def collect(exercise_id: str, step_id: str, code: str, seed: int, *,
            time_limit: float = TIME_LIMIT_S) -> dict:
    """Phase 1 in a fresh interpreter: the dict :func:`nlpcore.lab.session.collect` returns,
    unpacked, or (the process ended without one) a phase whose every check failed, naming why."""
    from . import wire
    exercises = importlib.import_module("nlpcore.lab.exercises")   # (lab.exercises is a function)
    request = json.dumps({"exercise": exercise_id, "step": step_id, "code": code, "seed": seed,
                          "paths": list(exercises.__path__)}).encode("utf-8")
    child, result_r = _spare.pop() if _spare else _start()
    try:
        start = time.monotonic()
        out, err, data, timed_out = _talk(child, result_r, request, time_limit)
        elapsed = time.monotonic() - start
    finally:
        os.close(result_r)
        _start_spare()
    why = None
    if timed_out:
        why = ("your code ran longer than the time limit of %.0f s (an endless loop?); its "
               "Python process was stopped" % time_limit)
    elif not data:
        why = _ended(child.returncode)
    if why is None:
        try:
            phase = wire.unpack(data.decode("utf-8"))
        except (ValueError, TypeError, UnicodeDecodeError) as error:
            why = "the process that ran your code sent back something unreadable (%s)" % error
    if why is not None:
        phase = {"stopped": why, "verdicts": None, "collected": {}, "seed": seed,
                 "stdout": "", "stderr": "", "traceback": "", "restored": [], "report": None,
                 "record": {}, "elapsed_ms": round(elapsed * 1000.0, 1)}
    raw = _text(out, "stdout") + _text(err, "stderr")
    if raw:
        phase["stderr"] = (phase.get("stderr") or "") + raw
    return phase


def _ended(returncode: Optional[int]) -> str:
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "signal %d" % -returncode
        hint = (" (a recursion too deep for the C stack?)" if name in ("SIGSEGV", "SIGBUS")
                else "")
        return "the Python process running your code was ended by %s%s" % (name, hint)
    return ("the Python process running your code ended (exit status %s) before the checks "
            "finished: a submission must return its results, not exit Python" % returncode)


def _text(data: bytes, name: str) -> str:
    if not data:
        return ""
    text = data[:OUTPUT_BYTES].decode("utf-8", "replace")
    more = "" if len(data) <= OUTPUT_BYTES else "\n[%s cut at %d bytes]\n" % (name, OUTPUT_BYTES)
    return text + more


def _start():
    result_r, result_w = os.pipe()
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in
                                                          env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    child = subprocess.Popen([sys.executable, "-m", "nlpcore.lab.runner", str(result_w)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             pass_fds=(result_w,), env=env, start_new_session=True)
    os.close(result_w)
    return child, result_r


def _start_spare():
    if not _spare:
        try:
            _spare.append(_start())
        except OSError:
            pass                            # no spare: the next grade starts its own


def _talk(child, result_r, request: bytes, time_limit: float):
    """Send the request, read stdout, stderr and the result until the process ends or the time
    limit; keeps at most OUTPUT_BYTES of each output stream. (stdout, stderr, result, timed out)."""
    try:
        child.stdin.write(request)
        child.stdin.close()
    except OSError:
        pass                                # it died already: its exit status says why
    streams = {child.stdout.fileno(): bytearray(), child.stderr.fileno(): bytearray(),
               result_r: bytearray()}
    limits = {child.stdout.fileno(): OUTPUT_BYTES + 1, child.stderr.fileno(): OUTPUT_BYTES + 1,
              result_r: RESULT_BYTES}
    selector = selectors.DefaultSelector()
    for fd in streams:
        selector.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + time_limit
    timed_out = False
    open_fds = set(streams)
    while open_fds:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        for key, _ in selector.select(timeout=min(left, 1.0)):
            chunk = os.read(key.fd, 1 << 16)
            if not chunk:
                selector.unregister(key.fd)
                open_fds.discard(key.fd)
            elif len(streams[key.fd]) < limits[key.fd]:
                streams[key.fd] += chunk
    selector.close()
    if timed_out:
        _kill(child)
    else:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(child)
    child.stdout.close()
    child.stderr.close()
    data = bytes(streams[result_r])
    if len(data) >= RESULT_BYTES:
        data = b""
    out_fd, err_fd = list(streams)[:2]
    return bytes(streams[out_fd]), bytes(streams[err_fd]), data, timed_out


def _kill(child):
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        child.kill()
    child.wait()


def main(argv=None) -> None:
    """The child: read the request, run phase 1, write the packed result, end at once."""
    argv = sys.argv[1:] if argv is None else argv
    fd = int(argv[0])
    from .. import lab                  # imported while the request is still on its way
    from . import session, wire
    exercises = importlib.import_module("nlpcore.lab.exercises")
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    for path in request["paths"]:
        if path not in exercises.__path__:
            exercises.__path__.append(path)
    try:
        ex = lab.exercise(request["exercise"])
        text = wire.pack(session.collect(ex, request["step"], request["code"], request["seed"]))
    except BaseException as error:      # the grader's own failure: say so, as data
        text = wire.pack({"stopped": "the grader failed before judging: %s: %s"
                          % (type(error).__name__, error), "verdicts": None, "collected": {},
                          "seed": request["seed"], "stdout": "", "stderr": "", "traceback": "",
                          "restored": [], "report": None, "record": {}, "elapsed_ms": 0.0})
    data = text.encode("utf-8")
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    os._exit(0)


if __name__ == "__main__":
    main()
