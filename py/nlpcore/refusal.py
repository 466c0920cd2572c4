"""The one refusal mechanism: library kernels that a step asks the learner to write are refused
to the learner's code, wherever the learner's code runs (a grade, :mod:`nlpcore.lab.session`;
the Triton CLI grader, ``check_triton``). It sits beside :mod:`nlpcore.tolerances`, below both
the kernels and the lab, so that both may use it.

:func:`install` replaces every function of the named modules by a guard. A call goes through
when it comes from nlpcore's own code while no learner function is running (the grader
computing inputs between learner calls; :func:`nlpcore.lab.judging.call_learner` counts the
learner functions running), or from the refused module's own code when, walking out, a frame of
the grader (``nlpcore/lab``) comes before any frame of the learner's code: a grader callback the
learner calls (ring's ``attend()``) may use the originals it kept, the learner may not.
Modules installed not ``strict`` (an exercise's own modules) let any nlpcore caller through. A refused call raises :class:`RefusedCall` and is
noted in :attr:`Refusal.refused`, and the grade fails with :func:`message`.

The library's files are refused too: while learner code is on the stack, opening a refused
module's source or bytecode (``importlib.reload``, ``spec_from_file_location``,
``inspect.getsource``, ``open``) raises RefusedCall (a PEP 578 audit hook), and the source
lines ``linecache`` kept of them are dropped first.

Where the originals are kept: not in a closure cell, a global, a default or the snapshot, where
learner code could read them unnoticed. A guard holds its original as a constant of its own code object (not in a closure cell
or a global), the grade's snapshot is emptied of the refused modules' originals while learner
code runs (:meth:`nlpcore.lab.sandbox.Snapshot.hide`), and functions a refused module imported
from another refused module are guarded too. Reaching a code object of nlpcore (a function's
``__code__``, a frame's ``f_code``, a traceback's ``tb_frame``; break-it's hidden kernels
count as nlpcore's) or the frame of an nlpcore generator from learner code is reported by the
audit hook (:attr:`Refusal.introspected`) and the grade then fails; so is any change to a
refused module's namespace (:func:`changes`). ``traceback`` and ``inspect`` reading every
frame's code (honest ``inspect.stack()``, ``traceback.print_stack()``) are let through, and
their ``linecache`` reads of refused files fail quietly (:class:`RefusedRead`). Refused outright
while learner code runs: ``sys.settrace`` and ``sys.setprofile`` (a trace function sees every
frame entered and, before CPython 3.13, what it writes into a frame's ``f_locals`` is copied
back into that frame's variables), ``sys.addaudithook``, and compiling code under a file name
of nlpcore (it would pass for the grader's own code in the checks above).
Where a :class:`Refusal` is ``contained`` (the lab's grades), the learner process may not reach
outside itself while learner code runs: starting a process, signalling another one, opening
/proc or a directory, mmap and changing its limits are refused (:data:`_OUTSIDE_EVENTS`,
:func:`_outside`), each with a message saying why, and noted so that the grade fails.
What this cannot stop, in the process where learner code runs, is code that patches these
functions and puts them back before the grade ends, or edits the grade's records; see
``nlpcore/lab/exercises/README.md`` ("What is measured where"). Verdicts are never reachable
this way: they are computed in an interpreter that never ran learner code
(:mod:`nlpcore.lab.session`).
"""
from __future__ import annotations

import contextlib
import importlib
import linecache
import os
import sys
import types
from typing import List, Sequence

LEARNER_FILE = "<your code>"    # the file name learner code is compiled as (session.load_learner)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))                 # .../nlpcore

# An object's identity as an int, unique among live objects as id() is: object's own hash, made
# from the address alone (no class can change it). id() raises the audit event "builtins.id",
# and every audit hook of the grader (here and nlpcore.lab.session) is called for each one: in
# Pyodide, the snapshot's tens of thousands of identities cost more than the grade's checks.
identity = object.__hash__
_GRADER_DIR = os.path.join(_PACKAGE_DIR, "lab") + os.sep                   # .../nlpcore/lab/


class RefusedCall(Exception):
    """Raised when learner code calls a library kernel that the step asks it to write."""


class RefusedRead(OSError):
    """A refused file read on behalf of ``linecache`` (a stack or traceback being formatted):
    an OSError, so the line is left out as for a missing file, and not counted against the
    learner (honest ``inspect.stack()`` or ``traceback.print_stack()`` reads the grader's
    lines)."""


def _for_linecache(frame, depth: int = 4) -> bool:
    """Whether one of the ``depth`` innermost frames from ``frame`` is the standard library's
    linecache (reading source lines for a traceback or a stack)."""
    import linecache as _linecache
    home = os.path.realpath(_linecache.__file__)
    while frame is not None and depth > 0:
        if os.path.realpath(frame.f_code.co_filename) == home:
            return True
        frame, depth = frame.f_back, depth - 1
    return False


class Refusal:
    """What one grade refuses, and what was refused. ``calls_in_flight`` counts learner functions
    running; ``learner_files`` names the files learner code is compiled from; ``grader_files``
    files of the grader outside ``nlpcore/lab``."""

    sandbox_skip = True                 # the grader's own bookkeeping, outside the snapshot

    def __init__(self, learner_files: Sequence[str] = (LEARNER_FILE,),
                 grader_files: Sequence[str] = (), contained: bool = False):
        self.contained = contained      # refuse the process reaching outside itself (OUTSIDE)
        self.refused: List[str] = []
        self.calls_in_flight = 0
        self.learner_files = frozenset(learner_files)
        self.grader_files = frozenset(grader_files)
        self.files: set = set()         # source and bytecode files of the refused modules
        self.modules: List[str] = []
        self.original_ids: set = set()  # identity() of every original a guard replaced (ints only)
        self.installed: dict = {}       # module name -> its namespace right after install
        self.introspected: List[str] = []   # code/frame introspection by learner code (audit)

    @contextlib.contextmanager
    def learner_running(self):
        """Inside: a learner function is running."""
        self.calls_in_flight += 1
        try:
            yield self
        finally:
            self.calls_in_flight -= 1


class _Registry:
    """The refusals of grades under way, and whether the file guard is hooked (outside the
    snapshot: the grader's own bookkeeping)."""
    sandbox_skip = True

    def __init__(self):
        self.active: List[Refusal] = []
        self.hooked = False
        self.in_hook = False


_registry = _Registry()


def install(modules: Sequence[str], refusal: Refusal, strict: bool = True) -> None:
    """Guard every function of ``modules`` (see the module docstring), noting refusals in
    ``refusal``. Modules this build does not have are skipped. Undone by the grade's snapshot
    restore, or by :func:`refused` on exit."""
    hook()
    if refusal not in _registry.active:
        _registry.active.append(refusal)
    loaded = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        refusal.modules.append(name)
        loaded.append((name, module))
        source = getattr(module, "__file__", "") or ""
        if source:
            source = os.path.realpath(source)   # compared with the real path of each open
            refusal.files.update(_files_of(source))
            for path in list(refusal.files):
                linecache.cache.pop(path, None)
    guards = {}                             # identity(original) -> its guard, for this call
    with _unaudited():                      # the grader reading its own functions' code
        for name, module in loaded:
            for attr, value in list(vars(module).items()):
                if isinstance(value, types.FunctionType) and value.__module__ == name:
                    guards[identity(value)] = _guard(value, "%s.%s" % (name, attr), refusal, strict)
    for name, module in loaded:             # the module's own functions, and the originals it
        for attr, value in list(vars(module).items()):  # imported from another refused module
            if isinstance(value, types.FunctionType) and identity(value) in guards:
                setattr(module, attr, guards[identity(value)])
    refusal.original_ids.update(guards)
    for name, module in loaded:
        refusal.installed[name] = dict(vars(module))


@contextlib.contextmanager
def _unaudited():
    """Inside, the file guard's audit hook lets every event through, as it does its own: for the
    grader's code between learner calls (no learner code runs inside), which reads the code of
    every function it guards -- each read an audit event, each checked for the learner reaching
    nlpcore's code (:func:`_audit_introspection`) at the cost of two path normalisations."""
    before = _registry.in_hook
    _registry.in_hook = True
    try:
        yield
    finally:
        _registry.in_hook = before


def changes(refusal: Refusal) -> List[str]:
    """The refused modules whose namespace lost or rebound a name since :func:`install` (a
    guard replaced, an original put back): "module <name>" each, as the snapshot says it."""
    out = []
    for name, after in refusal.installed.items():
        now = vars(sys.modules[name]) if name in sys.modules else {}
        if any(key not in now or now[key] is not value for key, value in after.items()):
            out.append("module " + name)
    return out


def forget(refusal: Refusal) -> None:
    """The grade is over: its file guard stops."""
    if refusal in _registry.active:
        _registry.active.remove(refusal)


@contextlib.contextmanager
def refused(modules: Sequence[str], learner_files: Sequence[str] = (LEARNER_FILE,),
            grader_files: Sequence[str] = ()):
    """Guards installed for the block, the original functions put back after it (for graders
    that run without a snapshot, such as the Triton CLI). Yields the :class:`Refusal`."""
    saved = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        saved.append((module, dict(vars(module))))
    refusal = Refusal(learner_files, grader_files)
    install(modules, refusal)
    try:
        yield refusal
    finally:
        forget(refusal)
        for module, namespace in saved:
            for key, value in namespace.items():
                if isinstance(value, types.FunctionType):
                    setattr(module, key, value)


def message(names: Sequence[str]) -> str:
    """The failure every check of a grade gets when the learner's code called refused kernels."""
    names = sorted(set(names))
    return ("your code called %s, the library's own kernel%s: this step teaches you to write "
            "it, so calls into nlpcore's kernels are refused while it is graded"
            % (", ".join(names), "s" if len(names) > 1 else ""))


_ORIGINAL = "\0nlpcore.refusal: the original function"   # stands for it in _guard's code
_ORIGINAL_AT = 0    # where a sealed object sits in its constant (see seal)


def seal(fn, placeholder: str, obj):
    """A copy of ``fn`` whose code constant ``(placeholder, None)`` is ``(obj, None)``: ``fn``
    reads ``obj`` as ``(placeholder, None)[_ORIGINAL_AT]`` (indexed by a name, so that the
    compiler neither folds the item nor warns that a str is called). Kept there, ``obj`` is out
    of reach of learner code but through ``__code__`` or a frame's ``f_code`` (reported, see
    :func:`_audit_introspection`) -- not a closure cell, a default or a global."""
    code = fn.__code__
    consts = tuple((obj, None) if isinstance(c, tuple) and c == (placeholder, None) else c
                   for c in code.co_consts)
    if consts == code.co_consts:
        raise AssertionError("%s has no constant (%r, None) to seal" % (fn.__name__, placeholder))
    return types.FunctionType(code.replace(co_consts=consts), fn.__globals__, fn.__name__,
                              fn.__defaults__, fn.__closure__)


def _guard(fn, qualified: str, refusal: Refusal, strict: bool):
    """The guard of ``fn``: the original sits in the guard's code constants, where only an
    audited introspection (``__code__``, ``f_code``) reaches it, never in a closure cell."""
    home = os.path.abspath(fn.__code__.co_filename)     # the refused module's own file

    def refused(*args, **kwargs):
        caller = sys._getframe(1)
        where = os.path.abspath(caller.f_code.co_filename)
        if where == home:                   # one of the module's own helpers: allowed when the
            allowed = not _learner_called(refusal, caller)  # grader, not the learner, called in
        elif not strict:
            allowed = _in_package(where)
        else:                               # nlpcore code called by the grader, not by the
            allowed = (_in_package(where) and not refusal.calls_in_flight   # learner (at load
                       and not _learner_called(refusal, caller))         # time: the web door)
        if allowed:
            # the original, sealed into this constant below (seal)
            return ("\0nlpcore.refusal: the original function", None)[_ORIGINAL_AT](*args, **kwargs)
        refusal.refused.append(qualified)
        raise RefusedCall("%s is refused while this step is graded: the step asks you to "
                          "write this computation yourself" % qualified)
    guard = seal(refused, _ORIGINAL, fn)
    guard.__name__ = fn.__name__
    guard.__qualname__ = fn.__qualname__
    guard.__doc__ = fn.__doc__
    return guard


def _in_package(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep)


def _learner_called(refusal: Refusal, frame) -> bool:
    """Whether walking out from ``frame`` a frame of the learner's code comes before any frame
    of the grader (``nlpcore/lab``, or the files named in ``grader_files``). Library code in
    between is passed over; no frame of either kind (a thread the learner started) counts as
    the learner."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name in refusal.learner_files:
            return True
        if name in refusal.grader_files or os.path.abspath(name).startswith(_GRADER_DIR):
            return False
        frame = frame.f_back
    return True


def _files_of(source: str) -> set:
    """A module's source file and every bytecode file Python may load for it."""
    folder, base = os.path.split(source)
    stem = os.path.splitext(base)[0]
    files = {source, os.path.splitext(source)[0] + ".pyc"}
    cache = os.path.join(folder, "__pycache__")
    if os.path.isdir(cache):
        files.update(os.path.join(cache, f) for f in os.listdir(cache)
                     if f.startswith(stem + ".") and f.endswith(".pyc"))
    return files


def hook() -> None:
    """Install the file guard's audit hook (once per process; before any learner code runs)."""
    if not _registry.hooked and hasattr(sys, "addaudithook"):
        sys.addaudithook(_audit_open)
        _registry.hooked = True


def _audit_open(event, args):
    if not _registry.active or _registry.in_hook:
        return
    if event == "object.__getattr__":
        _registry.in_hook = True            # reading attributes here raises events of its own
        try:
            _audit_introspection(args)
        finally:
            _registry.in_hook = False
        return
    if event in _REFUSED_HOOKS or event in _SPOOFING:
        _registry.in_hook = True
        try:
            _refuse_hook_or_spoof(event, args, sys._getframe(1))
        finally:
            _registry.in_hook = False
        return
    if event == "import" and args[0] in _FRESH_COPIES_OF:
        _registry.in_hook = True            # a second copy of a module the grader watches
        try:
            frame = sys._getframe(1)
            for refusal in _registry.active:
                if _learner_called(refusal, frame):
                    refusal.introspected.append("import of a fresh " + args[0])
        finally:
            _registry.in_hook = False
        return
    if event in _OUTSIDE_EVENTS or event == "open":
        _registry.in_hook = True
        try:
            _refuse_outside(event, args, sys._getframe(1))
        finally:
            _registry.in_hook = False
    if event != "open" or not isinstance(args[0], str):
        return
    path = os.path.realpath(args[0])        # a link to a refused file is that file
    for refusal in _registry.active:
        if path in refusal.files and _learner_called(refusal, sys._getframe(1)):
            if _for_linecache(sys._getframe(1)):
                raise RefusedRead("reading %s is refused while this step is graded"
                                  % os.path.basename(path))
            refusal.refused.append("the file " + os.path.basename(path))
            raise RefusedCall("reading %s is refused while this step is graded: the step asks "
                              "you to write this computation yourself" % os.path.basename(path))


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
    process, or None."""
    if event in _STARTS_PROCESS:
        return event, "process"
    if event in ("os.kill", "os.killpg"):
        target = args[0] if args else None
        if isinstance(target, int) and target == os.getpid():
            return None                     # itself (the learner process leads its own group)
        return "%s of %s" % (event, target), "signal"
    if event == "mmap.__new__":
        return "mmap", "mmap"
    if event.startswith("resource."):
        return event, "limit"
    path = args[0] if args else None        # "open"
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return None                         # an int: a descriptor the process already has
    for name in (os.path.abspath(path), os.path.realpath(path)):
        if name == "/proc" or name.startswith("/proc/"):
            return "opening " + path, "proc"
    if os.path.isdir(path):
        return "opening the directory " + path, "directory"
    return None


def _refuse_outside(event, args, frame):
    """The audit hook's part for the learner process reaching outside itself: noted in
    :attr:`Refusal.introspected` (the grade fails) and refused (raised in the learner's call)."""
    learner = [r for r in _registry.active if r.contained and _learner_called(r, frame)]
    if not learner:
        return
    found = _outside(event, args)
    if found is None:
        return
    what, kind = found
    for refusal in learner:
        refusal.introspected.append(what)
    raise RefusedCall("%s is refused: %s" % (what, _WHY_OUTSIDE[kind]))


_FRESH_COPIES_OF = ("_tracemalloc",)   # its functions are watched (judging.peak_memory)
_FRAMES_OF = {"gi_frame": "gi_code", "cr_frame": "cr_code", "ag_frame": "ag_code"}
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


def _stdlib_file(name: str) -> str:
    import inspect
    import traceback
    return {"traceback.py": traceback.__file__, "inspect.py": inspect.__file__}[name]


def _is_stack_reader(filename: str) -> bool:
    """Whether ``filename`` is the real traceback.py or inspect.py of the standard library."""
    base = os.path.basename(filename)
    return base in _STACK_READERS and os.path.realpath(filename) == os.path.realpath(_stdlib_file(base))


def _is_the_file(source, filename: str) -> bool:
    """Whether ``source`` (str or bytes) is the text of the file ``filename``."""
    if not isinstance(source, (str, bytes)):
        return False
    try:
        with open(filename, "rb") as f:
            data = f.read()
    except OSError:
        return False
    return data == (source.encode("utf-8") if isinstance(source, str) else source)


def _refuse_hook_or_spoof(event, args, frame):
    """The audit hook's part for :data:`_REFUSED_HOOKS` and :data:`_SPOOFING` events raised by
    learner code: noted in :attr:`Refusal.introspected` and refused (an audit hook that raises
    stops the call; for ``sys.addaudithook`` a RuntimeError is what stops it)."""
    if event in _SPOOFING:
        filename = args[1] if len(args) > 1 else None
        if not isinstance(filename, str) or not (
                _in_package(filename) or os.path.basename(filename) in _STACK_READERS
                or filename in HIDDEN_CODE_FILES):
            return
        if event == "compile" and _is_the_file(args[0], filename):
            return                          # an import compiling the module's own source
        if frame is not None and _in_package(frame.f_code.co_filename):
            return                          # nlpcore's own (seal copies a function's code)
        what = "compiling code as %s" % os.path.basename(filename)
    else:
        what = event
    learner = [r for r in _registry.active if _learner_called(r, frame)]
    if not learner:
        return
    for refusal in learner:
        refusal.introspected.append(what)
    raise RefusedCall("%s is refused while a grade runs: it would let your code watch or pass "
                      "for the grader's own code" % what)


def _audit_introspection(args):
    """Note learner code reaching a code object of nlpcore (where the guards keep the originals
    and from which a function can be rebuilt) or the frame of an nlpcore generator (the grade's
    own state): ``__code__``, ``f_code`` and ``gi_frame``/``cr_frame``/``ag_frame``."""
    target, attr = args[0], args[1]
    if attr == "__code__":
        code = getattr(target, "__code__", None)
    elif attr == "f_code":
        code = target.f_code
    elif attr == "tb_frame":
        code = target.tb_frame.f_code
    elif attr in _FRAMES_OF:
        code = getattr(target, _FRAMES_OF[attr], None)
    else:
        return
    if code is None or not (_in_package(code.co_filename) or code.co_filename in HIDDEN_CODE_FILES):
        return
    frame = sys._getframe(2)                # the code that asked (1 is _audit_open)
    if frame is None or _in_package(frame.f_code.co_filename):
        return                              # nlpcore's own (a guard reads its caller's code)
    if attr in ("f_code", "tb_frame") and _is_stack_reader(frame.f_code.co_filename):
        return                              # formatting a traceback or a stack (inspect.stack,
                                            # traceback.print_stack) reads every frame's code
    for refusal in _registry.active:
        if _learner_called(refusal, frame):
            refusal.introspected.append("%s of %s" % (attr, os.path.basename(code.co_filename)))
