"""The page-driven WebGPU benchmark: tiled vs naive WGSL in headless Chromium (Dawn on SwiftShader).

Opens ``site/bench.html`` (served from a built site) in Debian's chromium with the WebGPU flags
the tests use (:mod:`labtools.chromium`) and hands ``webgpu_attention.measure`` the page's
operations (:class:`PageOps`): prepare a dispatch spec once, dispatch it (GPU timestamp queries,
or wall time to ``onSubmittedWorkDone`` when the adapter has none), read its outputs back.

Imported by ``webgpu_attention.py`` (engine "chromium"), which builds the specs and checks and
times them; this module imports nothing of it (no cycle). Run it through that script:

    .venv/bin/python bench/webgpu_attention.py --engines chromium --sizes 256,512 [--dist DIR]
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

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


def run_chromium(measure: Callable, dist=None) -> dict:
    """Engine record {engine, adapter, timing, rows} (or {engine, error} when WebGPU is missing);
    ``measure(ops, timestamps) -> rows`` does the timing with the page's :class:`PageOps`."""
    from playwright.sync_api import sync_playwright

    engine = {"engine": "chromium", "implementation": "Dawn (Tint) on SwiftShader, headless Debian chromium",
              "versions": {"chromium": common.chromium.version()}, "rows": []}
    with common.Site(dist) as url, sync_playwright() as pw:
        browser = common.chromium.launch(pw)
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
            engine["rows"] = measure(PageOps(page), info["timestamps"])
            if offsite:
                engine["offsite_requests"] = offsite
        finally:
            browser.close()
    return engine

