"""Phase 1 of a CPython grade in a fresh process, with a time limit.

Three processes take part, and only the last one ever runs learner code:

- the **judge** (the caller of :func:`collect`, e.g. ``nlpcore.lab.grade``) never imports or
  runs the learner's code; it judges what comes back (:func:`nlpcore.lab.verdict.judge`);
- the **zygote** (``python -m nlpcore.lab.runner``, started once and kept) has imported NumPy and
  the grader and built every exercise, and never runs learner code either: for each request it
  forks
- a **learner process**, which runs :func:`nlpcore.lab.session.collect`, writes the result
  packed by :mod:`nlpcore.lab.wire` to a pipe and ends at once (``os._exit``), so nothing the
  learner's code left behind (threads, ``atexit``, ``__del__``, ``gc`` callbacks, signal
  handlers) runs after it. Each grade gets a fresh copy of the untouched zygote.

The zygote reads the learner process's stdout, stderr and result until it ends or the time
limit (then kills its process group) and relays them. Whatever the learner's code does -- loop
for ever, recurse until the C stack overflows, call ``os._exit``, kill itself with a signal,
flood its output -- the judge gets a phase-1 result naming the cause, and the next grade works.
Messages between judge and zygote are length-prefixed JSON on the zygote's stdin and stdout.
"""
from __future__ import annotations

import base64
import importlib
import json
import os
import selectors
import signal
import struct
import subprocess
import sys
import time
from typing import Optional

TIME_LIMIT_S = 30.0         # a grade's learner phase, wall clock (the page keeps its own)
OUTPUT_BYTES = 1 << 16      # bytes written straight to the process's stdout/stderr that are kept
RESULT_BYTES = 256 << 20    # largest phase-1 result accepted
SLACK_S = 20.0              # how long past the time limit the judge waits for the zygote

_zygote: list = []          # the running zygote (a Popen), at most one


# -- the judge's side -------------------------------------------------------------------------

def collect(exercise_id: str, step_id: str, code: str, seed: int, *,
            time_limit: Optional[float] = None) -> dict:
    """Phase 1 in a fresh process: the dict :func:`nlpcore.lab.session.collect` returns,
    unpacked, or (the process ended without one) a phase naming why, which the judge turns into
    an error on every check."""
    from . import wire
    time_limit = TIME_LIMIT_S if time_limit is None else time_limit
    exercises = importlib.import_module("nlpcore.lab.exercises")   # (lab.exercises is a function)
    request = {"exercise": exercise_id, "step": step_id, "code": code, "seed": seed,
               "paths": list(exercises.__path__), "time_limit": time_limit}
    start = time.monotonic()
    reply = _ask(request, time_limit + SLACK_S)
    elapsed = time.monotonic() - start
    why = reply.get("why")
    phase = None
    if why is None and reply.get("timed_out"):
        why = ("your code ran longer than the time limit of %.0f s (an endless loop?); its "
               "Python process was stopped" % time_limit)
    elif why is None and not reply.get("result"):
        why = _ended(reply.get("returncode"))
    if why is None:
        try:
            phase = wire.unpack(reply["result"])
        except (ValueError, TypeError, KeyError) as error:
            why = "the process that ran your code sent back something unreadable (%s)" % error
    if phase is None:
        phase = {"stopped": why, "verdicts": {}, "collected": {}, "seed": seed, "stdout": "",
                 "stderr": "", "traceback": "", "restored": [], "report": None, "record": {},
                 "elapsed_ms": round(elapsed * 1000.0, 1)}
    raw = _text(reply.get("stdout"), "stdout") + _text(reply.get("stderr"), "stderr")
    if raw:
        phase["stderr"] = (phase.get("stderr") or "") + raw
    return phase


def _ask(request: dict, wait_s: float) -> dict:
    """One request to the zygote (started if needed); a dict with ``why`` if it failed."""
    for attempt in (0, 1):
        zygote = _zygote[0] if _zygote and _zygote[0].poll() is None else _start_zygote()
        try:
            _send(zygote.stdin, json.dumps(request).encode("utf-8"))
            return json.loads(_receive(zygote.stdout, time.monotonic() + wait_s))
        except (OSError, EOFError, ValueError) as error:
            _stop_zygote()
            if attempt:
                return {"why": "the grader's process pool failed (%s: %s)"
                               % (type(error).__name__, error)}
    raise AssertionError("unreachable")


def _start_zygote():
    _stop_zygote()
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = "1"                     # one thread: a process that forks must have no others
    zygote = subprocess.Popen([sys.executable, "-m", "nlpcore.lab.runner"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env=env)
    _zygote[:] = [zygote]
    return zygote


def _stop_zygote():
    while _zygote:
        zygote = _zygote.pop()
        if zygote.poll() is None:
            zygote.kill()
        zygote.wait()
        for stream in (zygote.stdin, zygote.stdout):
            stream.close()


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


def _text(data: Optional[str], name: str) -> str:
    if not data:
        return ""
    raw = base64.b64decode(data)
    text = raw[:OUTPUT_BYTES].decode("utf-8", "replace")
    return text + ("" if len(raw) <= OUTPUT_BYTES else "\n[%s cut at %d bytes]\n" % (name, OUTPUT_BYTES))


# -- framing ----------------------------------------------------------------------------------

def _send(stream, data: bytes):
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _receive(stream, deadline: Optional[float] = None) -> bytes:
    fd = stream.fileno()
    size = struct.unpack("<Q", _read_exactly(fd, 8, deadline))[0]
    if size > RESULT_BYTES + 4 * OUTPUT_BYTES + (1 << 20):
        raise ValueError("a message of %d bytes" % size)
    return _read_exactly(fd, size, deadline)


def _read_exactly(fd: int, size: int, deadline: Optional[float]) -> bytes:
    out = bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while len(out) < size:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and (left <= 0 or not selector.select(timeout=left)):
                raise OSError("no answer in time")
            chunk = os.read(fd, min(size - len(out), 1 << 20))
            if not chunk:
                raise EOFError("the other side closed the pipe")
            out += chunk
    return bytes(out)


# -- the zygote ------------------------------------------------------------------------------

def main() -> None:
    """The zygote: get ready, then answer requests until stdin closes."""
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(2, 1)                           # the zygote's own prints go to stderr
    lab = importlib.import_module("nlpcore.lab")   # (by name: nlpcore.lab imports this module)
    from . import session
    lab.exercises()                         # every exercise built once, before any fork
    session.pristine()                      # and the snapshot each learner process restores to
    while True:
        try:
            request = json.loads(_receive(requests))
        except EOFError:
            return
        reply = _serve(request, (requests, replies))
        _send(replies, json.dumps(reply).encode("utf-8"))


def _serve(request: dict, keep_closed) -> dict:
    """Fork a learner process for ``request`` and relay what it leaves."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    res_r, res_w = os.pipe()
    pid = os.fork()
    if pid == 0:                            # the learner process
        try:
            os.setsid()
            for stream in keep_closed:
                stream.close()
            for fd in (out_r, err_r, res_r):
                os.close(fd)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            _learner(request, res_w)
        finally:
            os._exit(70)
    for fd in (out_w, err_w, res_w):
        os.close(fd)
    deadline = time.monotonic() + float(request["time_limit"])
    streams, timed_out = _drain((out_r, err_r, res_r), deadline, pid)
    status = _reap(pid, deadline)
    timed_out = timed_out or status is None
    if status is None:                      # it closed its pipes and kept running
        status = _reap(pid, None)
    return {"result": streams[res_r].decode("utf-8", "replace") if streams[res_r] else None,
            "stdout": base64.b64encode(streams[out_r][:OUTPUT_BYTES + 1]).decode("ascii"),
            "stderr": base64.b64encode(streams[err_r][:OUTPUT_BYTES + 1]).decode("ascii"),
            "returncode": -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status),
            "timed_out": timed_out}


def _learner(request: dict, fd: int) -> None:
    lab = importlib.import_module("nlpcore.lab")
    from . import session, wire
    exercises = importlib.import_module("nlpcore.lab.exercises")
    for path in request["paths"]:
        if path not in exercises.__path__:
            exercises.__path__.append(path)
    try:
        ex = lab.exercise(request["exercise"])
        text = wire.pack(session.collect(ex, request["step"], request["code"], request["seed"]))
    except BaseException as error:      # the grader's own failure: said as data
        text = wire.pack({"stopped": "the grader failed before judging: %s: %s"
                          % (type(error).__name__, error), "verdicts": {}, "collected": {},
                          "seed": request["seed"], "stdout": "", "stderr": "", "traceback": "",
                          "restored": [], "report": None, "record": {}, "elapsed_ms": 0.0})
    view = memoryview(text.encode("utf-8"))
    while view:
        view = view[os.write(fd, view):]
    os._exit(0)


def _reap(pid: int, deadline: Optional[float]):
    """The learner process's wait status once it ended; None at the deadline (it is killed
    then, and ``_reap(pid, None)`` collects it)."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG if deadline is not None else 0)
        if done:
            return status
        if time.monotonic() >= deadline:
            _kill(pid)
            return None
        time.sleep(0.005)


def _kill(pid: int):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def _drain(fds, deadline: float, pid: int):
    """Read the learner process's pipes until they close or the deadline; kill it then."""
    streams = {fd: bytearray() for fd in fds}
    limits = {fds[0]: OUTPUT_BYTES + 1, fds[1]: OUTPUT_BYTES + 1, fds[2]: RESULT_BYTES}
    timed_out = False
    with selectors.DefaultSelector() as selector:
        for fd in fds:
            selector.register(fd, selectors.EVENT_READ)
        open_fds = set(fds)
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
    if timed_out:
        _kill(pid)
    for fd in fds:
        os.close(fd)
    if len(streams[fds[2]]) >= RESULT_BYTES:
        streams[fds[2]] = bytearray()
    return {fd: bytes(data) for fd, data in streams.items()}, timed_out


if __name__ == "__main__":
    main()
