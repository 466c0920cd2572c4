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
MEMORY_SHARE = 4            # the learner process may grow by 1/MEMORY_SHARE of the machine's RAM
MEMORY_GROWTH_MAX = 2 << 30  # ... and by at most this many bytes

class _Held(list):
    """The grader's own process handles: not interpreter state a learner could have changed, so
    the in-process snapshot (lab/sandbox.py) leaves it out -- a zygote replaced between two
    in-process grades is not the learner's doing."""
    sandbox_skip = True


_zygote: list = _Held()     # the running zygote (a Popen), at most one


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
    phase["outside"] = {"peak_growth": reply.get("peak_growth")}   # measured by the zygote
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
        except OSError as error:            # a zygote that had died: the request never ran
            _stop_zygote()
            if attempt:
                return {"why": "the grader's process pool failed (%s: %s)"
                               % (type(error).__name__, error)}
            continue
        try:                                # sent: the learner's code may have run, never twice
            return json.loads(_receive(zygote.stdout, time.monotonic() + wait_s))
        except (OSError, EOFError, ValueError) as error:
            _stop_zygote()
            return {"why": "the grader's process that runs your code stopped answering (%s: %s); "
                           "did your code stop or kill it?" % (type(error).__name__, error)}
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
    _become_subreaper()                     # orphans of learner processes come back here
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
    baseline = _resident_kib()              # this zygote's resident memory, which the fork shares
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
            _limit_memory()
            _no_way_out()
            _learner(request, res_w)
        finally:
            os._exit(70)
    for fd in (out_w, err_w, res_w):
        os.close(fd)
    deadline = time.monotonic() + float(request["time_limit"])
    streams, timed_out = _drain((out_r, err_r, res_r), deadline, pid)
    status, peak_kib = _reap(pid, deadline)
    timed_out = timed_out or status is None
    if status is None:                      # it closed its pipes and kept running
        status, peak_kib = _reap(pid, None)
    left_behind = sum(_reap_orphans())      # (none: processes are refused; counted whole if any)
    growth = (None if baseline is None or not peak_kib
              else (max(0, peak_kib - baseline) + left_behind) * 1024)
    return {"result": streams[res_r].decode("utf-8", "replace") if streams[res_r] else None,
            "peak_growth": growth,
            "stdout": base64.b64encode(streams[out_r][:OUTPUT_BYTES + 1]).decode("ascii"),
            "stderr": base64.b64encode(streams[err_r][:OUTPUT_BYTES + 1]).decode("ascii"),
            "returncode": -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status),
            "timed_out": timed_out}


def _limit_memory() -> None:
    """Cap the learner process's address space (RLIMIT_AS) at what it has now plus a share of
    the machine's memory: an allocation past it raises MemoryError in the learner's code, which
    the grade reports naming the limit (session.MEMORY_LIMIT), instead of the machine swapping
    until the time limit."""
    try:
        import resource
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        with open("/proc/self/statm") as statm:
            used = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError):
        return                              # no rlimits or no /proc here: no cap
    growth = min(pages // MEMORY_SHARE, MEMORY_GROWTH_MAX)
    limit = used + growth
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))    # hard too: it cannot be raised
    from . import session
    session._grader.memory_limit = growth


def _no_way_out() -> None:
    """Take from the learner process the ways to start a process or signal one that raise no
    audit event (``_posixsubprocess.fork_exec``, which multiprocessing calls directly; pidfds):
    it never needs them, and the audit hook refuses the others (:mod:`nlpcore.refusal`)."""
    def refused(*args, **kwargs):
        raise refusal.RefusedCall("starting or signalling a process is refused while your code "
                                  "is graded")
    from .. import refusal
    import _posixsubprocess
    _posixsubprocess.fork_exec = refused
    for module, name in ((os, "pidfd_open"), (sys.modules.get("posix"), "pidfd_open"),
                         (signal, "pidfd_send_signal"), (sys.modules.get("_signal"), "pidfd_send_signal")):
        if module is not None and hasattr(module, name):
            setattr(module, name, refused)
    # A fresh copy of those modules (importlib.util.module_from_spec, _imp) would carry the
    # originals: _imp hands out the copies already loaded, with the refusals, instead.
    kept = {name: sys.modules[name] for name in ("_posixsubprocess", "posix", "_signal")
            if name in sys.modules}
    _imp = sys.modules.get("_imp")
    for name in ("create_builtin", "create_dynamic"):
        if _imp is not None and hasattr(_imp, name):
            setattr(_imp, name, refusal.seal(_create_kept, _KEPT, (getattr(_imp, name), kept)))


_KEPT = "\0nlpcore.lab.runner: the modules kept"   # stands for (create, kept) in _create_kept
_AT = 0


def _create_kept(spec, *args):
    """``_imp.create_builtin``/``create_dynamic`` in the learner process, except that the
    modules :func:`_no_way_out` changed come back as they are now."""
    create, kept = ("\0nlpcore.lab.runner: the modules kept", None)[_AT]
    name = getattr(spec, "name", None)
    if name in kept:
        return kept[name]
    return create(spec, *args)


def _learner(request: dict, fd: int) -> None:
    lab = importlib.import_module("nlpcore.lab")
    from . import session, wire
    exercises = importlib.import_module("nlpcore.lab.exercises")
    for path in request["paths"]:
        if path not in exercises.__path__:
            exercises.__path__.append(path)
    from . import model
    model._INPUTS.measured = True           # the zygote reads this process's peak memory
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
    """(the learner process's wait status, its peak resident memory in KiB as the kernel
    counted it, its waited-for children's included) once it ended; (None, 0) at the deadline
    (it is killed then, and ``_reap(pid, None)`` collects it)."""
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG if deadline is not None else 0)
        if done:
            return status, usage.ru_maxrss
        if time.monotonic() >= deadline:
            _kill(pid)
            return None, 0
        time.sleep(0.005)


# -- memory measured from outside the learner's process ----------------------------------------
#
# The learner process reports the memory its kernel allocated (tracemalloc, judging.peak_memory),
# and a learner process can report anything. The kernel's own count cannot be talked down: the
# peak resident memory (ru_maxrss) of the learner process and of every process it started, read
# here when they are reaped. The zygote is their "child subreaper" (Linux prctl), so a process
# the learner's code forks and leaves behind comes back to it (killed, then reaped) instead of
# escaping to init. Compared with this zygote's resident memory when it forked (the copy starts
# sharing it), the growth is what the grade's whole learner side allocated at its peak; the
# judge holds it against a memory case where the full score matrix is far larger
# (nlpcore.lab.working_set.OUTSIDE_*).

PR_SET_CHILD_SUBREAPER = 36             # linux/prctl.h


def _become_subreaper() -> bool:
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError, ImportError):
        return False


def _resident_kib() -> Optional[int]:
    """This process's resident memory (VmRSS, KiB), or None where /proc has none."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _reap_orphans() -> list:
    """Kill and reap every process left to this zygote (the learner process's descendants,
    reparented here when it ended); their peak resident memory in KiB each."""
    peaks = []
    for _ in range(1000):                   # (a bound: descendants cannot outrun it for ever)
        try:
            with open("/proc/self/task/%d/children" % os.getpid()) as listing:
                alive = [int(p) for p in listing.read().split()]
        except (OSError, ValueError):
            alive = []
        for child in alive:
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
        try:
            done, _, usage = os.wait4(-1, 0 if alive else os.WNOHANG)
        except ChildProcessError:
            return peaks
        if not done:
            return peaks
        peaks.append(usage.ru_maxrss)
    return peaks


ENDED_GRACE_S = 0.2         # reading on after the learner process ended, for data in flight


def _has_ended(pid: int) -> bool:
    """Whether the learner process has ended, leaving it for :func:`_reap` to collect."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except (AttributeError, OSError):       # no waitid here: the pipes' end tells
        return False


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
        ended = None                        # when the learner process was seen to end
        while open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = ended is None   # only then was it the learner's code running
                break
            if ended is not None and time.monotonic() - ended > ENDED_GRACE_S:
                break                       # what is left open is held by processes it forked
            ready = selector.select(timeout=min(left, 0.05 if ended is not None else 0.5))
            for key, _ in ready:
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fd)
                    open_fds.discard(key.fd)
                elif len(streams[key.fd]) < limits[key.fd]:
                    streams[key.fd] += chunk
            if ended is None and not ready and _has_ended(pid):
                ended = time.monotonic()
    _kill(pid)                              # the process group: forked grandchildren too
    for fd in fds:
        os.close(fd)
    if len(streams[fds[2]]) >= RESULT_BYTES:
        streams[fds[2]] = bytearray()
    return {fd: bytes(data) for fd, data in streams.items()}, timed_out


if __name__ == "__main__":
    main()
