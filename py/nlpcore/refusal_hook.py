"""The audit hook's work for :mod:`nlpcore.refusal` (PEP 578): what a grade refuses to the
learner's code beyond library calls -- reading a refused module's files, introspecting the
grader's code and frames, watching or impersonating it, reaching outside the process, the
collector and ``ctypes`` -- each noted in the grade's entry of the refusal's sealed state and
refused with a message.

Nothing here is called through this module's globals while a grade runs: :func:`_private_chain`
copies every function the hook uses, with globals of their own (a copy of this module's, of the
builtins, stand-ins for ``os``, ``os.path`` and ``sys``), and :mod:`nlpcore.refusal` seals the
copy of :func:`_audit` into its hook's code constants. Learner code that rebinds a name here or
in ``os.path`` changes nothing the hook decides. The hook reads its arguments as exact ``str``,
``bytes`` and ``int`` (:func:`_plain`), so that no learner method runs inside it, and returns the
exception that refuses an event (raised by the hook's entry frame, whose locals hold nothing of
the grader's state).
"""
from __future__ import annotations

import builtins
import linecache
import os
import sys
import types

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))                 # .../nlpcore
_GRADER_DIR = os.path.join(_PACKAGE_DIR, "lab") + os.sep                   # .../nlpcore/lab/
_GRADER_REAL = os.path.join(os.path.realpath(_PACKAGE_DIR), "lab") + os.sep


class RefusedCall(Exception):
    """Raised when learner code calls a library kernel that the step asks it to write."""


class RefusedRead(OSError):
    """A refused file read on behalf of ``linecache`` (a stack or traceback being formatted):
    an OSError, so the line is left out as for a missing file, and not counted against the
    learner (honest ``inspect.stack()`` or ``traceback.print_stack()`` reads the grader's
    lines)."""


_LINECACHE = linecache.__file__


def _for_linecache(frame, depth: int = 4) -> bool:
    """Whether one of the ``depth`` innermost frames from ``frame`` is the standard library's
    linecache (reading source lines for a traceback or a stack)."""
    home = os.path.realpath(_LINECACHE)
    while frame is not None and depth > 0:
        if os.path.realpath(_plain(frame.f_code.co_filename) or "") == home:
            return True
        frame, depth = frame.f_back, depth - 1
    return False


def _plain(text):
    """``text`` as an exact str (a str or bytes subclass copied in C, so that none of its
    methods run here: learner code must never run inside the audit hook), or None."""
    kind = type(text)
    if kind is str:
        return text
    if issubclass(kind, str):
        return str.__str__(text)
    if issubclass(kind, bytes):
        try:
            return bytes.decode(bytes.join(b"", (text,)), _FS_ENCODING, _FS_ERRORS)
        except (UnicodeDecodeError, LookupError):
            return None
    return None


_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()


def _in_package(filename: str) -> bool:
    if filename[:1] == "/" and "/." not in filename and "//" not in filename:
        return filename.startswith(_PACKAGE_PREFIX)     # already absolute and normal: no copy
    return os.path.abspath(filename).startswith(_PACKAGE_PREFIX)


_PACKAGE_PREFIX = _PACKAGE_DIR + os.sep


def _learner_called(refusal: Refusal, frame) -> bool:
    """Whether walking out from ``frame`` a frame of the learner's code comes before any frame
    of the grader (``nlpcore/lab``, or the files named in ``grader_files``). Library code in
    between is passed over; no frame of either kind (a thread the learner started) counts as
    the learner."""
    while frame is not None:
        name = _plain(frame.f_code.co_filename) or ""
        if name in refusal.learner_files:
            return True
        if name in refusal.grader_files or os.path.abspath(name).startswith(_GRADER_DIR):
            return False
        frame = frame.f_back
    return True


def _audit(entries, event, args, frame):
    """The audit hook's work for a handled event raised by the code of ``frame``: the
    exception that refuses it, or None. No learner code may run in here (its frames hold the
    entries): arguments are read as exact types."""
    if event == "object.__getattr__":
        return _audit_introspection(entries, args, frame)
    if event in _REFUSED_HOOKS or event in _SPOOFING:
        return _refuse_hook_or_spoof(entries, event, args, frame)
    if event in AUDITED_EVENTS:
        return _audit_watched(entries, event, frame)
    if event == "import":
        if _plain(args[0]) in _FRESH_COPIES_OF:    # a second copy of a module the grader watches
            for entry in entries:
                if _learner_called(entry, frame):
                    entry.introspected.append("import of a fresh " + _plain(args[0]))
        return None
    refused = _refuse_outside(entries, event, args, frame)     # _OUTSIDE_EVENTS, "open"
    if refused is None and event == "open":
        refused = _refuse_file(entries, args, frame)
    return refused


def _refuse_file(entries, args, frame):
    """Opening a refused module's source or bytecode from learner code."""
    path = _plain(args[0]) if args else None
    if path is None:
        return
    path = os.path.realpath(path)           # a link to a refused file is that file
    if path.startswith(_GRADER_REAL) and path.endswith(".py") and _for_linecache(frame):
        # the grader's source lines, for a stack the learner's code prints: left out (quietly,
        # as a missing file) in a grade, where reading them would count against the learner's
        # memory budget (a tiled check) and shows the learner nothing of its own
        if any(e.contained and _learner_called(e, frame) for e in entries):
            return RefusedRead("the grader's source is not shown while a grade runs")
    for entry in entries:
        if path in entry.files and _learner_called(entry, frame):
            if _for_linecache(frame):
                return RefusedRead("reading %s is refused while this step is graded"
                                  % os.path.basename(path))
            entry.refused.append("the file " + os.path.basename(path))
            return RefusedCall("reading %s is refused while this step is graded: the step asks "
                              "you to write this computation yourself" % os.path.basename(path))


# Audit events that reach past what a grade's snapshot restores or what the grader can see:
# another audit hook (permanent), the collector's view of every object (it would reach the
# grader's sealed state), raw memory and C calls (ctypes), every thread's frames. Noted for
# every ``contained`` refusal while it is active, whoever raised them (the grade reports them in
# ``restored`` and fails; the page then replaces its Python worker), and refused when learner
# code raised them: noting alone would hand learner code what it could then erase.
AUDITED_EVENTS = frozenset(("sys.addaudithook", "gc.get_objects", "gc.get_referrers",
                            "gc.get_referents", "ctypes.dlopen", "ctypes.addressof",
                            "ctypes.cdata", "ctypes.cdata/buffer", "ctypes.string_at",
                            "ctypes.wstring_at", "ctypes.PyObj_FromPtr", "ctypes.dlsym",
                            "ctypes.dlsym/handle", "ctypes.call_function",
                            "ctypes.set_errno", "ctypes.get_errno", "sys._current_frames",
                            "sys._current_exceptions"))


def _audit_watched(entries, event, frame):
    learner = False
    for entry in entries:
        if entry.contained:
            entry.audited.append(event)
            learner = learner or _learner_called(entry, frame)
    if learner:
        return RefusedCall("%s is refused while a grade runs: it reaches past what the grader "
                          "can check or restore" % event)


# The learner process reaching outside itself, refused while a grade runs where the Refusal is
# ``contained`` (the lab's grades; not the Triton CLI grader, whose compiler starts processes):
# no step needs a process, a signal to another process, /proc or mapped memory, and each
# defeats a measure taken from outside learner code -- a process of its own computes where
# neither the refusals nor the memory count look (and its memory is counted apart), /proc lets
# it reset the peak the operating system keeps (clear_refs) or write into the grader's pipes
# (/proc/<pid>/fd), a signal stops or kills the grader, mmap'd memory is not traced.
_STARTS_PROCESS = ("os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system",
                   "subprocess.Popen", "os.startfile", "pty.spawn")
_OUTSIDE_EVENTS = frozenset(_STARTS_PROCESS + ("os.kill", "os.killpg", "mmap.__new__",
                                                 "resource.setrlimit", "resource.prlimit"))
_WHY_OUTSIDE = {
    "process": "your code may not start a process while it is graded: a process of its own "
               "would compute where the grader's refusals and memory count do not look",
    "signal": "your code may send signals only to its own process: another process is the "
              "grader's",
    "proc": "your code may not open the operating system's process files (/proc) while it is "
            "graded: they would let it reset the memory peak the grader reads from outside, or "
            "write into the grader's own pipes",
    "directory": "your code may not open a directory as a file descriptor while it is graded "
                 "(it would reach /proc by relative paths)",
    "limit": "your code may not change its process's limits (the memory cap) while it is "
             "graded",
    "mmap": "memory from mmap is not seen by the grader's memory count (tracemalloc): allocate "
            "with NumPy instead",
}


def _outside(event, args):
    """(what, kind of :data:`_WHY_OUTSIDE`) for an event that reaches outside the learner
    process, or None. Arguments are read as exact types (no learner method runs here)."""
    if event in _STARTS_PROCESS:
        return event, "process"
    if event in ("os.kill", "os.killpg"):
        target = args[0] if args else None
        if type(target) is int and target == os.getpid():
            return None                     # itself (the learner process leads its own group)
        return "%s of %s" % (event, target if type(target) is int else "a process"), "signal"
    if event == "mmap.__new__":
        return "mmap", "mmap"
    if event.startswith("resource."):
        return event, "limit"
    path = _plain(args[0]) if args else None    # "open"; an int is a descriptor it already has
    if path is None:
        return None
    for name in (os.path.abspath(path), os.path.realpath(path)):
        if name == "/proc" or name.startswith("/proc/"):
            return "opening " + path, "proc"
    if os.path.isdir(path):
        return "opening the directory " + path, "directory"
    return None


def _refuse_outside(entries, event, args, frame):
    """The audit hook's part for the learner process reaching outside itself: noted in the
    entry's ``introspected`` (the grade fails) and refused (raised in the learner's call)."""
    learner = [e for e in entries if e.contained and _learner_called(e, frame)]
    if not learner:
        return
    found = _outside(event, args)
    if found is None:
        return
    what, kind = found
    for entry in learner:
        entry.introspected.append(what)
    return RefusedCall("%s is refused: %s" % (what, _WHY_OUTSIDE[kind]))


_FRESH_COPIES_OF = ("_tracemalloc",)   # its functions are watched (judging.peak_memory)
_FRAMES_OF = {"gi_frame": "gi_code", "cr_frame": "cr_code", "ag_frame": "ag_code"}
_FRAME_HOLDERS = (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)
# Code that is the grader's although its file is not in nlpcore: break-it's hidden kernels,
# compiled from text (nlpcore/lab/exercises/break-it/hidden.py).
HIDDEN_CODE_FILES = frozenset(("<break-it kernel>",))
# Hooks that would let learner code watch or rewrite the grader's frames while it runs: a trace
# or profile function sees every frame entered (a hidden kernel's too) and, in CPython before
# 3.13, what it writes to a frame's f_locals is copied back into that frame's variables; another
# audit hook would see the grader's events. Refused to learner code while a grade runs.
_REFUSED_HOOKS = ("sys.settrace", "sys.setprofile", "sys.addaudithook")
# Compiling learner code under a file name of nlpcore (or of the standard modules that format
# tracebacks and stacks, whose reads of f_code are let through) would make it pass for the
# grader's own code in every check below: refused.
_SPOOFING = ("compile", "code.__new__")
_STACK_READERS = ("traceback.py", "inspect.py")   # stdlib modules that read every frame's code


def _is_stack_reader(filename: str) -> bool:
    """Whether ``filename`` is the real traceback.py or inspect.py of the standard library."""
    if filename in _STACK_READER_NAMES:     # the name the modules were imported under
        return True
    base = os.path.basename(filename)
    return base in _STACK_READERS and os.path.realpath(filename) == _STACK_READER_FILES.get(base)


def _stack_reader_files(real: bool = True) -> dict:
    import inspect
    import traceback
    name = os.path.realpath if real else (lambda path: path)
    return {"traceback.py": name(traceback.__file__), "inspect.py": name(inspect.__file__)}


_STACK_READER_FILES = _stack_reader_files()
_STACK_READER_NAMES = frozenset(_stack_reader_files(real=False).values())


def _is_the_file(source, filename: str) -> bool:
    """Whether ``source`` (str or bytes, read as exact types) is the text of the file
    ``filename``."""
    kind = type(source)
    if issubclass(kind, str):
        data_in = str.encode(source, "utf-8", "surrogatepass")
    elif issubclass(kind, bytes):
        data_in = bytes.join(b"", (source,))
    else:
        return False
    try:
        with open(filename, "rb") as f:
            data = f.read()
    except OSError:
        return False
    return bytes.__eq__(data, data_in) is True


def _refuse_hook_or_spoof(entries, event, args, frame):
    """The audit hook's part for :data:`_REFUSED_HOOKS` and :data:`_SPOOFING` events raised by
    learner code: noted in the entry's ``introspected`` and refused (an audit hook that raises
    stops the call; for ``sys.addaudithook`` a RuntimeError is what stops it)."""
    if event in _SPOOFING:
        filename = _plain(args[1]) if len(args) > 1 else None
        if filename is None or not (
                _in_package(filename) or os.path.basename(filename) in _STACK_READERS
                or filename in HIDDEN_CODE_FILES):
            return
        if event == "compile" and _is_the_file(args[0], filename):
            return                          # an import compiling the module's own source
        if frame is not None and _in_package(_plain(frame.f_code.co_filename) or ""):
            return                          # nlpcore's own (seal copies a function's code)
        what = "compiling code as %s" % os.path.basename(filename)
    else:
        what = event
    learner = [e for e in entries if _learner_called(e, frame)]
    if not learner:
        return
    for entry in learner:
        entry.introspected.append(what)
    return RefusedCall("%s is refused while a grade runs: it would let your code watch or pass "
                      "for the grader's own code" % what)


def _audit_introspection(entries, args, frame):
    """Refuse (and note) learner code reaching a code object of nlpcore (where the guards keep
    the originals and the grader its sealed state, and from which a function can be rebuilt) or
    the frame of an nlpcore generator (the grade's own state): ``__code__``, ``f_code``,
    ``tb_frame`` and ``gi_frame``/``cr_frame``/``ag_frame``. Refused, not only noted: learner
    code holding the grader's state could erase the note."""
    if len(args) < 2:
        return None
    target, attr = args[0], _plain(args[1])
    kind = type(target)     # only the C types whose attributes these are: learner code can raise
    if attr == "__code__" and kind is types.FunctionType:   # the event itself (sys.audit) with an
        code = target.__code__                              # object whose property would run here
    elif attr == "f_code" and kind is types.FrameType:
        code = target.f_code
    elif attr == "tb_frame" and kind is types.TracebackType:
        code = target.tb_frame.f_code
    elif attr in _FRAMES_OF and any(kind is holder for holder in _FRAME_HOLDERS):
        code = getattr(target, _FRAMES_OF[attr], None)
    else:
        return None
    if type(code) is not types.CodeType:
        return
    name = _plain(code.co_filename) or ""
    if not (_in_package(name) or name in HIDDEN_CODE_FILES):
        return
    if frame is None or _in_package(_plain(frame.f_code.co_filename) or ""):
        return                              # nlpcore's own (a guard reads its caller's code)
    if attr in ("f_code", "tb_frame") and _is_stack_reader(_plain(frame.f_code.co_filename) or ""):
        return                              # formatting a traceback or a stack (inspect.stack,
                                            # traceback.print_stack) reads every frame's code
    learner = [e for e in entries if _learner_called(e, frame)]
    if not learner:
        return
    what = "%s of %s" % (attr, os.path.basename(name))
    for entry in learner:
        entry.introspected.append(what)
    if not any(entry.contained for entry in learner):
        return None     # the Triton CLI's: its compiler reads the code of the learner's module
    return RefusedCall("reading the %s is refused while a grade runs: it holds the grader's "
                      "own state" % what)


_HANDLED = frozenset(("object.__getattr__", "import", "open") + _REFUSED_HOOKS + _SPOOFING
                     + tuple(AUDITED_EVENTS) + tuple(_OUTSIDE_EVENTS))

def _private_chain() -> dict:
    """The private namespace: :func:`_audit`, :func:`_decide`, :func:`_trusted_caller`,
    :func:`_entry` and every function they call, copied
    with globals of their own -- a copy of this module's taken now, its builtins a copy too,
    ``os``, ``os.path``, ``sys`` and ``types`` stand-ins holding what the hook uses, and
    ``os.path``'s functions copied likewise -- so that learner code rebinding a name here, in
    ``os``, ``posixpath`` or ``builtins`` (and putting it back before the grade ends) changes
    nothing they decide. Reached only through code constants of nlpcore.refusal's functions
    (``_audit_open``, ``install``, ``forget``, ...) and of the guards."""
    import genericpath
    import posixpath
    import stat
    fake_os = types.SimpleNamespace(**{name: getattr(os, name) for name in (
        "PathLike", "environ", "fsdecode", "fsencode", "fspath", "fstat", "getcwd", "getcwdb",
        "getuid", "lstat", "readlink", "stat", "getpid", "sep") if hasattr(os, name)})
    fake_stat = types.SimpleNamespace(**{name: getattr(stat, name) for name in dir(stat)
                                         if name.startswith("S_")})
    own_builtins = dict(vars(builtins))
    paths = dict(vars(genericpath))
    paths.update(vars(posixpath))
    paths.update(os=fake_os, stat=fake_stat, __builtins__=own_builtins, genericpath=None)
    for name, value in list(paths.items()):
        if type(value) is types.FunctionType:
            paths[name] = _rebound(value, paths)
    fake_os.path = types.SimpleNamespace(**{name: paths[name] for name in (
        "realpath", "abspath", "basename", "isdir", "split", "join", "normpath", "isabs")})
    chain = dict(globals())
    chain.update(os=fake_os, __builtins__=own_builtins,
                 sys=types.SimpleNamespace(_getframe=sys._getframe),
                 types=types.SimpleNamespace(FunctionType=types.FunctionType,
                                             CodeType=types.CodeType, FrameType=types.FrameType,
                                             TracebackType=types.TracebackType),
                 _thread=None, linecache=None, importlib=None)
    for name in ("_audit", "_audit_introspection", "_refuse_hook_or_spoof", "_audit_watched",
                 "_refuse_outside", "_outside", "_refuse_file", "_learner_called",
                 "_for_linecache", "_plain", "_in_package", "_is_stack_reader", "_is_the_file",
                 "_trusted_caller", "_entry", "_decide"):
        chain[name] = _rebound(globals()[name], chain)
    chain["_getframe"] = sys._getframe
    chain["tuple"] = tuple
    return chain


def _rebound(fn, namespace: dict):
    """A copy of ``fn`` whose globals (and builtins) are ``namespace``."""
    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


_TRUSTED_FILES = frozenset(os.path.join(_PACKAGE_DIR, *p) for p in
                           (("refusal.py",), ("lab", "session.py")))


def _trusted_caller(depth: int) -> bool:
    """Whether the function ``depth`` frames out from the one asking is code of nlpcore.refusal
    or of the grading session: only they start and end a grade's refusal and count its learner
    calls. Learner code cannot compile code under those names (refused), and no function there
    passes on a refusal that its caller chose."""
    name = _plain(sys._getframe(depth + 1).f_code.co_filename)
    return name is not None and os.path.abspath(name) in _TRUSTED_FILES


def _entry(state, refusal):
    """The active entry of ``refusal`` (a handle) in the sealed ``state``, or None."""
    key = object.__hash__(refusal)
    for entry in state.active:
        if entry.handle == key:
            return entry
    return None


def _decide(sealed) -> bool:
    """Whether a guard lets its caller through (``sealed``: the guard's constant, (original,
    this, entry, qualified name, strict, home file)); a refusal is noted in the entry. A call
    goes through from the refused module's own helpers when the grader, not the learner, called
    in; else (strict) from nlpcore code called by the grader while no learner function runs
    (at load time: the web door); not strict, from any nlpcore code."""
    entry, qualified, strict, home = sealed[2], sealed[3], sealed[4], sealed[5]
    caller = sys._getframe(2)               # 0 this, 1 the guard
    where = os.path.abspath(_plain(caller.f_code.co_filename) or "")
    if where == home:
        allowed = not _learner_called(entry, caller)
    elif not strict:
        allowed = _in_package(where)
    else:
        allowed = _in_package(where) and not entry.calls and not _learner_called(entry, caller)
    if not allowed:
        entry.refused.append(qualified)
    return allowed
