"""The page-driven WebGPU benchmark: tiled vs naive WGSL in headless Chromium (Dawn on SwiftShader).

Opens ``site/bench.html`` (served from a built site) in Debian's chromium with the WebGPU flags
the tests use, builds each dispatch spec in CPython (``flash_wgsl_mirror.dispatch_spec``), and
asks the page (``js/bench.js``) to prepare it once, dispatch it once as warm-up, read its outputs
back (checked here against ``reference.forward``), then time repeated dispatches with GPU
timestamp queries (or wall time to ``onSubmittedWorkDone`` when the adapter has none).

Used by ``webgpu_attention.py`` (engine "chromium"); on its own it prints the rows:

    .venv/bin/python bench/page_bench.py --sizes 256,512 [--dist DIR]
"""

from __future__ import annotations

import argparse
import base64
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import webgpu_attention as wa  # noqa: E402

PAGE_TIMEOUT_MS = 600_000  # one dispatch of the tiled shader at N = 4096 takes minutes on SwiftShader


def _for_page(spec: dict) -> dict:
    """The spec with binding bytes as base64 (page.evaluate carries JSON)."""
    out = dict(spec)
    out["bindings"] = [dict(b, data=None if b["data"] is None else base64.b64encode(b["data"]).decode("ascii"))
                       for b in spec["bindings"]]
    return out


class PageOps:
    """prepare / dispatch / outputs / release of ``js/bench.js``, for ``webgpu_attention.measure``."""

    def __init__(self, page) -> None:
        self.page = page

    def prepare(self, spec: dict):
        return self.page.evaluate("(spec) => window.labBench.prepare(spec)", _for_page(spec))

    def dispatch(self, spec: dict, handle) -> tuple:
        t = self.page.evaluate("(id) => window.labBench.dispatch(id)", handle)
        return t["gpuMs"], t["wallMs"]

    def outputs(self, spec: dict, handle) -> dict:
        raw = self.page.evaluate("(id) => window.labBench.outputs(id)", handle)
        return {name: base64.b64decode(data) for name, data in raw.items()}

    def release(self, handle) -> None:
        self.page.evaluate("(id) => window.labBench.release(id)", handle)


def run_chromium(sizes, dist=None, repeats_for=wa.repeats_for, plan=None, log=print) -> dict:
    """Engine record {engine, adapter, timing, rows} (or {engine, error} when WebGPU is missing)."""
    from playwright.sync_api import sync_playwright

    engine = {"engine": "chromium", "implementation": "Dawn (Tint) on SwiftShader, headless Debian chromium",
              "versions": {"chromium": common.chromium_version()}, "rows": []}
    with common.Site(dist) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=common.CHROMIUM, headless=True, args=common.WEBGPU_ARGS)
        try:
            context = browser.new_context()
            offsite: list = []
            common.offsite_guard(context, url.rstrip("/"), offsite)
            page = context.new_page()
            page.set_default_timeout(PAGE_TIMEOUT_MS)
            page.goto(url + "bench.html")
            try:
                info = page.evaluate("window.labBench.ready")
            except Exception as err:  # the page states why WebGPU is unavailable
                engine["error"] = "WebGPU unavailable in chromium: {}".format(err)
                return engine
            engine["adapter"] = info["adapter"]
            engine["timing"] = "timestamp-query" if info["timestamps"] else "wall"
            engine["rows"] = wa.measure("chromium", sizes, plan, PageOps(page), info["timestamps"], repeats_for, log)
            if offsite:
                engine["offsite_requests"] = offsite
        finally:
            browser.close()
    return engine


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="256,512")
    parser.add_argument("--dist", default=None, help="a built site (default: build one into a temp folder)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    engine = run_chromium([int(s) for s in args.sizes.split(",") if s], dist=args.dist)
    if engine.get("error"):
        print(engine["error"])
        return 1
    print(common.table(["N", "kernel", "ms", "wall ms", "valid"],
                       [[r["n"], r["kernel"], r["ms"], r["wall_ms"], r["valid"]] for r in engine["rows"]]))
    print("adapter {}, timing {}, {:.0f} s".format(engine["adapter"], engine["timing"], time.perf_counter() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
