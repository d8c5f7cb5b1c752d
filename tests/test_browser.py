"""SharedBrowser and page capture against real pages in the Debian Chromium."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import signal
import stat
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import psutil
import pytest
from PIL import Image
from websockets.asyncio.client import connect

from tests.helpers import eventually
from webgen_agent.apps.demo import scripted_context
from webgen_agent.nodes.resources import Resources
from webgen_agent.tools.browser import SharedBrowser
from webgen_agent.tools.capture import PageCapture
from webgen_agent.tools.cdp_scope import connect_browser, scoped_cdp_endpoint
from webgen_agent.tools.devtools_pipe import split_unix_url
from webgen_agent.tools.process import ProcessRegistry
from webgen_agent.tools.site import SiteRunner

pytestmark = pytest.mark.e2e

PAGES = {
    "/good.html": "<title>Good</title><h1>Welcome to the shop</h1><p>Fresh bread every day.</p>",
    "/error.html": "<title>Err</title><div id=root></div><script>function boot() { throw new TypeError('kaboom: x is undefined') }; boot()</script>",
    "/blank.html": "<title>Blank</title><body><div id=root></div><script>/* renders nothing */</script></body>",
    "/hang.html": "<title>Hang</title><p>Before the script</p><script src=/hang.js></script>",
    "/missing-script.html": "<title>Missing</title><h1>Text</h1><script src=/nope.js></script>",
    # Like an app whose first render starts a fetch: data asked for just after load, answered slowly.
    "/late-data.html": (
        "<title>Late</title><ul id=list><li>Loading...</li></ul><script>"
        "addEventListener('load', () => setTimeout(() => fetch('/slow-data.json').then(r => r.json())"
        ".then(items => { document.getElementById('list').innerHTML = items.map(i => '<li>' + i + '</li>').join(''); }),"
        " 30));</script>"
    ),
    # Leaves for another host just after load (the navigation is refused).
    "/leaves.html": "<title>Leaves</title><h1>Here</h1><script>setTimeout(() => { location.href = 'http://example.com/' }, 30)</script>",
}


SLOW_ASKED = threading.Event()


class Pages(BaseHTTPRequestHandler):
    release: threading.Event
    slow_asked: threading.Event  # set when /slow.html is asked; its first answer waits for the test

    def do_GET(self) -> None:
        if self.path == "/slow.html":
            if not self.slow_asked.is_set():
                self.slow_asked.set()
                time.sleep(3)  # the test kills Chromium meanwhile
            self.path = "/good.html"
        if self.path == "/hang.js":
            self.release.wait(30)  # hold the request open: the page's load event never fires
            return
        if self.path == "/slow-data.json":
            time.sleep(0.6)  # longer than the network-quiet window: only an in-flight request keeps it open
            data = b'["Sourdough", "Rye"]'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        body = PAGES.get(self.path)
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        data = (body or "not found").encode()
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def pages() -> Iterator[str]:
    release = threading.Event()
    handler = type("Handler", (Pages,), {"release": release, "slow_asked": SLOW_ASKED})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    release.set()
    server.shutdown()
    server.server_close()


async def test_capture_waits_for_data_the_page_fetches_after_load(shared_browser: SharedBrowser, pages: str) -> None:
    capture = await shared_browser.capture(pages + "/late-data.html")
    assert "Sourdough" in capture.visible_text and "Loading" not in capture.visible_text
    assert capture.render_error is None


async def test_a_page_that_tries_to_leave_the_site_is_told_so_however_fast_the_capture(
    shared_browser: SharedBrowser, pages: str
) -> None:
    # Whether Chromium has shown its error page for the refused navigation when the page is read
    # depends on the machine's speed; the refused navigation alone says the page left.
    capture = await shared_browser.capture(pages + "/leaves.html")
    # (Chromium may upgrade the address to https.)
    assert capture.left_site is not None and capture.left_site.endswith("://example.com/")
    assert (
        capture.render_error is not None
        and f"navigated away from the site to {capture.left_site}" in capture.render_error
    )


async def test_good_page(shared_browser: SharedBrowser, pages: str) -> None:
    capture = await shared_browser.capture(pages + "/good.html", viewport=(1024, 700))
    assert capture.status == 200 and capture.title == "Good"
    assert "Welcome to the shop" in capture.visible_text and "Fresh bread" in capture.visible_text
    assert not capture.blank and capture.overlay is None and capture.load_error is None
    assert capture.render_error is None
    image = Image.open(io.BytesIO(capture.png))
    assert image.format == "PNG" and image.size == (1024, 700)
    assert capture.seconds < 10


async def test_a_run_opens_its_first_capture_page_while_its_first_model_call_runs(
    shared_browser: SharedBrowser, pages: str, tmp_path: Path
) -> None:
    """The generator warms the browser as the first coder call starts: the page of the run's first
    capture (a browser context and its renderer) is opened then, not when the capture begins."""
    await shared_browser._drop_spare()  # as for a run's first capture: nothing opened ahead yet
    before = len(shared_browser.browser.contexts)
    resources = Resources(tmp_path / "webgen.db", browser=shared_browser)
    try:
        resources.warm_browser(scripted_context("http://127.0.0.1:9", viewport_width=1024, viewport_height=700))
        await eventually(
            lambda: len(shared_browser.browser.contexts) == before + 1,
            timeout_s=10,
            what="the first capture's page opened ahead",
            off_loop=False,
        )
        capture = await shared_browser.capture(pages + "/good.html", viewport=(1024, 700))
        assert capture.title == "Good" and Image.open(io.BytesIO(capture.png)).size == (1024, 700)
    finally:
        await resources.close()


def _renderers(browser: SharedBrowser) -> int:
    assert browser.pid is not None
    count = 0
    for process in psutil.Process(browser.pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            count += "--type=renderer" in process.cmdline()
    return count


async def test_the_browser_keeps_no_renderer_beyond_its_open_pages(
    chromium_path: str, pages: str, tmp_path: Path
) -> None:
    """Every capture and GUI agent opens a browser context of its own, so a renderer Chromium starts
    ahead for the next navigation (bound to one context) is never used: each one cost a run a
    renderer's start and ~40 MB. After captures, the renderers are the open pages' own."""
    browser = SharedBrowser(chromium_path, registry=ProcessRegistry(tmp_path / "processes.jsonl"))
    await browser.start()
    try:
        for _ in range(3):
            assert (await browser.capture(pages + "/good.html")).title == "Good"
        await asyncio.sleep(1.0)  # a spare renderer starts just after a navigation commits
        open_pages = sum(len(context.pages) for context in browser.browser.contexts)
        assert open_pages >= 1  # the default context's page, and the next capture's page opened ahead
        assert await asyncio.to_thread(_renderers, browser) == open_pages
    finally:
        await browser.close()


async def test_uncaught_error_and_blank(shared_browser: SharedBrowser, pages: str) -> None:
    capture = await shared_browser.capture(pages + "/error.html")
    assert any("kaboom: x is undefined" in e and "TypeError" in e for e in capture.page_errors)
    assert capture.blank
    assert "kaboom" in capture.render_error and "Uncaught errors" in capture.render_error


async def test_blank_page(shared_browser: SharedBrowser, pages: str) -> None:
    capture = await shared_browser.capture(pages + "/blank.html")
    assert capture.blank and not capture.page_errors and capture.png
    assert "blank" in capture.render_error


async def test_http_error_and_failed_script(shared_browser: SharedBrowser, pages: str) -> None:
    missing = await shared_browser.capture(pages + "/nothing-here")
    assert missing.status == 404 and "HTTP 404" in missing.render_error
    partial = await shared_browser.capture(pages + "/missing-script.html")
    assert any("/nope.js" in r and "404" in r for r in partial.failed_requests)
    assert partial.render_error is None  # the page still shows its text: not a render failure


async def test_hanging_page_returns_within_the_cap(shared_browser: SharedBrowser, pages: str) -> None:
    started = time.monotonic()
    capture = await shared_browser.capture(pages + "/hang.html", timeout_s=4.0)
    elapsed = time.monotonic() - started
    assert elapsed < 15, elapsed  # the cap plus cleanup, on a loaded machine
    assert capture.load_error and "did not finish loading in 3 s" in capture.load_error
    assert capture.render_error and "did not finish loading" in capture.render_error
    assert capture.png.startswith(b"\x89PNG")


async def test_connection_refused_is_a_load_error(shared_browser: SharedBrowser) -> None:
    capture = await shared_browser.capture("http://127.0.0.1:9/", timeout_s=5)
    assert capture.load_error and "could not be loaded" in capture.load_error
    assert isinstance(capture, PageCapture) and capture.render_error


async def test_vite_error_overlay_from_a_real_syntax_error(
    shared_browser: SharedBrowser, vite_template, tmp_path: Path
) -> None:
    ws = vite_template.make_workspace(tmp_path / "app")
    (ws / "src" / "App.jsx").write_text("export default function App() {\n  return <h1>Broken</h1\n}\n")
    runner = SiteRunner(ws, registry=None, log_dir=tmp_path / "logs", deps_cache_dir=vite_template.deps_cache_dir)
    try:
        result = await runner.ensure_running(None)
        assert result.ok, result.error  # the server runs; the page is what is broken
        capture = await shared_browser.capture(result.url)
    finally:
        await runner.stop()
    assert capture.overlay and "App.jsx" in capture.overlay
    assert "Vite shows a build error" in capture.render_error and "App.jsx" in capture.render_error


async def test_devtools_only_on_the_agents_socket_and_restart_after_the_browser_died(
    chromium_path: str, tmp_path: Path, pages: str
) -> None:
    registry = ProcessRegistry(tmp_path / "processes.jsonl")
    async with SharedBrowser(chromium_path, registry=registry) as browser:
        socket_path, _ = split_unix_url(browser.ws_url) or ("", "")
        assert stat.S_IMODE(Path(socket_path).parent.stat().st_mode) == 0o700  # the agent's user alone
        async with connect_browser(browser.ws_url, 10) as client:
            await client.send(json.dumps({"id": 1, "method": "Browser.getVersion"}))
            assert "Chrome" in json.loads(await client.recv())["result"]["product"]
        first_pid = browser.pid
        assert [e.pid for e in registry.entries()] == [first_pid]
        os.killpg(first_pid, signal.SIGKILL)  # the whole browser dies
        await eventually(lambda: not browser.healthy, timeout_s=15, what="the browser noticing it died", off_loop=False)
        capture = await browser.capture(pages + "/good.html")
        assert "Welcome" in capture.visible_text and browser.pid != first_pid
    assert registry.entries() == []


async def test_chromium_killed_during_a_capture_is_relaunched_and_the_capture_made_again(
    chromium_path: str, tmp_path: Path, pages: str
) -> None:
    import psutil

    async with SharedBrowser(chromium_path, registry=ProcessRegistry(tmp_path / "processes.jsonl")) as browser:
        first_pid = browser.pid
        capturing = asyncio.create_task(browser.capture(pages + "/slow.html"))
        await eventually(SLOW_ASKED.is_set, timeout_s=30, what="the slow page asked for")
        # Chromium itself dies (a crash, the OOM killer): its main process, not the agent's wrapper.
        chromium = [p for p in psutil.Process(first_pid).children(recursive=True) if "chrom" in p.name()]
        assert chromium
        chromium[0].kill()
        capture = await capturing
        assert capture.load_error is None and "Welcome to the shop" in capture.visible_text, capture.load_error
        assert capture.png and browser.pid != first_pid and browser.launches == 2


async def test_every_capture_after_rapid_source_edits_shows_the_new_text(
    shared_browser: SharedBrowser, vite_template, tmp_path: Path
) -> None:
    # The executor's order: fingerprint what the kept server serves, write, ensure_running, capture
    # at once. A stale page here would be judged as if the edit had not happened.
    from webgen_agent.tools.workspace import write_file

    ws = vite_template.make_workspace(tmp_path / "rapid")
    runner = SiteRunner(ws, registry=None, log_dir=tmp_path / "logs", deps_cache_dir=vite_template.deps_cache_dir)
    client = httpx.AsyncClient(trust_env=False)
    try:
        first = await runner.ensure_running(None)
        assert first.ok, first.error
        runner.note_page((await shared_browser.capture(first.url)).module_paths)
        for n in range(5):
            before = await runner.served_modules(["src/App.jsx"])
            # A draft served just before the final text is written: vite's watcher drops a change that
            # soon after the previous one, so without the freshness check this page stays the draft.
            await asyncio.sleep(0.1)  # test setup: out of the previous change's throttle window
            write_file(ws, "src/App.jsx", f"export default function App() {{ return <h1>Draft {n}</h1> }}\n")
            while f"Draft {n}" not in (await client.get(first.url + "src/App.jsx", timeout=10)).text:
                pass
            write_file(ws, "src/App.jsx", f"export default function App() {{ return <h1>Release {n} is live</h1> }}\n")
            result = await runner.ensure_running({"src/App.jsx"}, served_before=before)
            assert result.ok, result.error
            capture = await shared_browser.capture(result.url)
            runner.note_page(capture.module_paths, capture.failed_module_paths)
            assert f"Release {n} is live" in capture.visible_text, f"capture {n} showed: {capture.visible_text!r}"
            assert capture.render_error is None
            assert result.server_pid == first.server_pid or result.stale_restart
    finally:
        await client.aclose()
        await runner.stop()


async def test_a_fixed_build_error_is_not_shown_again(
    shared_browser: SharedBrowser, vite_template, tmp_path: Path
) -> None:
    # Vite keeps a compile error that happens while no page is connected and shows it to the next
    # page: the freshness check must never compile a module the last page failed on.
    from webgen_agent.tools.workspace import write_file

    ws = vite_template.make_workspace(tmp_path / "fixed")
    write_file(ws, "src/App.jsx", "export default function App() {\n  return <h1>Broken</h1\n}\n")
    runner = SiteRunner(ws, registry=None, log_dir=tmp_path / "logs", deps_cache_dir=vite_template.deps_cache_dir)
    try:
        first = await runner.ensure_running(None)
        broken = await shared_browser.capture(first.url)
        assert broken.overlay and "/src/App.jsx" in broken.failed_module_paths
        assert "/src/main.jsx" in broken.module_paths and "/src/App.jsx" not in broken.module_paths
        runner.note_page(broken.module_paths, broken.failed_module_paths)
        before = await runner.served_modules(["src/App.jsx"])
        assert before == {}
        write_file(ws, "src/App.jsx", "export default function App() { return <h1>Fixed now</h1> }\n")
        result = await runner.ensure_running({"src/App.jsx"}, served_before=before)
        fixed = await shared_browser.capture(result.url)
        assert not result.server_restarted
        assert "Fixed now" in fixed.visible_text and fixed.overlay is None and fixed.render_error is None
    finally:
        await runner.stop()


async def test_captures_run_side_by_side_and_beside_an_agent_endpoint(
    shared_browser: SharedBrowser, pages: str
) -> None:
    # Two runs' captures overlap: the quick page is done while the hanging one still loads.
    hanging = asyncio.create_task(shared_browser.capture(pages + "/hang.html", timeout_s=4.0))
    await asyncio.sleep(0.2)  # let the hanging capture take its turn first
    quick = asyncio.create_task(shared_browser.capture(pages + "/good.html"))
    done, _ = await asyncio.wait({hanging, quick}, return_when=asyncio.FIRST_COMPLETED)
    assert done == {quick} and "Welcome" in quick.result().visible_text
    await hanging

    # A GUI agent busy with a page of its own (one that never finishes loading) does not hold
    # captures back, and a capture does not touch the agent's tab.
    async with scoped_cdp_endpoint(shared_browser.ws_url) as endpoint, connect(endpoint.url) as agent:
        await agent.send(
            json.dumps({"id": 1, "method": "Target.createTarget", "params": {"url": pages + "/hang.html"}})
        )
        created = json.loads(await asyncio.wait_for(agent.recv(), 10))
        capture = await asyncio.wait_for(shared_browser.capture(pages + "/good.html"), 15)
        await agent.send(json.dumps({"id": 2, "method": "Target.getTargets", "params": {}}))
        targets = json.loads(await asyncio.wait_for(agent.recv(), 10))["result"]["targetInfos"]
    assert "Welcome" in capture.visible_text
    assert [t["targetId"] for t in targets] == [created["result"]["targetId"]]
