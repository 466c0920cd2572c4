"""What every benchmark script shares: the machine it ran on, medians, slopes, tables, JSON.

Benchmarks print a table for the person running them and record the same numbers as JSON under
``bench/results/`` for the lab's performance page. Each record carries the machine (CPU model,
cores, memory), the versions of what ran, the parameters, and medians of repeated runs; ratios
are always taken between numbers measured in the same run.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
if str(ROOT) not in sys.path:  # the repository's tools (labtools: build, serve, chromium)
    sys.path.insert(0, str(ROOT))

from labtools import chromium  # noqa: E402

# BLAS threads are pinned before NumPy is imported anywhere (the child processes inherit them).
# One thread: the lab's machine has 2 cores shared with other work, and one thread gives the
# steadiest numbers; both kernels get the same.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def pin_threads(threads: int) -> None:
    """Set every BLAS/OpenMP thread-count variable to ``threads`` (call before importing NumPy)."""
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_bytes(field: str = "MemTotal") -> Optional[int]:
    """A field of /proc/meminfo (MemTotal, MemAvailable) in bytes, or None off Linux."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def available_memory() -> Optional[int]:
    """Bytes the kernel says a new allocation can get without swapping (MemAvailable)."""
    return _memory_bytes("MemAvailable")


def package_version(name: str) -> Optional[str]:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # not installed (or no metadata): recorded as null
        return None


def machine(extra_versions: Sequence[str] = ()) -> dict:
    """The machine and software a result was measured on."""
    versions = {"python": platform.python_version(), "numpy": package_version("numpy")}
    for name in extra_versions:
        versions[name] = chromium.version() if name == "chromium" else package_version(name)
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "os": platform.platform(),
        "versions": versions,
        "threads": {name: os.environ.get(name) for name in THREAD_VARIABLES},
        "load_average_start": load_average(),
    }


def load_average() -> Optional[list]:
    """1, 5 and 15-minute load averages (how busy the machine was), or None off Unix."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def slope(xs: Sequence[float], ys: Sequence[float]) -> Optional[float]:
    """Least-squares slope of log(y) against log(x): the growth exponent (y ∝ x^slope)."""
    pairs = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x and y and x > 0 and y > 0]
    if len(pairs) < 2:
        return None
    mx = sum(p[0] for p in pairs) / len(pairs)
    my = sum(p[1] for p in pairs) / len(pairs)
    sxx = sum((p[0] - mx) ** 2 for p in pairs)
    if sxx == 0:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in pairs) / sxx


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def write_result(path: Path, record: dict) -> Path:
    """Write a result record as pretty JSON (keys in insertion order) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return path


def table(headers: List[str], rows: List[List[object]]) -> str:
    """A plain fixed-width text table."""
    cells = [[_cell(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.rjust(w) for h, w in zip(headers, widths))
    out = [line, "-" * len(line)]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join(out)


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return "{:.0f}".format(value)
        if abs(value) >= 1:
            return "{:.2f}".format(value)
        return "{:.3g}".format(value)
    return str(value)


def target(name: str, met: Optional[bool], measured, goal: str, limit: str = "") -> Dict[str, object]:
    """One target check as recorded: met is None when it could not be measured."""
    return {"name": name, "met": met, "measured": measured, "goal": goal, "limited_by": limit}


def print_targets(targets: Sequence[dict]) -> None:
    for t in targets:
        mark = {True: "MET ", False: "MISS", None: "N/A "}[t["met"]]
        print("  [{}] {}: measured {} (goal {}){}".format(
            mark, t["name"], t["measured"], t["goal"],
            "; limited by: " + t["limited_by"] if t["met"] is not True and t["limited_by"] else ""))


def python() -> str:
    return sys.executable


# --- the built site in headless Chromium (page_bench.py, page_readiness.py) --------------------

class Site:
    """The built lab served on a free 127.0.0.1 port: ``with Site(dist) as url: ...``.

    ``dist=None`` builds the site into a fresh temporary folder first (build.py's ``build``).
    """

    def __init__(self, dist: Optional[str] = None) -> None:
        self.dist = Path(dist).resolve() if dist else None
        self._tmp = None
        self._server = None

    def __enter__(self) -> str:
        import tempfile

        from labtools import build

        if self.dist is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="lab-bench-dist-")
            self.dist = Path(self._tmp.name) / "dist"
            print("building the site into", self.dist, flush=True)
            build.build(self.dist)
        elif not (self.dist / "manifest.json").is_file():
            raise FileNotFoundError("{} is not a built site (no manifest.json): run build.py --out {}".format(
                self.dist, self.dist))
        self._server, url = build.serve_in_thread(self.dist)
        return url

    def __exit__(self, *exc) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._tmp is not None:
            self._tmp.cleanup()


def offsite_guard(context, origin: str, record: list) -> None:
    """Abort (and record) every request that leaves the site's origin."""

    def route(r):
        url = r.request.url
        if url.startswith(("data:", "blob:")) or url.startswith(origin):
            r.continue_()
        else:
            record.append(url)
            r.abort()

    context.route("**/*", route)
