"""labtools.pyc_bundle: sources read out of Pyodide's LZ4 packages, compiled as unchecked
hash-based pycs for Python 3.8 (the browser test tests/browser/test_python_boot.py checks that
the page's Python takes them)."""
from __future__ import annotations

import json
import struct

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
def test_the_bundle_holds_unchecked_hash_pycs_for_the_boot_imports(tmp_path):
    dest = tmp_path / "bundle.bin"
    made = pyc_bundle.build_bundle(build.PYODIDE_DIST, dest)
    blob = dest.read_bytes()
    n = struct.unpack("<I", blob[:4])[0]
    header = json.loads(blob[4:4 + n])
    paths = [path for path, _ in header["files"]]
    assert made["files"] == len(paths) > 100 and header["python"] == "3.8"
    assert "/lib/python3.8/site-packages/numpy/core/__pycache__/numeric.cpython-38.pyc" in paths
    assert "/lib/python3.8/json/__pycache__/decoder.cpython-38.pyc" in paths
    assert not any("nlpcore" in p for p in paths)  # the package itself comes from the wheel
    offset = 4 + n
    for _path, size in header["files"]:
        pyc = blob[offset:offset + size]
        assert pyc[:4] == MAGIC_38 and struct.unpack("<I", pyc[4:8])[0] == 0b01  # hash-based, unchecked
        offset += size
    assert offset == len(blob)
