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

import _thread
import builtins
import collections
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


class Refusal:
    """One grade's refusal, as the grader names it: what the learner's code is compiled as
    (``learner_files``), the grader's files outside ``nlpcore/lab`` (``grader_files``), and
    whether the learner process must stay inside itself (``contained``). A handle only: at
    :func:`install` the policy is copied into the grader's sealed state (:class:`_State`) and
    what is refused is noted there, never on this object, which learner code can reach (a
    frame's locals) -- writing its fields changes nothing. :attr:`refused` and
    :attr:`introspected` are copies read from that state (after :func:`forget`: what it
    returned)."""

    sandbox_skip = True                 # the grader's own bookkeeping, outside the snapshot

    def __init__(self, learner_files: Sequence[str] = (LEARNER_FILE,),
                 grader_files: Sequence[str] = (), contained: bool = False):
        self.contained = bool(contained)
        self.learner_files = frozenset(learner_files)
        self.grader_files = frozenset(grader_files)
        self.modules: List[str] = []
        self.evidence = None            # an Evidence, set by forget

    @property
    def refused(self) -> tuple:
        """Refused calls and reads so far (a copy)."""
        return self.evidence.refused if self.evidence is not None else _evidence(self).refused

    @property
    def introspected(self) -> tuple:
        """Introspection and reaching outside the process so far (a copy)."""
        return (self.evidence.introspected if self.evidence is not None
                else _evidence(self).introspected)

    @contextlib.contextmanager
    def learner_running(self):
        """Inside: a learner function is running."""
        learner_calls(self, 1)
        try:
            yield self
        finally:
            learner_calls(self, -1)


Evidence = collections.namedtuple("Evidence", "refused introspected audited")
Evidence.__doc__ = ("What a grade's refusal saw, copied out of the sealed state: refused calls "
                    "and reads, introspection and reaching outside the process, and "
                    "AUDITED_EVENTS raised while it was active (tuples of str).")


class _Entry:
    """One active refusal in the sealed state: the frozen copy of its handle's policy, taken at
    the first :func:`install`, and the evidence the guards and the audit hook note."""
    __slots__ = ("handle", "contained", "learner_files", "grader_files", "files", "installed",
                 "original_ids", "refused", "introspected", "audited", "calls")

    def __init__(self, handle: Refusal):
        self.handle = identity(handle)
        self.contained = handle.contained is True
        self.learner_files = frozenset(_plain(f) for f in handle.learner_files) - {None}
        self.grader_files = frozenset(_plain(f) for f in handle.grader_files) - {None}
        self.files = frozenset()
        self.installed: dict = {}       # module name -> its namespace right after install
        self.original_ids: set = set()
        self.refused: List[str] = []
        self.introspected: List[str] = []
        self.audited: List[str] = []
        self.calls = 0


class _State:
    """The grader's state that gates the audit hook and collects its evidence: the active
    refusals (:class:`_Entry`), the threads inside the hook (re-entrancy), whether the hook is
    installed. Exactly one exists, created below and sealed into the code constants of the
    functions that use it (:func:`seal`): no module global, closure, default or attribute of a
    reachable object refers to it, so learner code reaches it only through an audited read of
    ``__code__``/``f_code`` (refused by the hook) or the collector (``gc``, refused)."""
    __slots__ = ("active", "busy", "hooked")

    def __init__(self):
        self.active: List[_Entry] = []
        self.busy: set = set()          # thread ids inside the hook or _unaudited
        self.hooked = False


_STATE = "\0nlpcore.refusal: the grader's state"    # stands for the _State in sealed code
_AT = 0


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


def _trusted_caller(depth: int = 2) -> bool:
    """Whether the function ``depth`` frames out (the caller of the function asking) is code of
    this file or of the grading session: only they start and end a grade's refusal and count
    its learner calls. Learner code cannot compile code under those names (refused below), and
    no function there passes on a refusal that its caller chose."""
    name = _plain(sys._getframe(depth).f_code.co_filename)
    return name is not None and os.path.abspath(name) in _TRUSTED_FILES


_TRUSTED_FILES = frozenset(os.path.join(_PACKAGE_DIR, *p) for p in
                           (("refusal.py",), ("lab", "session.py")))


def _refuse_untrusted(what: str) -> None:
    if not _trusted_caller(3):
        raise RefusedCall("%s is the grader's own: your code may not call it" % what)


def install(modules: Sequence[str], refusal: Refusal, strict: bool = True) -> None:
    """Guard every function of ``modules`` (see the module docstring), noting refusals in the
    sealed state under ``refusal``. Modules this build does not have are skipped. Undone by the
    grade's snapshot restore, or by :func:`refused` on exit. Only the grading session (and
    :func:`refused`) may call it."""
    _refuse_untrusted("refusal.install")
    state = ("\0nlpcore.refusal: the grader's state", None)[_AT]
    hook()
    entry = _entry(state, refusal)
    if entry is None:
        entry = _Entry(refusal)
        state.active.append(entry)
    loaded = []
    for name in modules:
        if type(name) is not str:
            raise TypeError("modules: expected module names (str), got %r" % type(name).__name__)
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        refusal.modules.append(name)
        loaded.append((name, module))
        source = _plain(getattr(module, "__file__", "") or "")
        if source:
            files = _files_of(os.path.realpath(source))     # compared with each open's real path
            entry.files = entry.files | files
            for path in files:
                linecache.cache.pop(path, None)
    guards = {}                             # identity(original) -> its guard, for this call
    with _unaudited():                      # the grader reading its own functions' code
        for name, module in loaded:
            for attr, value in list(vars(module).items()):
                # exact types only: a str subclass (a name, a __module__) would run its own
                # methods here, inside the quiet window
                if (type(attr) is str and type(value) is types.FunctionType
                        and type(value.__module__) is str and value.__module__ == name):
                    guards[identity(value)] = _guard(value, "%s.%s" % (name, attr), entry, strict)
    for name, module in loaded:             # the module's own functions, and the originals it
        for attr, value in list(vars(module).items()):  # imported from another refused module
            if type(attr) is str and type(value) is types.FunctionType and identity(value) in guards:
                setattr(module, attr, guards[identity(value)])
    entry.original_ids.update(guards)
    for name, module in loaded:
        entry.installed[name] = dict(vars(module))


def original_ids(refusal: Refusal) -> frozenset:
    """identity() of every original the guards of ``refusal`` replaced (ints only)."""
    entry = _entry(("\0nlpcore.refusal: the grader's state", None)[_AT], refusal)
    return frozenset(entry.original_ids) if entry is not None else frozenset()


def _entry(state: _State, refusal: Refusal):
    """The active entry of ``refusal`` in ``state``, or None (for the sealed functions here)."""
    key = identity(refusal)
    for entry in state.active:
        if entry.handle == key:
            return entry
    return None


def _evidence(refusal: Refusal) -> Evidence:
    """What the active ``refusal`` has seen so far, copied (empty when it is not active)."""
    entry = _entry(("\0nlpcore.refusal: the grader's state", None)[_AT], refusal)
    if entry is None:
        return Evidence((), (), ())
    return Evidence(tuple(entry.refused), tuple(entry.introspected), tuple(entry.audited))


def refused_count(refusal: Refusal) -> int:
    """How many refused calls ``refusal`` has noted (see :func:`refused_since`)."""
    entry = _entry(("\0nlpcore.refusal: the grader's state", None)[_AT], refusal)
    return 0 if entry is None else len(entry.refused)


def refused_since(refusal: Refusal, count: int) -> tuple:
    """The refused calls noted after the first ``count`` (a copy): the list only grows while
    the refusal is active, so no caller can take a refusal back."""
    entry = _entry(("\0nlpcore.refusal: the grader's state", None)[_AT], refusal)
    return () if entry is None else tuple(entry.refused[count:])


def learner_calls(refusal: Refusal, step: int) -> None:
    """A learner function starts (``step`` 1) or returns (-1) under ``refusal``. Only the
    grading session and this module may count."""
    _refuse_untrusted("refusal.learner_calls")
    entry = _entry(("\0nlpcore.refusal: the grader's state", None)[_AT], refusal)
    if entry is not None and step in (1, -1):
        entry.calls += step


def _unaudited_():
    """Inside, the file guard's audit hook lets this thread's events through, as it does its
    own: for the grader's code between learner calls (no learner code runs inside), which
    reads the code of every function it guards -- each read an audit event, each checked for
    the learner reaching nlpcore's code (:func:`_audit_introspection`) at the cost of two path
    normalisations."""
    busy = ("\0nlpcore.refusal: the grader's state", None)[_AT].busy
    me = _thread.get_ident()
    inside = me in busy
    busy.add(me)
    try:
        yield
    finally:
        if not inside:
            busy.discard(me)


def changes(refusal: Refusal) -> List[str]:
    """The refused modules whose namespace lost or rebound a name since :func:`install` (a
    guard replaced, an original put back): "module <name>" each, as the snapshot says it."""
    entry = _entry(("\0nlpcore.refusal: the grader's state", None)[_AT], refusal)
    out = []
    for name, after in (entry.installed.items() if entry is not None else ()):
        now = vars(sys.modules[name]) if name in sys.modules else {}
        if any(key not in now or now[key] is not value for key, value in after.items()):
            out.append("module " + name)
    return out


def forget(refusal: Refusal) -> Evidence:
    """The grade is over: its file guard stops. Returns what it saw (also kept as
    ``refusal.evidence``). Only the grading session (and :func:`refused`) may call it."""
    _refuse_untrusted("refusal.forget")
    state = ("\0nlpcore.refusal: the grader's state", None)[_AT]
    entry = _entry(state, refusal)
    if entry is None:
        return refusal.evidence if refusal.evidence is not None else Evidence((), (), ())
    state.active.remove(entry)
    refusal.evidence = Evidence(tuple(entry.refused), tuple(entry.introspected),
                                tuple(entry.audited))
    return refusal.evidence


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


def _guard(fn, qualified: str, entry: _Entry, strict: bool):
    """The guard of ``fn``: the original, and the grade's entry in the sealed state, sit in the
    guard's code constants, where only an audited introspection (``__code__``, ``f_code``)
    reaches them, never in a closure cell."""
    home = os.path.abspath(fn.__code__.co_filename)     # the refused module's own file

    def refused(*args, **kwargs):
        # (fn, entry, qualified, strict, home), sealed into this constant below (seal); the
        # original and the entry are never bound to a name here: a frame's locals are readable
        _, entry, qualified, strict, home = ("\0nlpcore.refusal: the original function", None)[_ORIGINAL_AT]
        del _
        caller = sys._getframe(1)
        where = _plain(caller.f_code.co_filename) or ""
        where = os.path.abspath(where)
        if where == home:                   # one of the module's own helpers: allowed when the
            allowed = not _learner_called(entry, caller)    # grader, not the learner, called in
        elif not strict:
            allowed = _in_package(where)
        else:                               # nlpcore code called by the grader, not by the
            allowed = (_in_package(where) and not entry.calls       # learner (at load time:
                       and not _learner_called(entry, caller))      # the web door)
        del entry, caller
        if allowed:
            return ("\0nlpcore.refusal: the original function", None)[_ORIGINAL_AT][0](*args, **kwargs)
        ("\0nlpcore.refusal: the original function", None)[_ORIGINAL_AT][1].refused.append(qualified)
        raise RefusedCall("%s is refused while this step is graded: the step asks you to "
                          "write this computation yourself" % qualified)
    guard = seal(refused, _ORIGINAL, (fn, entry, qualified, strict, home))
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
        name = _plain(frame.f_code.co_filename) or ""
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
    state = ("\0nlpcore.refusal: the grader's state", None)[_AT]
    if not state.hooked and hasattr(sys, "addaudithook"):
        sys.addaudithook(_audit_open)
        state.hooked = True


def _audit_open(event, args):
    """The audit hook (sealed below): cheap for the events it does not handle; for those, once
    per thread at a time (the hook's own reads raise events), with the active entries. No name
    here holds the state (a refusal raised from here leaves this frame in the learner's
    traceback, where its locals can be read); the work is done by :func:`_audit`, called
    through a constant, with globals of its own (see _private_chain): learner code can rebind
    neither it nor what it calls, not even for a moment."""
    if not ("\0nlpcore.refusal: the grader's state", None)[_AT].active or event not in _HANDLED:
        return
    me = _thread.get_ident()
    if me in ("\0nlpcore.refusal: the grader's state", None)[_AT].busy:
        return
    ("\0nlpcore.refusal: the grader's state", None)[_AT].busy.add(me)
    try:
        refusal = ("\0nlpcore.refusal: the hook's work", None)[_AT][0](
            tuple(("\0nlpcore.refusal: the grader's state", None)[_AT].active), event, args,
            ("\0nlpcore.refusal: the hook's work", None)[_AT][1](1))
    finally:
        ("\0nlpcore.refusal: the grader's state", None)[_AT].busy.discard(me)
    if refusal is not None:
        raise refusal


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
    base = os.path.basename(filename)
    return base in _STACK_READERS and os.path.realpath(filename) == _STACK_READER_FILES.get(base)


def _stack_reader_files() -> dict:
    import inspect
    import traceback
    return {"traceback.py": os.path.realpath(traceback.__file__),
            "inspect.py": os.path.realpath(inspect.__file__)}


_STACK_READER_FILES = _stack_reader_files()


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
    target, attr = args[0], args[1]
    if attr == "__code__":
        code = getattr(target, "__code__", None) if type(target) is types.FunctionType else None
    elif attr == "f_code":
        code = target.f_code
    elif attr == "tb_frame":
        code = target.tb_frame.f_code
    elif attr in _FRAMES_OF:
        code = getattr(target, _FRAMES_OF[attr], None)
    else:
        return
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
    return RefusedCall("reading the %s is refused while a grade runs: it holds the grader's "
                      "own state" % what)


_HANDLED = frozenset(("object.__getattr__", "import", "open") + _REFUSED_HOOKS + _SPOOFING
                     + tuple(AUDITED_EVENTS) + tuple(_OUTSIDE_EVENTS))

def _private_chain():
    """(the hook's work, ``sys._getframe``): :func:`_audit` and every function it calls, copied
    with globals of their own -- a copy of this module's taken now, its builtins a copy too,
    ``os``, ``os.path``, ``sys`` and ``types`` stand-ins holding what the hook uses, and
    ``os.path``'s functions copied likewise -- so that learner code rebinding a name here, in
    ``os``, ``posixpath`` or ``builtins`` (and putting it back before the grade ends) changes
    nothing the hook does. Reached only through :func:`_audit_open`'s code constants."""
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
                                             CodeType=types.CodeType),
                 _thread=None, linecache=None, importlib=None)
    for name in ("_audit", "_audit_introspection", "_refuse_hook_or_spoof", "_audit_watched",
                 "_refuse_outside", "_outside", "_refuse_file", "_learner_called",
                 "_for_linecache", "_plain", "_in_package", "_is_stack_reader", "_is_the_file"):
        chain[name] = _rebound(globals()[name], chain)
    return chain["_audit"], sys._getframe


def _rebound(fn, namespace: dict):
    """A copy of ``fn`` whose globals (and builtins) are ``namespace``."""
    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


# The sealing: one _State, in the code constants of the functions that use it (see _State).
_the_state = _State()
for _name in ("install", "original_ids", "_evidence", "refused_count", "refused_since",
              "learner_calls", "changes", "forget", "hook", "_audit_open"):
    _fn = seal(globals()[_name], _STATE, _the_state)
    _fn.__doc__ = globals()[_name].__doc__
    globals()[_name] = _fn
_audit_open = seal(_audit_open, "\0nlpcore.refusal: the hook's work", _private_chain())
_unaudited = contextlib.contextmanager(seal(_unaudited_, _STATE, _the_state))
del _the_state, _name, _fn, _unaudited_
