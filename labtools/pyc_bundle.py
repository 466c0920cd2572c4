"""Precompiled bytecode for the Python modules every worker of the page imports while it boots.

Pyodide 0.17 ships the standard library and NumPy as source only and runs with
``sys.dont_write_bytecode``, so each Python worker compiles every module it imports, again:
about a second per worker on the lab's machine (bench/results/exercise_page_boot.json). This
module builds ``pyc/bundle.bin``: the modules imported by ``nlpcore.web``'s exercise door,
compiled from the very bytes Pyodide ships (read out of its ``.data`` packages) by a CPython
3.8 (``.venv38``, the magic number Pyodide's 3.8 checks), as *unchecked hash-based* pycs
(PEP 552): the importer takes them without comparing timestamps with the source, which stays
beside them (tracebacks and ``__file__`` are unchanged). js/pyworker.js writes them into the
worker's file system before Python starts. nlpcore's own modules are in it too, compiled from
the files the build puts in the wheel (``own``): the wheel still installs the sources (the
learner-facing package, and what tracebacks quote), and importing nlpcore no longer compiles
them in every worker (each pyc carries its source's hash, which the tests compare with the
wheel's file).

Bundle layout: 4 bytes (little-endian uint32) N, N bytes of JSON ``{"python": "3.8", "files":
[[path in the worker's file system, size], ...]}``, then the files' bytes in that order.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import struct
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYTHON38 = ROOT / ".venv38" / "bin" / "python"
PYODIDE_LIB = "/lib/python3.8/"                   # where Pyodide's file system keeps the stdlib
PYODIDE_SITE = PYODIDE_LIB + "site-packages/"
PACKAGES = ("pyodide.asm", "numpy")               # the .js/.data pairs to read sources from
CHUNK = 2048                                      # Emscripten's LZ4 packages: chunk size (bytes)

# What a worker imports at boot, run under CPython 3.8: the names found are looked up in
# Pyodide's packages (modules Pyodide lacks are skipped; its own `pyodide` package is added).
IMPORTS = """
import json, sys
import numpy, nlpcore.web
nlpcore.web.call("exercises.catalog", {})
print(json.dumps(sorted(m.__file__ for m in list(sys.modules.values())
                        if isinstance(getattr(m, "__file__", None), str) and m.__file__.endswith(".py"))))
"""

# Compiles each source file given on stdin (JSON [[source path, pyc path, name in Pyodide]]).
COMPILE = """
import json, py_compile, sys
for source, target, shown in json.load(sys.stdin):
    py_compile.compile(source, cfile=target, dfile=shown, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
"""


def _length(nibble: int, data: bytes, i: int):
    """An LZ4 length: a token's nibble, and when it is 15, the bytes after it added on until one
    is not 255. Returns (length, index past it)."""
    length = nibble
    if nibble == 15:
        while True:
            extra = data[i]
            i += 1
            length += extra
            if extra != 255:
                break
    return length, i


def lz4_block(data: bytes, size: int) -> bytes:
    """One LZ4 block (no frame) decompressed: Emscripten's MiniLZ4 format."""
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        token = data[i]
        i += 1
        literals, i = _length(token >> 4, data, i)
        out += data[i:i + literals]
        i += literals
        if i >= n:
            break
        offset = data[i] | data[i + 1] << 8
        i += 2
        if offset == 0 or offset > len(out):
            raise ValueError("corrupt LZ4 block: match offset %d at output %d" % (offset, len(out)))
        match, i = _length(token & 15, data, i)
        match += 4
        start = len(out) - offset
        for k in range(match):  # matches may overlap their own output
            out.append(out[start + k])
    if len(out) > size:
        raise ValueError("LZ4 block decompressed to %d bytes, more than the chunk's %d" % (len(out), size))
    return bytes(out)


def _object_after(text: str, *markers: str) -> dict:
    """The JS object literal that starts at the first found marker's "{" (the loaders are
    minified: keys may be bare identifiers); string-aware brace matching, then JSON."""
    at = next((text.find(m) for m in markers if m in text), -1)
    if at < 0:
        raise ValueError("none of %r in a Pyodide package loader" % (markers,))
    start = text.index("{", at)
    depth, i, quoted = 0, start, False
    while True:
        c = text[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                break
        i += 1
    literal = re.sub(r'([{,])([A-Za-z_$][\w$]*):', r'\1"\2":', text[start:i + 1])
    return json.loads(literal)


class Package:
    """The files of one Pyodide package (``<name>.js`` metadata + LZ4-compressed ``<name>.data``)."""

    def __init__(self, dist: pathlib.Path, name: str) -> None:
        text = (dist / (name + ".js")).read_text(encoding="utf-8")
        self.files = {f["filename"]: (f["start"], f["end"]) for f in _object_after(text, "loadPackage({files:", 'loadPackage({"files":')["files"]}
        self.chunks = _object_after(text, "var compressedData=")
        self.data = (dist / (name + ".data")).read_bytes()
        self._cache = {}

    def _chunk(self, index: int) -> bytes:
        if index not in self._cache:
            start, size = int(self.chunks["offsets"][index]), int(self.chunks["sizes"][index])  # (279e3 in JS)
            raw = self.data[start:start + size]
            self._cache[index] = lz4_block(raw, CHUNK) if self.chunks["successes"][index] else self.data[start:start + CHUNK]
        return self._cache[index]

    def read(self, path: str) -> bytes:
        start, end = self.files[path]
        parts = [self._chunk(i) for i in range(start // CHUNK, (end - 1) // CHUNK + 1)] if end > start else []
        blob = b"".join(parts)
        return blob[start % CHUNK:start % CHUNK + end - start]


def boot_modules(python: pathlib.Path) -> list:
    """The Pyodide paths of the .py modules a booted worker has imported (per CPython 3.8):
    standard library modules and NumPy's."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "py"), PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([str(python), "-c", IMPORTS], capture_output=True, text=True, env=env, check=True)
    where = subprocess.run([str(python), "-c", "import json, sysconfig; print(json.dumps(sysconfig.get_paths()))"],
                           capture_output=True, text=True, check=True)
    roots = json.loads(where.stdout)
    stdlib, site = pathlib.Path(roots["stdlib"]), pathlib.Path(roots["purelib"])
    paths = set()
    for file in map(pathlib.Path, json.loads(out.stdout.strip().splitlines()[-1])):
        if site in file.parents:
            rel = file.relative_to(site)
            if rel.parts[0] == "numpy":
                paths.add(PYODIDE_SITE + rel.as_posix())
        elif stdlib in file.parents and "site-packages" not in file.relative_to(stdlib).parts:
            paths.add(PYODIDE_LIB + file.relative_to(stdlib).as_posix())
    return sorted(paths)


def build_bundle(dist: pathlib.Path, dest: pathlib.Path, python: pathlib.Path = PYTHON38,
                 own=()) -> dict:
    """Writes ``dest`` (see the module docstring) from the Pyodide packages in ``dist`` and the
    ``own`` files ((path in the wheel, file), the .py ones compiled, to where the workers
    unpack the wheel); returns {files, bytes} or {skipped: reason} when no CPython 3.8 is at
    hand."""
    if not python.exists():
        return {"skipped": "no CPython 3.8 at %s (scripts/setup.sh makes it): workers compile at boot" % python}
    packages = [Package(dist, name) for name in PACKAGES]
    wanted = set(boot_modules(python))
    for package in packages:  # Pyodide's own glue, imported by every boot
        wanted |= {p for p in package.files if p.startswith((PYODIDE_SITE + "pyodide/", PYODIDE_SITE + "_pyodide/"))}
    jobs, sources = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(wanted):
            package = next((p for p in packages if path in p.files and path.endswith(".py")), None)
            if package is None:
                continue
            folder, name = path.rsplit("/", 1)
            target = "%s/__pycache__/%s.cpython-38.pyc" % (folder, name[:-3])
            source = pathlib.Path(tmp, "src" + path)
            source.parent.mkdir(parents=True, exist_ok=True)
            source.write_bytes(package.read(path))
            jobs.append([str(source), str(pathlib.Path(tmp, "pyc" + target)), path])
            sources[target] = jobs[-1][1]
        for arcname, file in own:
            if not arcname.endswith(".py"):
                continue
            folder, name = (PYODIDE_SITE + arcname).rsplit("/", 1)
            target = "%s/__pycache__/%s.cpython-38.pyc" % (folder, name[:-3])
            jobs.append([str(file), str(pathlib.Path(tmp, "pyc" + target)), PYODIDE_SITE + arcname])
            sources[target] = jobs[-1][1]
        # A fixed hash seed: frozenset constants are marshalled in hash order (a deterministic build).
        subprocess.run([str(python), "-c", COMPILE], input=json.dumps(jobs), text=True, check=True,
                       env=dict(os.environ, PYTHONHASHSEED="0"))
        files = [(target, pathlib.Path(pyc).read_bytes()) for target, pyc in sorted(sources.items())]
    header = json.dumps({"python": "3.8", "files": [[t, len(b)] for t, b in files]},
                        sort_keys=True, separators=(",", ":")).encode()
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(struct.pack("<I", len(header)) + header + b"".join(b for _, b in files))
    return {"files": len(files), "bytes": dest.stat().st_size}
