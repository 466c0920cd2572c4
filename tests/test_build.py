"""build.py (labtools.build): a deterministic dist/ with a correct manifest, only the Pyodide files the lab needs,
a valid nlpcore wheel, and a server that sends the right content types."""
from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import pathlib
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


from labtools import build  # noqa: E402  (the repository root is on pytest's pythonpath)


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory):
    """Two independent builds of the same tree: one through the CLI, one through build()."""
    first = tmp_path_factory.mktemp("build") / "a"
    second = tmp_path_factory.mktemp("build") / "b"
    run = subprocess.run([sys.executable, str(ROOT / "build.py"), "--out", str(first)],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    build.build(second)
    return first, second


def _files(root: pathlib.Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_two_builds_are_byte_identical(two_builds):
    first, second = two_builds
    a, b = _files(first), _files(second)
    assert sorted(a) == sorted(b)
    differing = [name for name in a if a[name] != b[name]]
    assert not differing, f"files differ between two builds: {differing}"


def test_manifest_lists_every_file_with_its_hash_and_size(two_builds):
    out = two_builds[0]
    manifest = json.loads((out / "manifest.json").read_text())
    on_disk = {name: data for name, data in _files(out).items() if name != "manifest.json"}
    assert sorted(manifest["files"]) == sorted(on_disk)
    for name, data in on_disk.items():
        entry = manifest["files"][name]
        assert entry["size"] == len(data), name
        assert entry["sha256"] == hashlib.sha256(data).hexdigest(), name


def test_layout(two_builds):
    out = two_builds[0]
    for name in ["lab.html", "css/lab.css", "js/runtime.js", "js/pyworker.js", "js/gpu.js",
                 "js/lab.js", "wgsl/flash_fwd.wgsl", "src/wgsl/flash_fwd.wgsl",
                 "src/nlpcore/web/lab.py", "src/nlpcore/kernels/flash_np.py",
                 "vendor/katex/katex.min.js", "vendor/codemirror/lib/codemirror.js",
                 "vendor/codemirror/mode/python/python.js", "vendor/chartjs/chart.umd.js",
                 "wheels/nlpcore-0.1.0-py3-none-any.whl"]:
        assert (out / name).is_file(), name
    # KaTeX's stylesheet refers to fonts/...; the woff2 files it lists first must be there.
    css = (out / "vendor/katex/katex.min.css").read_text()
    for font in {part.split(")")[0] for part in css.split("url(")[1:] if ".woff2" in part}:
        assert (out / "vendor/katex" / font).is_file(), font
    assert not any(p.name.startswith(".") for p in out.rglob("*")), "hidden files were shipped"


def test_pyodide_is_only_the_runtime_and_numpy(two_builds):
    out = two_builds[0]
    vendored = {p.name for p in (out / "vendor/pyodide").iterdir()}
    index = json.loads((out / "vendor/pyodide/packages.json").read_text())["dependencies"]
    closure = build.pyodide_closure(index, build.PYODIDE_PACKAGES)
    assert closure == ["numpy"]  # micropip is not vendored: js/pyworker.js unpacks the wheel itself
    expected = {"pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "pyodide.asm.data",
                "packages.json", "LICENSE"}
    expected |= {f"{name}.{ext}" for name in closure for ext in ("js", "data")}
    assert vendored == expected
    # The npm package holds ~270 MB; what ships should be a small fraction of it.
    size = sum((out / "vendor/pyodide" / name).stat().st_size for name in vendored)
    assert size < 40e6, size


def test_held_solutions_are_left_out_of_src_and_the_manifest(two_builds):
    """A Predict step's solution is its answer: data/exercises.json holds it back, and src/ (so
    the manifest, and the service worker's cache, which follows the manifest) leaves its file
    out. Against spoilers, not a secret: the judge's copy still ships in the wheel."""
    out = two_builds[0]
    data = json.loads((out / "data" / "exercises.json").read_text())
    held = [(e["id"], s["id"]) for e in data["exercises"] for s in e["steps"] if s["solution_held"]]
    assert {"online-softmax", "ring", "break-it"} <= {ex for ex, _ in held}
    files = json.loads((out / "manifest.json").read_text())["files"]
    for ex, step in held:
        folder = f"src/nlpcore/lab/exercises/{ex}/"
        assert not [n for n in files if n.startswith(folder + f"{step}_solution.")], (ex, step)
        assert not list((out / folder).glob(f"{step}_solution.*")), (ex, step)
        assert folder + "exercise.py" in files  # the rest of the folder is there
    assert "src/nlpcore/lab/exercises/online-softmax/compose_solution.py" in files  # not held: kept
    with zipfile.ZipFile(out / "wheels" / "nlpcore-0.1.0-py3-none-any.whl") as zf:
        assert "nlpcore/lab/exercises/ring/predict_solution.py" in zf.namelist()


def test_a_held_step_without_its_solution_file_stops_the_build(tmp_path):
    (tmp_path / "ring").mkdir()
    (tmp_path / "ring" / "predict_solution.py").write_text("answer = 1\n")
    (tmp_path / "ring" / "compose_solution.py").write_text("kept = 1\n")
    data = {"exercises": [{"id": "ring", "steps": [{"id": "predict", "solution_held": True},
                                                   {"id": "compose", "solution_held": False}]}]}
    removed = build.leave_out_held_solutions(tmp_path, data)
    assert removed == [tmp_path / "ring" / "predict_solution.py"]
    assert (tmp_path / "ring" / "compose_solution.py").is_file()
    with pytest.raises(build.BuildError, match="predict_solution"):   # renamed or gone: said
        build.leave_out_held_solutions(tmp_path, data)


def test_pyodide_closure_follows_dependencies_and_rejects_unknown_names():
    deps = {"a": ["b"], "b": ["c", "a"], "c": [], "unused": []}
    assert build.pyodide_closure(deps, ("a",)) == ["a", "b", "c"]
    with pytest.raises(build.BuildError, match="'nope'"):
        build.pyodide_closure(deps, ("nope",))


def test_wheel_is_valid_and_reproducible(two_builds):
    whl = two_builds[0] / "wheels" / "nlpcore-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl) as zf:
        assert zf.testzip() is None
        infos = zf.infolist()
        assert all(info.date_time == (1980, 1, 1, 0, 0, 0) for info in infos)
        names = [info.filename for info in infos]
        assert names[-1] == "nlpcore-0.1.0.dist-info/RECORD"
        assert "nlpcore/__init__.py" in names and "nlpcore/web/__init__.py" in names
        assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
        record = list(csv.reader(io.StringIO(zf.read("nlpcore-0.1.0.dist-info/RECORD").decode())))
        assert sorted(row[0] for row in record) == sorted(names)
        for path, digest, size in record:
            if path.endswith("RECORD"):
                assert (digest, size) == ("", "")
                continue
            data = zf.read(path)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert digest == "sha256=" + expected.decode() and int(size) == len(data), path
        wheel = zf.read("nlpcore-0.1.0.dist-info/WHEEL").decode()
        assert "Root-Is-Purelib: true" in wheel and "Tag: py3-none-any" in wheel
        metadata = zf.read("nlpcore-0.1.0.dist-info/METADATA").decode()
        assert "Name: nlpcore" in metadata and "Version: 0.1.0" in metadata
        assert "Requires-Dist: numpy" in metadata
        # Every .py file of the package is in the wheel.
        sources = {p.relative_to(ROOT / "py").as_posix() for p in (ROOT / "py/nlpcore").rglob("*.py")
                   if "__pycache__" not in p.parts}
        assert sources <= set(names)


def test_wheel_imports_from_the_zip_alone(two_builds):
    """Nothing but the wheel on sys.path (-S: no site-packages, so no editable install)."""
    whl = two_builds[0] / "wheels" / "nlpcore-0.1.0-py3-none-any.whl"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import nlpcore.web; "
            "assert nlpcore.web.__file__.startswith(sys.argv[1]), nlpcore.web.__file__; "
            "print(nlpcore.web.call.__name__)")
    run = subprocess.run([sys.executable, "-S", "-c", code, str(whl)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "call"


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.headers.get_content_type(), response.headers.get("Content-Type"), response.read()


def test_server_sends_the_right_content_types(two_builds):
    out = two_builds[0]
    server, url = build.serve_in_thread(out)
    try:
        expected = {
            "vendor/pyodide/pyodide.asm.wasm": "application/wasm",
            "vendor/pyodide/pyodide.js": "text/javascript",
            "vendor/pyodide/numpy.data": "application/octet-stream",
            "vendor/pyodide/packages.json": "application/json",
            "js/runtime.js": "text/javascript",
            "lab.html": "text/html",
            "css/lab.css": "text/css",
            "wgsl/flash_fwd.wgsl": "text/plain",
            "wheels/nlpcore-0.1.0-py3-none-any.whl": "application/octet-stream",
            "manifest.json": "application/json",
        }
        fonts = sorted((out / "vendor/katex/fonts").iterdir())
        expected[f"vendor/katex/fonts/{fonts[0].name}"] = "font/woff2"
        for path, content_type in expected.items():
            got, _, body = _get(url + path)
            assert got == content_type, (path, got)
            assert body == (out / path).read_bytes(), path
        with pytest.raises(urllib.error.HTTPError) as missing:
            _get(url + "no-such-file.js")
        assert missing.value.code == 404
    finally:
        server.shutdown()
        server.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_serve_no_build_serves_an_existing_build(two_builds):
    port = _free_port()
    process = subprocess.Popen([sys.executable, str(ROOT / "build.py"), "serve", "--no-build",
                                "--out", str(two_builds[0]), "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 20
        while True:
            try:
                content_type, _, body = _get(f"http://127.0.0.1:{port}/lab.html")
                break
            except OSError:
                assert process.poll() is None and time.time() < deadline, "server did not start"
                time.sleep(0.1)
        assert content_type == "text/html" and b'data-testid="compare"' in body
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_missing_node_modules_says_to_run_setup(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "PYODIDE_DIST", tmp_path / "node_modules" / "@pyodide" / "pyodide" / "dist")
    monkeypatch.setattr(build, "ROOT", tmp_path)
    with pytest.raises(build.BuildError, match="scripts/setup.sh"):
        build.vendor(tmp_path / "out")


def test_refuses_to_delete_a_folder_it_did_not_make(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(build.BuildError, match="refusing"):
        build.build(precious)
    assert (precious / "notes.txt").read_text() == "keep me"


def _fake_tree(tmp_path, lab_source):
    package = tmp_path / "py" / "nlpcore"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    if lab_source is not None:
        (package / "lab").mkdir()
        (package / "lab" / "__init__.py").write_text(lab_source)
    return tmp_path


def test_site_data_is_exported_when_nlpcore_lab_provides_it(tmp_path, monkeypatch):
    root = _fake_tree(tmp_path, "def export_site_data():\n    print(\"noise\")\n    return {'b': [1, 2], 'a': 'x'}\n")
    monkeypatch.setattr(build, "ROOT", root)
    assert build.export_site_data(tmp_path / "out") is True
    text = (tmp_path / "out" / "data" / "exercises.json").read_text()
    assert json.loads(text) == {"a": "x", "b": [1, 2]} and text.index('"a"') < text.index('"b"')


@pytest.mark.parametrize("lab_source", [None, "X = 1\n"])
def test_site_data_is_skipped_when_there_is_no_exporter(tmp_path, monkeypatch, lab_source):
    monkeypatch.setattr(build, "ROOT", _fake_tree(tmp_path, lab_source))
    assert build.export_site_data(tmp_path / "out") is False
    assert not (tmp_path / "out").exists()


def test_a_failing_exporter_fails_the_build_with_its_error(tmp_path, monkeypatch):
    source = "def export_site_data():\n    raise RuntimeError('exercise 3 has no checks')\n"
    monkeypatch.setattr(build, "ROOT", _fake_tree(tmp_path, source))
    with pytest.raises(build.BuildError, match="RuntimeError: exercise 3 has no checks"):
        build.export_site_data(tmp_path / "out")


def test_json_that_browsers_reject_is_flagged(tmp_path):
    (tmp_path / "ok.json").write_text('{"x": 1.5, "y": null}')
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "bad.json").write_text('{"x": Infinity}')
    warnings = build.check_json_files(tmp_path)
    assert len(warnings) == 1 and warnings[0].startswith("bench/bad.json: Infinity")


# --- the page shell: one header for every page, numbers from Python ---------------------------

def test_every_page_gets_the_one_header_with_its_own_link_marked(two_builds):
    pages = sorted(p.name for p in (ROOT / "site").glob("*.html"))
    assert pages and all((ROOT / "site" / p).read_text().count(build.HEADER_MARK) == 1 for p in pages)
    labels = [label for _, label in build.SITE_NAV]
    for name in pages:
        html = (two_builds[1] / name).read_text()
        header = html[html.index('<header class="site-header">'):html.index("</header>")]
        assert [label for label in labels if f">{label}</a>" in header] == labels, name
        current = header.count('aria-current="page"')
        assert current == (1 if name in dict(build.SITE_NAV) else 0), name
        assert "{{" not in html, name


def test_page_limits_are_the_python_limits(two_builds):
    from nlpcore import hardware
    from nlpcore.web import viz

    html = (two_builds[1] / "index.html").read_text()
    for cell, limits in viz.CELL_LIMITS.items():
        start = html.index(f'data-cell="{cell}"')
        block = html[start:html.index("</form>", start)]
        for name, value in limits.items():
            if name == "tiles":
                continue
            assert f'max="{value}"' in block, (cell, name, value)
    assert f"{hardware.A100_SRAM_BYTES // 1024}&nbsp;KB of on-chip" in html


def test_an_unknown_page_value_stops_the_build(tmp_path):
    (tmp_path / "a.html").write_text(build.HEADER_MARK + "\n<p>{{no.such}}</p>\n")
    with pytest.raises(build.BuildError, match="no.such"):
        build.stamp_pages(tmp_path, {"hardware.x": 1})
    (tmp_path / "a.html").write_text("<p>no header</p>\n")
    with pytest.raises(build.BuildError, match="site-header"):
        build.stamp_pages(tmp_path, {})
