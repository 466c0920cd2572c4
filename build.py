"""Placeholder: the static-lab work replaces this with the real builder."""
import pathlib, shutil, sys
root = pathlib.Path(__file__).resolve().parent
dist = root / "dist"
shutil.rmtree(dist, ignore_errors=True)
shutil.copytree(root / "site", dist)
if sys.argv[1:2] == ["serve"]:
    raise SystemExit("build.py serve: not implemented yet")
