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

What this cannot stop: the learner's code runs in the same interpreter as the guards, so the
original functions stay reachable by introspection (a guard's ``__closure__``, the snapshot, a
grader module's saved reference); an original that calls one of its module's guarded helpers
is refused all the same (the learner's frame is on the stack), one that calls none is not. Python 3.8 (the page) reports reading ``__closure__``,
``__globals__`` and ``__code__`` to the audit hook, and the grade then fails as tampered; 3.11
reports only ``__code__``. Verdicts are never reachable this way: they are computed in an
interpreter that never ran learner code (:mod:`nlpcore.lab.session`).
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
_GRADER_DIR = os.path.join(_PACKAGE_DIR, "lab") + os.sep                   # .../nlpcore/lab/


class RefusedCall(Exception):
    """Raised when learner code calls a library kernel that the step asks it to write."""


class Refusal:
    """What one grade refuses, and what was refused. ``calls_in_flight`` counts learner functions
    running; ``learner_files`` names the files learner code is compiled from; ``grader_files``
    files of the grader outside ``nlpcore/lab``."""

    sandbox_skip = True                 # the grader's own bookkeeping, outside the snapshot

    def __init__(self, learner_files: Sequence[str] = (LEARNER_FILE,),
                 grader_files: Sequence[str] = ()):
        self.refused: List[str] = []
        self.calls_in_flight = 0
        self.learner_files = frozenset(learner_files)
        self.grader_files = frozenset(grader_files)
        self.files: set = set()         # source and bytecode files of the refused modules
        self.modules: List[str] = []

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


_registry = _Registry()


def install(modules: Sequence[str], refusal: Refusal, strict: bool = True) -> None:
    """Guard every function of ``modules`` (see the module docstring), noting refusals in
    ``refusal``. Modules this build does not have are skipped. Undone by the grade's snapshot
    restore, or by :func:`refused` on exit."""
    hook()
    if refusal not in _registry.active:
        _registry.active.append(refusal)
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        refusal.modules.append(name)
        source = os.path.abspath(getattr(module, "__file__", "") or "")
        if source:
            refusal.files.update(_files_of(source))
            for path in list(refusal.files):
                linecache.cache.pop(path, None)
        for attr, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType) and value.__module__ == name:
                setattr(module, attr, _guard(value, "%s.%s" % (name, attr), refusal, strict))


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


def _guard(fn, qualified: str, refusal: Refusal, strict: bool):
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
            return fn(*args, **kwargs)
        refusal.refused.append(qualified)
        raise RefusedCall("%s is refused while this step is graded: the step asks you to "
                          "write this computation yourself" % qualified)
    refused.__name__ = fn.__name__
    refused.__qualname__ = fn.__qualname__
    refused.__doc__ = fn.__doc__
    return refused


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
    if event != "open" or not _registry.active or not isinstance(args[0], str):
        return
    path = os.path.abspath(args[0])
    for refusal in _registry.active:
        if path in refusal.files and _learner_called(refusal, sys._getframe(1)):
            refusal.refused.append("the file " + os.path.basename(path))
            raise RefusedCall("reading %s is refused while this step is graded: the step asks "
                              "you to write this computation yourself" % os.path.basename(path))
