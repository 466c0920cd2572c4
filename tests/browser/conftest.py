"""Shared fixtures for the Playwright browser tests (headless Debian chromium with WebGPU).

    site_url      the built site (env LAB_DIST, default ./dist, built on demand if missing),
                  served by labtools.build's server on a free 127.0.0.1 port; ends with "/"
    page          a fresh Playwright page (its own context, so fresh localStorage) with
                  WebGPU on (SwiftShader); fails the test at teardown on any console error or
                  uncaught page error, and on any request that leaves the site's origin (such
                  requests are aborted and recorded in ``page.lab_log.offsite``)
    open_page     factory: ``open_page(webgpu=False)`` gives the same kind of page without
                  ``navigator.gpu``; pages opened this way are checked and closed at teardown
                  of the requesting test; ``open_page.checked(page)`` runs the checks early

Helpers:
    wait_for_runtime(page, timeout_s)   waits until <html data-runtime> (set by js/runtime.js)
                                        is "ready" or "error" and returns it
    wait_for_status(page, testid, statuses, timeout_s)
                                        waits until [data-testid=testid] has a data-status in
                                        `statuses` and returns the element's data-status
    allow_console_error(page, substring) marks console errors containing substring as expected
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import urllib.parse

import pytest

from labtools import build, chromium  # the repository root is on pytest's pythonpath

ROOT = pathlib.Path(__file__).resolve().parents[2]
NO_WEBGPU_SCRIPT = "delete Object.getPrototypeOf(navigator).gpu; delete navigator.gpu;"
# Pyodide boots in 5-20 s on a 2-core machine; generous so that CI does not flake.
BOOT_TIMEOUT_S = 120


@pytest.fixture(scope="session")
def lab_dist() -> pathlib.Path:
    dist = pathlib.Path(os.environ.get("LAB_DIST", ROOT / "dist")).resolve()
    if not (dist / "manifest.json").is_file():
        build.build(dist)
    return dist


@pytest.fixture(scope="session")
def site_url(lab_dist):
    server, url = build.serve_in_thread(lab_dist)
    yield url
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser():
    if chromium.missing():
        pytest.fail(chromium.missing())
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = chromium.launch(playwright)
        yield browser
        browser.close()


@dataclasses.dataclass
class BrowserLog:
    origin: str
    console_errors: list = dataclasses.field(default_factory=list)
    offsite: list = dataclasses.field(default_factory=list)
    allowed: list = dataclasses.field(default_factory=list)

    def unexpected_errors(self) -> list:
        return [e for e in self.console_errors if not any(a in e for a in self.allowed)]


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _new_page(browser, site_url: str, webgpu: bool):
    context = browser.new_context()
    log = BrowserLog(origin=_origin(site_url))

    def route(route):
        url = route.request.url
        if url.startswith(("data:", "blob:")) or _origin(url) == log.origin:
            route.continue_()
        else:
            log.offsite.append(url)
            route.abort()

    context.route("**/*", route)
    if not webgpu:
        context.add_init_script(NO_WEBGPU_SCRIPT)
    page = context.new_page()
    page.on("console", lambda msg: msg.type == "error" and log.console_errors.append(
        f"console: {msg.text} @ {msg.location.get('url', '')}"))
    page.on("response", lambda response: response.status >= 400 and log.console_errors.append(
        f"HTTP {response.status}: {response.url}"))
    page.on("pageerror", lambda error: log.console_errors.append(f"pageerror: {error}"))
    # Chromium reports a dedicated worker's console messages on the page as well.
    page.lab_log = log
    return page


def _check_and_close(page) -> None:
    log = page.lab_log
    try:
        assert not log.offsite, f"requests left {log.origin}: {log.offsite}"
        unexpected = log.unexpected_errors()
        assert not unexpected, "console errors:\n" + "\n".join(unexpected)
    finally:
        page.context.close()


@pytest.fixture
def open_page(browser, site_url):
    opened = []

    def factory(webgpu: bool = True):
        page = _new_page(browser, site_url, webgpu)
        opened.append(page)
        return page

    def checked(page):
        opened.remove(page)
        _check_and_close(page)

    factory.checked = checked
    yield factory
    errors = []
    for page in opened:
        try:
            _check_and_close(page)
        except AssertionError as error:
            errors.append(str(error))
    assert not errors, "\n".join(errors)


@pytest.fixture
def page(open_page):
    return open_page(webgpu=True)


def allow_console_error(page, substring: str) -> None:
    page.lab_log.allowed.append(substring)


def wait_for_runtime(page, timeout_s: float = BOOT_TIMEOUT_S) -> str:
    page.wait_for_function(
        "['ready', 'error'].includes(document.documentElement.dataset.runtime)",
        timeout=timeout_s * 1000)
    return page.evaluate("document.documentElement.dataset.runtime")


def wait_for_status(page, testid: str, statuses, timeout_s: float = BOOT_TIMEOUT_S) -> str:
    page.wait_for_function(
        "([id, wanted]) => { const el = document.querySelector(`[data-testid=\"${id}\"]`);"
        " return !!el && wanted.includes(el.dataset.status); }",
        arg=[testid, list(statuses)], timeout=timeout_s * 1000)
    return page.get_attribute(f'[data-testid="{testid}"]', "data-status")


@pytest.fixture(scope="session")
def browser_helpers():
    """The helpers above, for test modules (importing conftest by name is fragile)."""
    import types

    return types.SimpleNamespace(wait_for_runtime=wait_for_runtime,
                                 wait_for_status=wait_for_status,
                                 allow_console_error=allow_console_error)
