"""Headless Chromium with WebGPU, as the browser tests and the page benchmarks launch it.

Debian's ``chromium`` package with these flags gives a SwiftShader WebGPU adapter in headless
mode (verified; see DESIGN.md, "Headless Chromium with WebGPU"): the device's default
``maxComputeWorkgroupStorageSize`` is 16384 bytes, the budget the lab's tile plan is made for.
"""
from __future__ import annotations

import pathlib
import subprocess
from typing import Optional

EXECUTABLE = "/usr/bin/chromium"
WEBGPU_ARGS = ("--no-sandbox", "--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader",
               "--disable-background-networking", "--disable-component-update")


def missing() -> Optional[str]:
    """Why Chromium cannot be launched here (a sentence), or None when it can."""
    if not pathlib.Path(EXECUTABLE).exists():
        return "{} is missing: run scripts/setup.sh (installs Debian's chromium)".format(EXECUTABLE)
    return None


def launch(playwright, **options):
    """A headless Chromium browser with WebGPU on SwiftShader, through Playwright's sync API."""
    return playwright.chromium.launch(executable_path=EXECUTABLE, headless=True,
                                      args=list(WEBGPU_ARGS), **options)


def version() -> Optional[str]:
    """``chromium --version``'s text, or None where it cannot run."""
    try:
        out = subprocess.run([EXECUTABLE, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None
