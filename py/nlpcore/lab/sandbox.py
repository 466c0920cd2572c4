"""Undo what learner code did to the interpreter, so that one submission cannot change a later
grade (or a later page action that runs in the same Python).

Learner code runs in the grader's own interpreter (CPython in the tests, the page's Pyodide
worker in the browser). It can rebind names in any module (``np.allclose = ...``,
``verdict.judge = ...``, ``builtins.abs = ...``), change a function's code or defaults,
mutate module-level containers and the attributes of the exercise objects, install trace hooks,
redirect ``sys.stdout``, or change NumPy's error state. :class:`Snapshot` records all of that
once, while the interpreter is still untouched, and :meth:`Snapshot.restore` puts it back after
every submission (see :func:`nlpcore.lab.session.isolated`).

What is recorded (the *guarded modules* are ``builtins``, ``sys``, ``nlpcore.*``, ``numpy.*``
and the standard modules the graders use):

- every guarded module's namespace (``module.__dict__``);
- for every Python function reachable from those namespaces (module level and class bodies):
  ``__code__``, ``__defaults__``, ``__kwdefaults__``, ``__dict__``, closure cells and its
  names (``__module__``, ``__name__``, ``__qualname__``);
- for every class defined in them: its class dictionary;
- within ``nlpcore``: lists, dicts, sets, arrays and instances of ``nlpcore`` classes reachable
  from module level (the exercise registry, steps, checks, tolerance tables), a few levels deep;
- process state: NumPy's error state, print options and global random state, ``warnings``
  filters, ``sys`` hooks (trace, profile, display, except), recursion limit, ``sys.path``,
  ``sys.meta_path`` and the set of imported modules (modules imported by learner code are
  forgotten, except compiled extensions, which cannot be loaded twice).

What this cannot undo: anything reached only through introspection of objects not listed
above (``gc.get_objects()``, ``object.__setattr__`` on an arbitrary library object), C-level
state (``sys.addaudithook`` hooks are permanent), and files written to the virtual file system.
The grader's audit hook reports the first two kinds of call, and the page replaces its Python
worker after any grade whose restore had something to undo (site/js/runtime.js).
"""
from __future__ import annotations

import builtins
import itertools
import operator
import sys
import types
import warnings
from typing import Dict, List, Tuple

import numpy as np

from ..refusal import identity

# Modules whose namespaces are restored, by name or by prefix (a name followed by ".").
GUARDED_PREFIXES = ("nlpcore", "numpy")
GUARDED_MODULES = ("builtins", "sys", "math", "cmath", "random", "functools", "operator",
                   "itertools", "collections", "re", "json", "warnings", "time", "traceback",
                   "types", "copy", "io", "contextlib", "tracemalloc", "gc", "importlib",
                   "pkgutil", "dataclasses", "typing", "abc", "inspect", "string", "textwrap")
OWN_PREFIX = "nlpcore"      # objects of this package are recorded field by field
DEPTH = 8                   # how deep to walk containers and objects from module level
ARRAY_BYTES = 1 << 20       # module-level arrays up to this size are copied and restored

_SYS_HOOKS = ("displayhook", "excepthook", "stdout", "stderr", "stdin", "breakpointhook")
# Names in these namespaces belong to the host (a test runner's output capture, warning
# filters): they are put back to what they were when the grade began (process state), not to
# the snapshot, and left out of the namespace comparison.
VOLATILE = {
    "sys": frozenset(_SYS_HOOKS + ("last_type", "last_value", "last_traceback", "ps1", "ps2",
                                   "tracebacklimit")),
    "warnings": frozenset(("filters", "showwarning", "_showwarnmsg_impl", "_showwarnmsg",
                           "_filters_version", "defaultaction", "onceregistry")),
}


def guarded(name: str) -> bool:
    """Whether the snapshot records the module ``name``."""
    return name in GUARDED_MODULES or any(name == p or name.startswith(p + ".")
                                          for p in GUARDED_PREFIXES)


def _own(obj) -> bool:
    return str(getattr(type(obj), "__module__", "") or "").startswith(OWN_PREFIX)


class Snapshot:
    """Interpreter state taken once (:meth:`take`) and put back on demand (:meth:`restore`)."""

    def __init__(self):
        self.modules: Dict[str, types.ModuleType] = {}
        self.namespaces: List[Tuple[dict, dict]] = []
        self.functions: List[tuple] = []
        self.classes: List[Tuple[type, dict]] = []
        self.containers: List[tuple] = []
        self.instances: List[Tuple[object, dict]] = []
        self.arrays: List[Tuple[np.ndarray, np.ndarray]] = []
        self.process: dict = {}
        self.builtins: dict = {}
        self.builtins_repaired = False      # set by repair_builtins, reported by restore

    @classmethod
    def take(cls) -> "Snapshot":
        snap = cls()
        snap.process = _process_state()     # first: it imports numpy.random where still lazy
        snap.modules = dict(sys.modules)
        seen_functions, seen_classes, seen_objects = set(), set(), set()
        for name, module in list(sys.modules.items()):
            if module is None or not guarded(name):
                continue
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict):
                continue
            volatile = VOLATILE.get(name, frozenset())
            snap.namespaces.append((namespace, {k: v for k, v in namespace.items()
                                                if k not in volatile}, volatile))
            own = name.startswith(OWN_PREFIX)
            for value in list(namespace.values()):
                snap._record_callable(value, seen_functions, seen_classes)
                if own:
                    snap._walk(value, DEPTH, seen_objects, seen_functions, seen_classes)
        snap.builtins = dict(builtins.__dict__)
        return snap

    def repair_builtins(self, _namespace=builtins.__dict__, _keys=dict.keys, _get=dict.get,
                        _set=dict.__setitem__, _delete=dict.__delitem__, _list=list):
        """Put the builtins back, using only methods bound when this module was imported: the
        grader's own code needs ``len``, ``isinstance``... right after learner code returns,
        and learner code may have replaced them. Cheap enough to run after every call."""
        saved = self.builtins
        for key in _list(_keys(_namespace)):
            if key not in saved:
                _delete(_namespace, key)
                self.builtins_repaired = True
        for key in _keys(saved):
            value = _get(saved, key)
            if key not in _namespace or _get(_namespace, key) is not value:
                _set(_namespace, key, value)
                self.builtins_repaired = True

    def hide(self, ids) -> tuple:
        """Take out of the snapshot every record that holds one of the objects whose identity
        (:func:`nlpcore.refusal.identity`) is in ``ids`` (the originals of refused kernels), for
        as long as learner code runs: it can read the snapshot. Returns them for :meth:`unhide`.
        Every record is looked at on every call (:func:`_holds`): nothing kept between grades
        could be rewritten by learner code to leave an original in."""
        ids = set(ids)
        hidden = []
        for name in ("namespaces", "functions", "classes", "containers", "instances"):
            records = getattr(self, name)
            keep, out = [], []
            for record in records:
                (out if _holds(name, record, ids) else keep).append(record)
            records[:] = keep
            hidden.append((name, out))
        return tuple(hidden)

    def unhide(self, hidden: tuple) -> None:
        """Put back what :meth:`hide` took out (before :meth:`restore`)."""
        for name, records in hidden:
            getattr(self, name).extend(records)

    # -- recording -----------------------------------------------------------------------------

    def _record_function(self, fn, seen):
        if identity(fn) in seen:
            return
        seen.add(identity(fn))
        cells = tuple(fn.__closure__ or ())
        contents = []
        for cell in cells:
            try:
                contents.append(cell.cell_contents)
            except ValueError:               # an empty cell (a name bound later)
                contents.append(_EMPTY)
        self.functions.append((fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__,
                               dict(fn.__dict__), cells, tuple(contents),
                               (fn.__module__, fn.__name__, fn.__qualname__)))

    def _record_callable(self, value, seen_functions, seen_classes):
        if isinstance(value, types.FunctionType):
            self._record_function(value, seen_functions)
        elif isinstance(value, (staticmethod, classmethod)):
            self._record_callable(value.__func__, seen_functions, seen_classes)
        elif isinstance(value, property):
            for part in (value.fget, value.fset, value.fdel):
                if part is not None:
                    self._record_callable(part, seen_functions, seen_classes)
        elif isinstance(value, type) and identity(value) not in seen_classes:
            seen_classes.add(identity(value))
            if value.__flags__ & (1 << 9):   # Py_TPFLAGS_HEAPTYPE: a class written in Python
                self.classes.append((value, dict(value.__dict__)))
                for member in list(value.__dict__.values()):
                    self._record_callable(member, seen_functions, seen_classes)

    def _walk(self, value, depth, seen, seen_functions, seen_classes):
        """Record mutable containers, arrays and nlpcore objects reachable from ``value``."""
        if (depth <= 0 or identity(value) in seen or getattr(type(value), "sandbox_skip", False)
                or isinstance(value, (str, bytes, int, float, type, types.ModuleType))):
            return
        seen.add(identity(value))
        children = ()
        if isinstance(value, np.ndarray):
            if value.nbytes <= ARRAY_BYTES and value.flags.writeable:
                self.arrays.append((value, value.copy()))
        elif isinstance(value, list):
            self.containers.append((value, list(value)))
            children = list(value)
        elif isinstance(value, dict):
            self.containers.append((value, dict(value)))
            children = list(value.values())
        elif isinstance(value, set):
            self.containers.append((value, set(value)))
            children = list(value)
        elif isinstance(value, tuple):
            children = value
        elif _own(value) and hasattr(value, "__dict__") and not callable(value):
            self.instances.append((value, dict(vars(value))))
            children = list(vars(value).values())
        for child in children:
            self._record_callable(child, seen_functions, seen_classes)
            self._walk(child, depth - 1, seen, seen_functions, seen_classes)

    # -- restoring -----------------------------------------------------------------------------

    def _only_new_submodules(self, namespace: dict, saved: dict, volatile) -> bool:
        """Whether ``namespace`` is ``saved`` plus names of submodules imported since the
        snapshot (``import json.tool`` binds ``tool`` on ``json``; NumPy 2 loads ``np.testing``
        on first use): put back, not a change. Read as exact types (no learner method runs)."""
        if not _same_objects(namespace, saved):
            return False
        parent = saved.get("__name__")
        if type(parent) is not str:
            return False
        for key, value in list(namespace.items()):
            if type(key) is not str:
                return False
            if key in saved or key in volatile:
                continue
            if type(value) is not types.ModuleType:
                return False
            name, own = parent + "." + key, value.__dict__.get("__name__")
            if name in self.modules or type(own) is not str or own != name:
                return False
        return True

    def restore(self, process: dict = None) -> List[str]:
        """Put everything recorded back -- the process state to ``process`` (from
        :func:`process_state` when the grade began) or else to the snapshot's -- and return what
        had changed (for tests and reports; a dict that only gained keys, such as a cache filled
        while grading, is put back without being reported)."""
        self.repair_builtins()
        changed = ["module builtins"] if self.builtins_repaired else []
        self.builtins_repaired = False
        _restore_process(self.process if process is None else process, changed)
        for namespace, saved, volatile in self.namespaces:
            if not _all_str_keys(namespace):       # learner code put an object of its own as a
                changed.append("module %s" % saved.get("__name__", "?"))   # key: its __hash__
                _drop_other_keys(namespace)        # or __eq__ would run in every lookup below
            if "__warningregistry__" in namespace and "__warningregistry__" not in saved:
                del namespace["__warningregistry__"]    # a warning's once-registry, where learner
                # code warned (np.mean of an empty array, warnings.warn(stacklevel=2)): not a change
            if not _same_dict(namespace, saved, volatile):
                if not self._only_new_submodules(namespace, saved, volatile):
                    changed.append("module %s" % saved.get("__name__", "?"))
                _put_back(namespace, saved, volatile)
        for fn, code, defaults, kwdefaults, attrs, cells, contents, names in self.functions:
            if (fn.__code__ is not code or fn.__defaults__ is not defaults
                    or fn.__kwdefaults__ is not kwdefaults or not _same_dict(fn.__dict__, attrs)
                    or fn.__module__ is not names[0] or fn.__name__ is not names[1]
                    or fn.__qualname__ is not names[2]):
                changed.append("function %s" % names[2])
                fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults
                fn.__module__, fn.__name__, fn.__qualname__ = names
                _put_back(fn.__dict__, attrs)
            for cell, content in zip(cells, contents):
                _restore_cell(cell, content, fn, changed)
        for cls, saved in self.classes:
            current = cls.__dict__
            if _same_dict(current, saved):
                continue
            changed.append("class %s" % cls.__qualname__)
            for key in [k for k in current if k not in saved]:
                _try(delattr, cls, key)
            for key, value in saved.items():
                if current.get(key, _EMPTY) is not value and key not in ("__dict__", "__weakref__"):
                    _try(setattr, cls, key, value)
        for container, saved in self.containers:
            if isinstance(container, list):
                if len(container) != len(saved) or any(a is not b for a, b in zip(container, saved)):
                    changed.append("list")
                    container[:] = saved
            elif isinstance(container, dict):
                if not _same_dict(container, saved):
                    if not _only_grew(container, saved):    # a cache filled while grading is
                        changed.append("dict")              # put back, but is no one's mischief
                    _put_back(container, saved)
            elif container != saved:
                changed.append("set")
                container.clear()
                container.update(saved)
        for obj, saved in self.instances:
            current = vars(obj)
            if not _same_dict(current, saved):
                changed.append("object %s" % type(obj).__name__)
                _put_back(current, saved)
        for array, saved in self.arrays:
            if array.shape != saved.shape or array.tobytes() != saved.tobytes():
                changed.append("array")
                _try(np.copyto, array, saved)
        _forget_new_modules(self.modules, changed)
        return changed


def _holds(kind: str, record: tuple, ids: set) -> bool:
    """Whether a snapshot record of ``kind`` keeps alive an object whose identity is in ``ids``
    (for :meth:`Snapshot.hide`): a namespace's saved values; a function and its closure's saved
    contents; a class, container or instance and its saved items."""
    if kind == "namespaces":
        return not ids.isdisjoint(map(identity, record[1].values()))
    if identity(record[0]) in ids:
        return True
    saved = record[6] if kind == "functions" else record[1]
    return not ids.isdisjoint(map(identity, saved.values() if isinstance(saved, dict) else saved))


class _Empty:
    """Stands for an empty closure cell."""


_EMPTY = _Empty()


def _all_str_keys(namespace: dict) -> bool:
    """Whether every key of ``namespace`` is an exact str (iterating keys hashes none)."""
    return all(type(key) is str for key in namespace)


def _drop_other_keys(namespace: dict) -> None:
    """Remove every key that is not an exact str without hashing or comparing it: the dict is
    emptied and refilled with its str keys in one C call each."""
    kept = [(key, value) for key, value in namespace.items() if type(key) is str]
    namespace.clear()
    namespace.update(kept)


def _same_dict(current: dict, saved: dict, volatile=frozenset()) -> bool:
    """Whether ``current`` binds exactly ``saved``'s keys to the very same objects (``volatile``
    keys aside). Without volatile keys the values are compared by identity in C: the snapshot's
    thousands of records are compared after every grade."""
    if not volatile:
        return len(current) == len(saved) and _same_objects(current, saved)
    for key, value in saved.items():
        if current.get(key, _EMPTY) is not value:
            return False
    return not any(k not in saved and k not in volatile for k in current)


def _same_objects(current, saved: dict, _is=operator.is_, _all=all, _map=map,
                  _repeat=itertools.repeat) -> bool:
    """Whether every key of ``saved`` is bound in ``current`` (a dict or a class's mapping
    proxy) to the same object (functions bound when this module was imported, as in
    Snapshot.repair_builtins)."""
    return _all(_map(_is, _map(current.get, saved, _repeat(_EMPTY)), saved.values()))


def _only_grew(current: dict, saved: dict) -> bool:
    """Whether ``current`` is ``saved`` plus new keys (every saved entry still the same object)."""
    return _same_objects(current, saved)


def _put_back(current: dict, saved: dict, volatile=frozenset()):
    """Make ``current`` equal to ``saved`` key by key, leaving ``volatile`` keys alone (never
    empty in between: ``sys`` and ``builtins`` stay usable while they are repaired)."""
    for key in [k for k in current if k not in saved and k not in volatile]:
        del current[key]
    for key, value in saved.items():
        if current.get(key, _EMPTY) is not value:
            current[key] = value


def _restore_cell(cell, content, fn, changed):
    try:
        now = cell.cell_contents
    except ValueError:
        now = _EMPTY
    if now is content:
        return
    changed.append("closure of %s" % getattr(fn, "__qualname__", "?"))
    if content is _EMPTY:
        del cell.cell_contents
    else:
        cell.cell_contents = content


def _try(fn, *args):
    try:
        fn(*args)
    except (AttributeError, TypeError, ValueError):
        pass                                    # a read-only slot: nothing was changed there


def process_state() -> dict:
    """NumPy, warnings and ``sys`` state that the host owns (restored per grade)."""
    return _process_state()


def _process_state() -> dict:
    return {
        "errstate": np.geterr(), "errcall": np.geterrcall(),
        "printoptions": np.get_printoptions(), "random": np.random.get_state(),
        "warnings": list(warnings.filters), "showwarning": warnings.showwarning,
        "trace": sys.gettrace(), "profile": sys.getprofile(),
        "recursionlimit": sys.getrecursionlimit(),
        "path": list(sys.path), "meta_path": list(sys.meta_path),
        "path_hooks": list(sys.path_hooks),
        "sys": {name: getattr(sys, name, None) for name in _SYS_HOOKS},
        "builtins_dict": builtins.__dict__,
    }


def _restore_process(state: dict, changed: List[str]):
    if sys.gettrace() is not state["trace"]:
        sys.settrace(state["trace"])
        changed.append("sys.settrace")
    if sys.getprofile() is not state["profile"]:
        sys.setprofile(state["profile"])
        changed.append("sys.setprofile")
    np.seterr(**state["errstate"])
    np.seterrcall(state["errcall"])
    np.set_printoptions(**state["printoptions"])
    np.random.set_state(state["random"])
    warnings.filters[:] = state["warnings"]
    warnings.showwarning = state["showwarning"]
    if sys.getrecursionlimit() != state["recursionlimit"]:
        sys.setrecursionlimit(state["recursionlimit"])
        changed.append("sys.setrecursionlimit")
    for name in ("path", "meta_path", "path_hooks"):
        if getattr(sys, name) != state[name]:
            getattr(sys, name)[:] = state[name]
            changed.append("sys." + name)
    for name, value in state["sys"].items():
        if getattr(sys, name, None) is not value:
            setattr(sys, name, value)
            changed.append("sys." + name)


def _forget_new_modules(before: Dict[str, types.ModuleType], changed: List[str]):
    """Put back replaced entries of sys.modules and drop modules imported since the snapshot
    (they will be imported afresh when needed), except compiled extensions."""
    for name, module in before.items():
        if sys.modules.get(name, _EMPTY) is not module:
            sys.modules[name] = module
            changed.append("sys.modules[%r]" % name)
    for name in [n for n in sys.modules if n not in before]:
        path = str(getattr(sys.modules[name], "__file__", "") or "")
        if not path.endswith((".so", ".pyd")):
            del sys.modules[name]
