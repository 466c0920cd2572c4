"""Assemble the static FlashAttention lab into dist/ and (optionally) serve it.

The command line is the repository's build.py (a two-line entry point into :func:`main`):

    python3 build.py                      # build dist/ and exit
    python3 build.py --out /tmp/my-dist   # build somewhere else
    python3 build.py serve [--port 8000] [--out DIR] [--no-build]

What goes into the output directory:

    *.html, js/, css/           the pages, copied from site/
    wgsl/*.wgsl                 the shaders the pages fetch and compile
    wheels/nlpcore-<v>-py3-none-any.whl
                                the Python package, unpacked into the page's Pythons by js/pyworker.js
    vendor/pyodide/             the Pyodide runtime and NumPy only
    pyc/bundle.bin              the stdlib and NumPy modules a worker imports at boot, and nlpcore's, precompiled
                                (labtools/pyc_bundle.py; left out without a CPython 3.8)
    vendor/{katex,codemirror,chartjs}/
                                the JS libraries the pages use (chartjs/ holds Chart.js and its
                                matrix chart type, chartjs-chart-matrix)
    src/                        read-only copies of py/nlpcore/**/*.py and wgsl/*.wgsl, less the
                                solutions data/exercises.json holds back (Predict answers; they
                                still ship in the wheel and the bundle, for the judge)
    bench/results/*.json        recorded benchmark results the site plots
    data/exercises.json         nlpcore.lab.export_site_data(), when that function exists
    manifest.json               sha256 and size of every other file

The build is deterministic: two builds of the same tree give byte-identical files (the wheel
uses fixed timestamps and sorted entries; every JSON file is written with sorted keys).
Nothing here needs Node at build time, only the node_modules/ tree that scripts/setup.sh
installs from package-lock.json.
"""
from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import http.server
import io
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
import zipfile

from labtools import pyc_bundle

ROOT = pathlib.Path(__file__).resolve().parents[1]  # the repository
NODE_MODULES = ROOT / "node_modules"
PYODIDE_DIST = NODE_MODULES / "@pyodide" / "pyodide" / "dist"

# The Pyodide packages the lab loads; their dependency closure is read from packages.json.
PYODIDE_PACKAGES = ("numpy",)  # the workers unpack the nlpcore wheel themselves (no micropip)
# The runtime itself: the loader, the Emscripten module, the wasm binary and the
# preloaded standard library file system, plus the package index the loader fetches.
PYODIDE_RUNTIME = ("pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "pyodide.asm.data",
                   "packages.json")

# (source under node_modules, destination under vendor/). Directories are copied whole.
JS_LIBRARIES = (
    ("katex/LICENSE", "katex/LICENSE"),
    ("katex/dist/katex.min.js", "katex/katex.min.js"),
    ("katex/dist/katex.min.css", "katex/katex.min.css"),
    ("katex/dist/contrib/auto-render.min.js", "katex/contrib/auto-render.min.js"),
    ("codemirror/LICENSE", "codemirror/LICENSE"),
    ("codemirror/lib/codemirror.js", "codemirror/lib/codemirror.js"),
    ("codemirror/lib/codemirror.css", "codemirror/lib/codemirror.css"),
    ("codemirror/mode/python/python.js", "codemirror/mode/python/python.js"),
    # clike provides a C-family mode; the WGSL exercise also may define a simple mode.
    ("codemirror/mode/clike/clike.js", "codemirror/mode/clike/clike.js"),
    ("codemirror/addon/mode/simple.js", "codemirror/addon/mode/simple.js"),
    ("codemirror/addon/edit/matchbrackets.js", "codemirror/addon/edit/matchbrackets.js"),
    ("codemirror/addon/edit/closebrackets.js", "codemirror/addon/edit/closebrackets.js"),
    ("chart.js/LICENSE.md", "chartjs/LICENSE.md"),
    ("chart.js/dist/chart.umd.js", "chartjs/chart.umd.js"),
    # The matrix (heatmap) chart type: the exercise page's scratch cell draws 2-D arrays with it.
    ("chartjs-chart-matrix/LICENSE", "chartjs/chartjs-chart-matrix/LICENSE"),
    ("chartjs-chart-matrix/dist/chartjs-chart-matrix.min.js", "chartjs/chartjs-chart-matrix/chartjs-chart-matrix.min.js"),
    # The accessibility checker, for the browser tests only: no page loads it (the tests inject
    # it) and the service worker does not cache it for offline use.
    ("axe-core/LICENSE", "axe-core/LICENSE"),
    ("axe-core/axe.min.js", "axe-core/axe.min.js"),
)
# KaTeX's stylesheet lists woff2 first; every browser that runs WebGPU reads woff2, so the
# woff and ttf fallbacks are never requested and are not shipped.
KATEX_FONT_SUFFIX = ".woff2"

# A fixed timestamp for wheel entries (the earliest a zip file can record).
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)

# Content types the server sends; anything unknown is application/octet-stream.
MIME_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".wasm": "application/wasm",
    ".data": "application/octet-stream",
    ".whl": "application/octet-stream",
    ".wgsl": "text/plain; charset=utf-8",
    ".py": "text/plain; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
    ".woff": "font/woff",
    ".ttf": "font/ttf",
}

MANIFEST = "manifest.json"


class BuildError(Exception):
    """A build step cannot proceed; the message says what to do."""


# ---------------------------------------------------------------------------------------------
# Pyodide and the JS libraries
# ---------------------------------------------------------------------------------------------

def pyodide_closure(dependencies: dict, wanted=PYODIDE_PACKAGES) -> list:
    """Names of `wanted` and everything they depend on, per packages.json's "dependencies"."""
    seen = set()
    stack = list(wanted)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        if name not in dependencies:
            raise BuildError(f"Pyodide package {name!r} is not in packages.json")
        seen.add(name)
        stack.extend(dependencies[name])
    return sorted(seen)


def pyodide_files() -> list:
    """File names (relative to the Pyodide dist folder) the lab needs, sorted."""
    index = json.loads((PYODIDE_DIST / "packages.json").read_text())
    names = list(PYODIDE_RUNTIME)
    for package in pyodide_closure(index["dependencies"]):
        names += [f"{package}.js", f"{package}.data"]
    return sorted(names)


def vendor(out: pathlib.Path) -> None:
    if not PYODIDE_DIST.is_dir():
        raise BuildError(
            f"{PYODIDE_DIST.relative_to(ROOT)} is missing: run scripts/setup.sh "
            "(it installs the vendored JS packages with `npm ci`)")
    for name in pyodide_files():
        copy(PYODIDE_DIST / name, out / "vendor" / "pyodide" / name)
    copy(PYODIDE_DIST.parent / "LICENSE", out / "vendor" / "pyodide" / "LICENSE")
    for source, dest in JS_LIBRARIES:
        path = NODE_MODULES / source
        if not path.is_file():
            raise BuildError(f"node_modules/{source} is missing: run scripts/setup.sh")
        copy(path, out / "vendor" / dest)
    for font in sorted((NODE_MODULES / "katex" / "dist" / "fonts").iterdir()):
        if font.name.endswith(KATEX_FONT_SUFFIX):
            copy(font, out / "vendor" / "katex" / "fonts" / font.name)


# ---------------------------------------------------------------------------------------------
# The nlpcore wheel (PEP 427), built by hand so that it is byte-for-byte reproducible
# ---------------------------------------------------------------------------------------------

def package_sources() -> list:
    """(path inside the package tree, absolute path) of every file shipped in the wheel: the
    package tree (exercise folders with their statements, starters and shaders included), the
    lab's shaders from wgsl/ as nlpcore/_wgsl/<name>, where nlpcore.shaders reads them in Pyodide,
    and the hardware record bench/results/io_h200.json as nlpcore/_results/, where
    nlpcore.measured reads it."""
    package = ROOT / "py" / "nlpcore"
    files = []
    for path in sorted(package.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
            continue
        files.append((path.relative_to(ROOT / "py").as_posix(), path))
    for path in sorted((ROOT / "wgsl").glob("*.wgsl")):
        files.append(("nlpcore/_wgsl/" + path.name, path))
    for path in sorted((ROOT / "bench" / "results").glob("io_h200.json")):
        files.append(("nlpcore/_results/" + path.name, path))
    return files


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def wheel_metadata() -> dict:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {
        "name": project["name"],
        "version": project["version"],
        "summary": project.get("description", ""),
        "requires_python": project.get("requires-python", ""),
        "dependencies": list(project.get("dependencies", [])),
    }


def build_wheel(dest_dir: pathlib.Path) -> pathlib.Path:
    """Write <name>-<version>-py3-none-any.whl into dest_dir and return its path."""
    meta = wheel_metadata()
    name, version = meta["name"], meta["version"]
    dist_info = f"{name}-{version}.dist-info"
    entries = [(arcname, path.read_bytes()) for arcname, path in package_sources()]
    if not any(arc == f"{name}/__init__.py" for arc, _ in entries):
        raise BuildError(f"py/{name}/__init__.py is missing: nothing to put in the wheel")

    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
                f"Summary: {meta['summary']}"]
    if meta["requires_python"]:
        metadata.append(f"Requires-Python: {meta['requires_python']}")
    metadata += [f"Requires-Dist: {dep}" for dep in meta["dependencies"]]
    wheel = ["Wheel-Version: 1.0", "Generator: flashattention-lab build.py",
             "Root-Is-Purelib: true", "Tag: py3-none-any"]
    entries.append((f"{dist_info}/METADATA", ("\n".join(metadata) + "\n").encode()))
    entries.append((f"{dist_info}/WHEEL", ("\n".join(wheel) + "\n").encode()))
    entries.append((f"{dist_info}/top_level.txt", f"{name}\n".encode()))

    record = [f"{arc},{_record_hash(data)},{len(data)}" for arc, data in entries]
    record.append(f"{dist_info}/RECORD,,")
    entries.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))

    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / f"{name}-{version}-py3-none-any.whl"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in entries:  # RECORD last, as PEP 427 recommends
            info = zipfile.ZipInfo(arcname, date_time=ZIP_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    target.write_bytes(buffer.getvalue())
    return target


# ---------------------------------------------------------------------------------------------
# Site, shaders, sources, data, manifest
# ---------------------------------------------------------------------------------------------

def copy(source: pathlib.Path, dest: pathlib.Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)


def copy_tree(source: pathlib.Path, dest: pathlib.Path, pattern: str = "*") -> None:
    if not source.is_dir():
        return
    for path in sorted(source.rglob(pattern)):
        rel = path.relative_to(source)
        hidden = any(part.startswith(".") for part in rel.parts)  # .keep, editor files
        if path.is_file() and not hidden and "__pycache__" not in rel.parts:
            copy(path, dest / rel)


def compose_shaders(source: pathlib.Path, dest: pathlib.Path) -> None:
    """wgsl/*.wgsl into dest as the pages compile them: each ``// #include <file> <region>`` line
    replaced by that region (nlpcore.shaders.compose, loaded from its file: it imports nothing of
    nlpcore), so the browser fetches the same text Python composes. src/wgsl keeps the files as written."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_lab_shaders", ROOT / "py" / "nlpcore" / "shaders.py")
    shaders = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shaders)
    dest.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.glob("*.wgsl")):
        text = shaders.compose(path.read_text(encoding="utf-8"), path.name)
        (dest / path.name).write_text(text, encoding="utf-8")


def write_json(path: pathlib.Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                    encoding="utf-8")


# Run in a fresh interpreter so the build sees this tree's py/ (not an nlpcore imported
# earlier in the calling process, e.g. by a test) and leaves no modules behind.
_EXPORT_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
try:
    import nlpcore.lab as lab
except ModuleNotFoundError as error:
    if error.name not in ("nlpcore", "nlpcore.lab"):
        raise
    lab = None
exporter = getattr(lab, "export_site_data", None)
values = {}
try:
    from nlpcore import hardware
    from nlpcore.web import gpubench, viz
except ImportError as error:  # a tree without these modules (build.py's own tests)
    if not (error.name or "").startswith("nlpcore"):
        raise
else:
    values = {"hardware." + name: value for name, value in hardware.as_dict().items()}
    try:
        from nlpcore import measured
    except ImportError as error:
        if not (error.name or "").startswith("nlpcore"):
            raise
    else:
        values.update({"measured." + name: value for name, value in measured.as_dict().items()})
    try:
        from nlpcore import claims
    except ImportError as error:
        if not (error.name or "").startswith("nlpcore"):
            raise
    else:
        values.update(claims.page_values())
    values["cell.min_sram"] = viz.MIN_SRAM
    values["gpubench.sizes"] = ",".join(str(n) for n in gpubench.SIZES)
    for cell, limits in viz.CELL_LIMITS.items():
        values.update({"cell.%s.%s" % (cell, name): value for name, value in limits.items()})
    values.update({"page." + name: value for name, value in viz.page_numbers().items()})
with open(sys.argv[2], "w", encoding="utf-8") as f:  # a file: the exporter may print
    json.dump({"data": None if exporter is None else exporter(), "values": values}, f)
"""


def run_exporter() -> dict:
    """What the site takes from nlpcore, run in a fresh interpreter: ``{"data": the result of
    nlpcore.lab.export_site_data() or None, "values": the numbers pages quote,
    {"hardware.<name>": ..., "measured.<name>": ..., "cell.<cell>.<limit>": ..., "page.<name>": ...}}``
    (nlpcore.hardware, nlpcore.measured, viz.CELL_LIMITS, viz.page_numbers)."""
    with tempfile.TemporaryDirectory() as tmp:
        target = pathlib.Path(tmp) / "export.json"
        result = subprocess.run([sys.executable, "-c", _EXPORT_SCRIPT, str(ROOT / "py"), str(target)],
                                capture_output=True, text=True, cwd=ROOT)
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no error output"])[-1]
            raise BuildError(f"nlpcore.lab.export_site_data() failed: {last}")
        exported = json.loads(target.read_text(encoding="utf-8"))
    return exported


def export_site_data(out: pathlib.Path, exported: dict = None) -> bool:
    """Write data/exercises.json from nlpcore.lab.export_site_data() if that exists."""
    exported = run_exporter() if exported is None else exported
    if exported["data"] is None:
        return False
    write_json(out / "data" / "exercises.json", exported["data"])
    return True


def leave_out_held_solutions(exercises_src: pathlib.Path, data) -> list:
    """Remove from the site's read-only sources (``src/``, and so from the manifest and the
    service worker's cache) the solution file of every step whose solution data/exercises.json
    holds back (``solution_held``: a Predict step's solution is its answer), so that no page
    request hands it over as text. This is against spoilers, not a secret: the same file ships in
    the wheel and pyc/bundle.bin, which the page's Python needs to judge the prediction. Returns
    the paths removed; a held step without its ``<exercise>/<step>_solution.*`` file is an error
    (a renamed file must not slip back in unnoticed)."""
    removed = []
    for ex in (data or {}).get("exercises", []):
        for step in ex["steps"]:
            if not step.get("solution_held"):
                continue
            found = sorted((exercises_src / ex["id"]).glob(f"{step['id']}_solution.*"))
            if not found:
                raise BuildError(f"step {ex['id']}/{step['id']} holds its solution back, but "
                                 f"{exercises_src / ex['id']} has no {step['id']}_solution.* to leave out")
            for path in found:
                path.unlink()
                removed.append(path)
    return removed


# ---------------------------------------------------------------------------------------------
# The page shell: one header for every page, and numbers that come from Python
# ---------------------------------------------------------------------------------------------

SITE_NAV = (  # (page, label) in the order the header lists them
    ("index.html", "Module"),
    ("lab.html", "Guided lab"),
    ("visualizer.html", "Visualizer"),
    ("exercise.html", "Exercises"),
    ("performance.html", "Performance"),
)
FIRST_EXERCISE = "online-softmax"   # where the header's "Exercises" link leads
HEADER_MARK = "<!-- site-header -->"  # a page's own line that build.py replaces with the header
VALUE = re.compile(r"\{\{([\w.-]+)\}\}")  # {{name}}: a value from export_site_data's values


def site_header(page: str) -> str:
    """The header and site navigation, with aria-current on ``page``'s own link, and the
    script that registers the service worker (offline use after the first visit)."""
    links = []
    for target, label in SITE_NAV:
        href = target + ("?id=" + FIRST_EXERCISE if target == "exercise.html" else "")
        current = ' aria-current="page"' if target == page else ""
        links.append(f'    <a href="{href}"{current}>{label}</a>')
    return "\n".join(['<header class="site-header">',
                      '  <a class="brand" href="index.html">FlashAttention lab</a>',
                      '  <nav aria-label="Site">', *links, "  </nav>", "</header>",
                      # js/offline.js registers sw.js: the site works offline after one visit
                      '<script type="module" src="js/offline.js"></script>',
                      # js/scroll-box.js lets Tab reach every box that scrolls inside the page
                      '<link rel="stylesheet" href="css/scroll-box.css">',
                      '<script type="module" src="js/scroll-box.js"></script>'])


STAMP_DEPTH = 3  # a value may hold {{names}} itself (a claim quotes numbers): this many rounds at most


def stamp_pages(out: pathlib.Path, values: dict) -> None:
    """Put the header into every page at its HEADER_MARK and replace every ``{{name}}`` with
    its value, again inside the values stamped (a claim's sentence quotes measured numbers), up to
    STAMP_DEPTH rounds; a page without the mark, a name without a value, or names still left
    after the last round stop the build."""
    for path in sorted(out.glob("*.html")):
        text = path.read_text(encoding="utf-8")
        if text.count(HEADER_MARK) != 1:
            raise BuildError(f"site/{path.name} must hold the line {HEADER_MARK} exactly once")
        text = text.replace(HEADER_MARK, site_header(path.name))

        def value(match):
            if match.group(1) not in values:
                raise BuildError(f"site/{path.name} uses {{{{{match.group(1)}}}}}, which has no "
                                 f"value (known: {', '.join(sorted(values))})")
            return str(values[match.group(1)])
        for _ in range(STAMP_DEPTH):
            text = VALUE.sub(value, text)
        if VALUE.search(text):
            raise BuildError(f"site/{path.name}: {VALUE.search(text).group(0)} is still unstamped after "
                             f"{STAMP_DEPTH} rounds (a value that names itself?)")
        path.write_text(text, encoding="utf-8")


def file_digest(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(out: pathlib.Path) -> dict:
    files = {}
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out).as_posix()
        if path.is_file() and rel != MANIFEST:
            files[rel] = {"sha256": file_digest(path), "size": path.stat().st_size}
    manifest = {"version": 1, "files": files}
    write_json(out / MANIFEST, manifest)
    return manifest


# Present while a build is under way, so that a failed build's folder may still be replaced.
IN_PROGRESS = ".build-in-progress"


def clean_output(out: pathlib.Path) -> None:
    """Empty `out`, refusing to delete a non-empty folder that is not one of our builds."""
    if out.exists():
        if not out.is_dir():
            raise BuildError(f"--out {out} exists and is not a directory")
        ours = (out / MANIFEST).exists() or (out / IN_PROGRESS).exists()
        if any(out.iterdir()) and not ours:
            raise BuildError(f"--out {out} is a non-empty folder that build.py did not make; "
                             "refusing to delete it (pick an empty or new folder)")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / IN_PROGRESS).touch()


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def check_json_files(out: pathlib.Path) -> list:
    """Warnings for shipped .json files that a browser's JSON.parse would reject (NaN, Infinity)."""
    warnings = []
    for path in sorted(out.rglob("*.json")):
        try:
            json.loads(path.read_text(encoding="utf-8"), parse_constant=_reject_constant)
        except ValueError as error:
            warnings.append(f"{path.relative_to(out).as_posix()}: {error} "
                            "(browsers' JSON.parse will reject this file)")
    return warnings


def build(out: pathlib.Path) -> dict:
    """Build the whole site into `out`; returns the manifest."""
    out = out.resolve()
    if out == ROOT or out in ROOT.parents:
        raise BuildError(f"--out {out} would overwrite the sources")
    clean_output(out)
    copy_tree(ROOT / "site", out)
    compose_shaders(ROOT / "wgsl", out / "wgsl")
    copy_tree(ROOT / "bench" / "results", out / "bench" / "results", "*.json")
    copy_tree(ROOT / "py" / "nlpcore", out / "src" / "nlpcore", "*.py")
    copy_tree(ROOT / "wgsl", out / "src" / "wgsl", "*.wgsl")
    vendor(out)
    pyc = pyc_bundle.build_bundle(PYODIDE_DIST, out / "pyc" / "bundle.bin", own=package_sources())
    if "skipped" in pyc:
        print("note: pyc/bundle.bin left out:", pyc["skipped"], file=sys.stderr)
    build_wheel(out / "wheels")
    exported = run_exporter()
    export_site_data(out, exported)
    leave_out_held_solutions(out / "src" / "nlpcore" / "lab" / "exercises", exported["data"])
    stamp_pages(out, exported["values"])
    (out / IN_PROGRESS).unlink()
    return write_manifest(out)


# ---------------------------------------------------------------------------------------------
# Serving
# ---------------------------------------------------------------------------------------------

class LabRequestHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with the content types the lab needs (wasm above all) and no caching."""

    extensions_map = {"": "application/octet-stream", **MIME_TYPES}

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        if getattr(self.server, "quiet", False):
            return
        super().log_message(format, *args)


def make_server(directory: pathlib.Path, port: int = 8000, *, quiet: bool = False):
    """An HTTP server for `directory` on 127.0.0.1:port (0 picks a free port); not started."""
    handler = functools.partial(LabRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    server.quiet = quiet
    return server


def serve_in_thread(directory: pathlib.Path, port: int = 0):
    """Start a quiet server in a daemon thread; returns (server, base_url). Used by tests."""
    server = make_server(directory, port, quiet=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    return server, f"http://{host}:{port}/"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", choices=("build", "serve"), default="build")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "dist",
                        help="output folder (default: dist/)")
    parser.add_argument("--port", type=int, default=8000, help="port for serve (default 8000)")
    parser.add_argument("--no-build", action="store_true",
                        help="serve the existing output folder without rebuilding")
    args = parser.parse_args(argv)
    try:
        if not (args.command == "serve" and args.no_build):
            manifest = build(args.out)
            for warning in check_json_files(args.out):
                print(f"build.py: warning: {warning}", file=sys.stderr)
            total = sum(f["size"] for f in manifest["files"].values())
            print(f"built {args.out} ({len(manifest['files'])} files, {total / 1e6:.1f} MB)")
        if args.command == "serve":
            if not (args.out / MANIFEST).is_file():
                raise BuildError(f"{args.out} has no {MANIFEST}: build it first (drop --no-build)")
            server = make_server(args.out.resolve(), args.port)
            print(f"serving {args.out} at http://127.0.0.1:{server.server_address[1]}/ "
                  "(lab: /lab.html; Ctrl-C stops)")
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                pass
            finally:
                server.server_close()
    except BuildError as error:
        print(f"build.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
