"""Rerun every CPU-side benchmark and rewrite its JSON under bench/results/.

    .venv/bin/python bench/run_all.py                  # all four, ~12 min on a quiet 2-core machine
    .venv/bin/python bench/run_all.py --only numpy,io  # a subset

Runs, one after the other (never side by side, so that they do not slow each other down):
numpy (numpy_attention.py), io (io_claim.py), webgpu (webgpu_attention.py: wgpu-py and
Chromium) and readiness (page_readiness.py). The site is built once into a temporary folder for
the two browser benchmarks. triton_h200.json is not touched: it needs the GPU
(bench/triton_h200.py on an H200).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from labtools import build  # noqa: E402  (common put the repository on sys.path)

HERE = Path(__file__).resolve().parent
SCRIPTS = {
    "numpy": ["numpy_attention.py"],
    "io": ["io_claim.py"],
    "webgpu": ["webgpu_attention.py"],
    "readiness": ["page_readiness.py"],
}
NEEDS_SITE = ("webgpu", "readiness")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(SCRIPTS), help="comma-separated: " + ", ".join(SCRIPTS))
    args = parser.parse_args(argv)
    chosen = [name for name in args.only.split(",") if name]
    for name in chosen:
        if name not in SCRIPTS:
            parser.error("--only: unknown benchmark {!r} (choose from {})".format(name, ", ".join(SCRIPTS)))
    env = os.environ.copy()
    env.setdefault("XDG_RUNTIME_DIR", "/tmp/xdg-runtime-{}".format(os.getuid()))
    os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)
    failed = []
    with tempfile.TemporaryDirectory(prefix="lab-bench-") as tmp:
        dist = None
        if any(name in NEEDS_SITE for name in chosen):
            dist = Path(tmp) / "dist"
            print("== building the site into", dist, flush=True)
            build.build(dist)
        for name in chosen:
            cmd = [sys.executable, str(HERE / SCRIPTS[name][0])]
            if name in NEEDS_SITE:
                cmd += ["--dist", str(dist)]
            print("==", " ".join(cmd[1:]), flush=True)
            started = time.perf_counter()
            code = subprocess.call(cmd, env=env)
            print("== {} finished in {:.0f} s (exit {})".format(name, time.perf_counter() - started, code), flush=True)
            if code != 0:
                failed.append(name)
    if failed:
        print("failed:", ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
