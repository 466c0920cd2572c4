"""labtools.pyc_bundle: sources read out of Pyodide's LZ4 packages, compiled as unchecked
hash-based pycs for Python 3.8 (the browser test tests/browser/test_python_boot.py checks that
the page's Python takes them)."""
from __future__ import annotations

import json
import struct
import subprocess

import pytest

from labtools import build, pyc_bundle

MAGIC_38 = (3413).to_bytes(2, "little") + b"\r\n"  # CPython 3.8's pyc magic number (importlib)


def test_lz4_blocks_decode_literals_and_overlapping_matches():
    # token 0x33: 3 literals "abc", then a match of 3 + 4 = 7 at offset 3 (overlapping its output),
    # then a last token of 2 literals.
    block = bytes([0x33]) + b"abc" + bytes([3, 0]) + bytes([0x20]) + b"de"
    assert pyc_bundle.lz4_block(block, 2048) == b"abcabcabcade"
    with pytest.raises(ValueError, match="offset"):
        pyc_bundle.lz4_block(bytes([0x10]) + b"a" + bytes([5, 0]), 2048)


def test_a_package_reads_the_files_pyodide_ships():
    numpy = pyc_bundle.Package(build.PYODIDE_DIST, "numpy")
    assert b"short_version = '1.17.5'" in numpy.read("/lib/python3.8/site-packages/numpy/version.py")
    stdlib = pyc_bundle.Package(build.PYODIDE_DIST, "pyodide.asm")
    source = stdlib.read("/lib/python3.8/json/__init__.py")
    assert source.startswith(b'r"""JSON (JavaScript Object Notation)') and source.rstrip().endswith(b"**kw).decode(s)")


@pytest.mark.skipif(not pyc_bundle.PYTHON38.exists(), reason="no CPython 3.8 (.venv38) to compile with")
def test_the_bundle_holds_unchecked_hash_pycs_for_the_boot_imports_and_nlpcore(tmp_path):
    dest = tmp_path / "bundle.bin"
    own = build.package_sources()
    made = pyc_bundle.build_bundle(build.PYODIDE_DIST, dest, own=own)
    blob = dest.read_bytes()
    n = struct.unpack("<I", blob[:4])[0]
    header = json.loads(blob[4:4 + n])
    paths = [path for path, _ in header["files"]]
    assert made["files"] == len(paths) > 100 and header["python"] == "3.8"
    assert "/lib/python3.8/site-packages/numpy/core/__pycache__/numeric.cpython-38.pyc" in paths
    assert "/lib/python3.8/json/__pycache__/decoder.cpython-38.pyc" in paths
    # nlpcore's modules, where the workers unpack the wheel, each compiled from the wheel's file:
    # the pyc's source hash (PEP 552) is that of the file's bytes, by CPython 3.8's own function.
    wheel_py = {pyc_bundle.PYODIDE_SITE + arc: file for arc, file in own if arc.endswith(".py")}
    expected = {"%s/__pycache__/%s.cpython-38.pyc" % tuple(p[:-3].rsplit("/", 1)): p for p in wheel_py}
    assert set(expected) <= set(paths)
    assert "/lib/python3.8/site-packages/nlpcore/lab/__pycache__/session.cpython-38.pyc" in expected
    hashes = json.loads(subprocess.run(
        [str(pyc_bundle.PYTHON38), "-c", "import importlib.util, json, sys\n"
         "print(json.dumps({p: importlib.util.source_hash(open(f, 'rb').read()).hex() "
         "for p, f in json.load(sys.stdin).items()}))"],
        input=json.dumps({t: str(wheel_py[p]) for t, p in expected.items()}), capture_output=True,
        text=True, check=True).stdout)
    offset = 4 + n
    for path, size in header["files"]:
        pyc = blob[offset:offset + size]
        assert pyc[:4] == MAGIC_38 and struct.unpack("<I", pyc[4:8])[0] == 0b01  # hash-based, unchecked
        if path in hashes:
            assert pyc[8:16].hex() == hashes[path], path
        offset += size
    assert offset == len(blob)
