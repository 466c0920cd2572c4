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
audit hook (:attr:`Refusal.introspected`), refused, and the grade then fails; so is any change to a
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
The audit hook's work is in :mod:`nlpcore.refusal_hook`.

The grader's state -- the active refusals (:class:`_Entry`: a frozen copy of each
:class:`Refusal`'s policy, taken at :func:`install`, and the evidence: refused calls,
introspection, audited events), the threads inside the hook, whether it is installed -- is one
:class:`_State` sealed into the code constants of the functions that use it (:func:`seal`):
no module global, closure, default or reachable object refers to it, and the hook refuses the
reads that would reach it. A :class:`Refusal` is a handle (writing its fields changes nothing);
:func:`install`, :func:`forget` and :func:`learner_calls` refuse callers other than this module
and the grading session; the evidence only grows while a grade runs and :func:`forget` copies
it out. What this cannot stop, in the process where learner code runs, is code that patches the
grader's checking modules and puts them back before the grade ends; see
``nlpcore/lab/exercises/README.md`` ("What is measured where"). Verdicts are never reachable
this way: they are computed in an interpreter that never ran learner code
(:mod:`nlpcore.lab.session`).
"""
from __future__ import annotations

import _thread
import collections
import contextlib
import importlib
import linecache
import os
import sys
import types
from typing import List, Sequence

from .refusal_hook import (AUDITED_EVENTS, HIDDEN_CODE_FILES, RefusedCall,  # noqa: F401
                           RefusedRead, _HANDLED, _in_package, _learner_called, _plain,
                           _private_chain)

LEARNER_FILE = "<your code>"    # the file name learner code is compiled as (session.load_learner)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))                 # .../nlpcore

# An object's identity as an int, unique among live objects as id() is: object's own hash, made
# from the address alone (no class can change it). id() raises the audit event "builtins.id",
# and every audit hook of the grader (here and nlpcore.lab.session) is called for each one: in
# Pyodide, the snapshot's tens of thousands of identities cost more than the grade's checks.
identity = object.__hash__
_GRADER_DIR = os.path.join(_PACKAGE_DIR, "lab") + os.sep                   # .../nlpcore/lab/


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


# The sealed objects are instances of ``types.SimpleNamespace``, a built-in type, never of a
# class of this module: any class is reachable (``object.__subclasses__()``), and learner code
# could put a property on it (``_State.active = property(...)``) that every read of the sealed
# object would then run -- a built-in type's attributes cannot be set.

def _Entry(handle: Refusal):
    """One active refusal in the sealed state: the frozen copy of its handle's policy, taken at
    the first :func:`install`, and the evidence the guards and the audit hook note."""
    return types.SimpleNamespace(
        handle=identity(handle), contained=handle.contained is True,
        learner_files=frozenset(_plain(f) for f in handle.learner_files) - {None},
        grader_files=frozenset(_plain(f) for f in handle.grader_files) - {None},
        files=frozenset(),
        installed={},                   # module name -> its namespace right after install
        original_ids=set(), refused=[], introspected=[], audited=[], calls=0)


def _State():
    """The grader's state that gates the audit hook and collects its evidence: the active
    refusals (:func:`_Entry`), the threads inside the hook (re-entrancy, ``busy``), whether the
    hook is installed. Exactly one exists, created below and sealed into the code constants of
    the functions that use it (:func:`seal`): no module global, closure, default or attribute of
    a reachable object refers to it, so learner code reaches it only through an audited read of
    ``__code__``/``f_code`` (refused by the hook) or the collector (``gc``, refused)."""
    return types.SimpleNamespace(active=[], busy=set(), hooked=False)


_STATE = "\0nlpcore.refusal: the grader's state"    # stands for the _State in sealed code
_CHAIN = "\0nlpcore.refusal: the private chain"     # for refusal_hook._private_chain()
_TOOLS = "\0nlpcore.refusal: the hook's tools"      # what _audit_open would otherwise look up
_AT = 0


def install(modules: Sequence[str], refusal: Refusal, strict: bool = True) -> None:
    """Guard every function of ``modules`` (see the module docstring), noting refusals in the
    sealed state under ``refusal``. Modules this build does not have are skipped. Undone by the
    grade's snapshot restore, or by :func:`refused` on exit. Only the grading session (and
    :func:`refused`) may call it."""
    if not ("\0nlpcore.refusal: the private chain", None)[_AT]["_trusted_caller"](1):     # (private: see _private_chain)
        raise RefusedCall("refusal.install is the grader's own: your code may not call it")
    state = ("\0nlpcore.refusal: the grader's state", None)[_AT]
    hook()
    entry = ("\0nlpcore.refusal: the private chain", None)[_AT]["_entry"](state, refusal)
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
    for name, module in loaded:             # (each __code__ read here is an audit event that the
        for attr, value in list(vars(module).items()):  # hook lets through: nlpcore reads it)
            # exact types only: a str subclass (a name, a __module__) would run its own methods
            if (type(attr) is str and type(value) is types.FunctionType
                    and type(value.__module__) is str and value.__module__ == name):
                guards[identity(value)] = _guard(value, "%s.%s" % (name, attr), entry, strict,
                                                 ("\0nlpcore.refusal: the private chain", None)[_AT]["_decide"])
    for name, module in loaded:             # the module's own functions, and the originals it
        for attr, value in list(vars(module).items()):  # imported from another refused module
            if type(attr) is str and type(value) is types.FunctionType and identity(value) in guards:
                setattr(module, attr, guards[identity(value)])
    entry.original_ids.update(guards)
    for name, module in loaded:
        entry.installed[name] = dict(vars(module))


def original_ids(refusal: Refusal) -> frozenset:
    """identity() of every original the guards of ``refusal`` replaced (ints only)."""
    entry = ("\0nlpcore.refusal: the private chain", None)[_AT]["_entry"](("\0nlpcore.refusal: the grader's state", None)[_AT], refusal)
    return frozenset(entry.original_ids) if entry is not None else frozenset()


def _evidence(refusal: Refusal) -> Evidence:
    """What the active ``refusal`` has seen so far, copied (empty when it is not active)."""
    entry = ("\0nlpcore.refusal: the private chain", None)[_AT]["_entry"](("\0nlpcore.refusal: the grader's state", None)[_AT], refusal)
    if entry is None:
        return Evidence((), (), ())
    return Evidence(tuple(entry.refused), tuple(entry.introspected), tuple(entry.audited))


def refused_count(refusal: Refusal) -> int:
    """How many refused calls ``refusal`` has noted (see :func:`refused_since`)."""
    entry = ("\0nlpcore.refusal: the private chain", None)[_AT]["_entry"](("\0nlpcore.refusal: the grader's state", None)[_AT], refusal)
    return 0 if entry is None else len(entry.refused)


def refused_since(refusal: Refusal, count: int) -> tuple:
    """The refused calls noted after the first ``count`` (a copy): the list only grows while
    the refusal is active, so no caller can take a refusal back."""
    entry = ("\0nlpcore.refusal: the private chain", None)[_AT]["_entry"](("\0nlpcore.refusal: the grader's state", None)[_AT], refusal)
    return () if entry is None else tuple(entry.refused[count:])


def learner_calls(refusal: Refusal, step: int) -> None:
    """A learner function starts (``step`` 1) or returns (-1) under ``refusal``. Only the
    grading session and this module may count."""
    if not ("\0nlpcore.refusal: the private chain", None)[_AT]["_trusted_caller"](1):     # (private: see _private_chain)
        raise RefusedCall("refusal.learner_calls is the grader's own: your code may not call it")
    entry = ("\0nlpcore.refusal: the private chain", None)[_AT]["_entry"](("\0nlpcore.refusal: the grader's state", None)[_AT], refusal)
    if entry is not None and step in (1, -1):
        entry.calls += step


def changes(refusal: Refusal) -> List[str]:
    """The refused modules whose namespace lost or rebound a name since :func:`install` (a
    guard replaced, an original put back): "module <name>" each, as the snapshot says it."""
    entry = ("\0nlpcore.refusal: the private chain", None)[_AT]["_entry"](("\0nlpcore.refusal: the grader's state", None)[_AT], refusal)
    out = []
    for name, after in (entry.installed.items() if entry is not None else ()):
        now = vars(sys.modules[name]) if name in sys.modules else {}
        if any(key not in now or now[key] is not value for key, value in after.items()):
            out.append("module " + name)
    return out


def forget(refusal: Refusal) -> Evidence:
    """The grade is over: its file guard stops. Returns what it saw (also kept as
    ``refusal.evidence``). Only the grading session (and :func:`refused`) may call it."""
    if not ("\0nlpcore.refusal: the private chain", None)[_AT]["_trusted_caller"](1):     # (private: see _private_chain)
        raise RefusedCall("refusal.forget is the grader's own: your code may not call it")
    state = ("\0nlpcore.refusal: the grader's state", None)[_AT]
    entry = ("\0nlpcore.refusal: the private chain", None)[_AT]["_entry"](state, refusal)
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


def _guard(fn, qualified: str, entry, strict: bool, decide):
    """The guard of ``fn``: the original, the grade's entry in the sealed state and the private
    function that decides (``refusal_hook._decide``) sit in the guard's code constants, where
    only an audited introspection (``__code__``, ``f_code``) reaches them, never in a closure
    cell, and no name of the guard's frame holds them (a refused call leaves that frame in the
    learner's traceback)."""
    home = os.path.abspath(fn.__code__.co_filename)     # the refused module's own file

    def refused(*args, **kwargs):
        # (fn, decide, entry, qualified, strict, home), sealed into this constant below (seal)
        if ("\0nlpcore.refusal: the original function", None)[_ORIGINAL_AT][1](
                ("\0nlpcore.refusal: the original function", None)[_ORIGINAL_AT]):
            return ("\0nlpcore.refusal: the original function", None)[_ORIGINAL_AT][0](*args, **kwargs)
        raise RefusedCall("%s is refused while this step is graded: the step asks you to write "
                          "this computation yourself"
                          % ("\0nlpcore.refusal: the original function", None)[_ORIGINAL_AT][3])
    guard = seal(refused, _ORIGINAL, (fn, decide, entry, qualified, strict, home))
    guard.__name__ = fn.__name__
    guard.__qualname__ = fn.__qualname__
    guard.__doc__ = fn.__doc__
    return guard


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
    neither it nor what it calls, not even for a moment. Nor anything this function reads: it
    looks up no global or builtin (a module global of refusal, or a name put in its namespace
    such as ``type``, would be the learner's to rebind) -- the events it handles, the thread's
    id, ``type`` and ``str`` come from its own constant (``tools``), and an event that is not an
    exact str (learner code calling ``sys.audit`` with a str subclass, whose ``__eq__`` or
    ``__hash__`` would run here) is not one CPython raises: let through."""
    at = 0                  # a local index: the compiler folds (constant, None)[0] away
    tools = ("\0nlpcore.refusal: the hook's tools", None)[at]   # (handled, get_ident, type, str)
    if tools[2](event) is not tools[3]:     # (nothing in tools is secret: a local may hold it)
        return
    if not ("\0nlpcore.refusal: the grader's state", None)[at].active or event not in tools[0]:
        return
    me = tools[1]()
    if me in ("\0nlpcore.refusal: the grader's state", None)[at].busy:
        return
    ("\0nlpcore.refusal: the grader's state", None)[at].busy.add(me)
    try:
        refusal = ("\0nlpcore.refusal: the private chain", None)[at]["_audit"](
            ("\0nlpcore.refusal: the private chain", None)[at]["tuple"](
                ("\0nlpcore.refusal: the grader's state", None)[at].active), event, args,
            ("\0nlpcore.refusal: the private chain", None)[at]["_getframe"](1))
    finally:
        ("\0nlpcore.refusal: the grader's state", None)[at].busy.discard(me)
    if refusal is not None:
        try:
            raise refusal
        finally:        # the traceback holds this frame: its locals must not hold the exception
            refusal = None  # (a cycle that only the collector frees, counted in a tiled peak)


# The sealing: one _State, and the private copies of the functions that decide (see
# refusal_hook._private_chain), in the code constants of the functions that use them.
_the_state, _the_chain = _State(), _private_chain()
for _name in ("install", "original_ids", "_evidence", "refused_count", "refused_since",
              "learner_calls", "changes", "forget", "hook", "_audit_open"):
    _fn = globals()[_name]
    for _placeholder, _obj in ((_STATE, _the_state), (_CHAIN, _the_chain),
                               (_TOOLS, (_HANDLED, _thread.get_ident, type, str))):
        if (_placeholder, None) in _fn.__code__.co_consts:
            _fn = seal(_fn, _placeholder, _obj)
    _fn.__doc__ = globals()[_name].__doc__
    globals()[_name] = _fn
del _the_state, _the_chain, _name, _fn, _placeholder, _obj
