"""A GUI agent's DevTools endpoint shows one browser context of the shared Chromium and nothing else."""

from __future__ import annotations

import asyncio
import functools
import http.server
import json
import logging
import re
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect

from tests.helpers import CdpClient, kill_chromium
from tests.test_gui_agent import TASK, TODO_PAGE, TODO_RULES, scripted
from webgen_agent.tools.browser import SharedBrowser
from webgen_agent.tools.cdp_scope import connect_browser, scoped_cdp_endpoint
from webgen_agent.tools.gui_agent import GuiAgentSettings, open_gui_session, run_gui_agent

pytestmark = pytest.mark.e2e

# The same todo app, but its list items read "Chore: ..." (the scripted rules tell the two apart).
CHORE_PAGE = TODO_PAGE.replace("'Todo: '", "'Chore: '").replace("<title>Todo</title>", "<title>Chores</title>")
CHORE_RULES = [
    {
        "turn": 0,
        "agent": {
            "actions": [
                {"input": {"target": "What needs doing?", "text": "Walk dog"}},
                {"click": {"target": "Add item"}},
            ],
            "memory": "Typed the chore and pressed Add item.",
        },
    },
    {
        "page_contains": ["Chore: Walk dog"],
        "agent": {"actions": [{"done": {"text": "YES - Walk dog is listed", "success": True}}]},
    },
    {"agent": {"actions": [{"done": {"text": "NO - the chore is missing", "success": False}}]}},
]


PAGE_LOADS: Counter[str] = Counter()
# The todo app with a line saying how long the page has been open, in whole seconds: a read of the
# page tells when it was made. The line changes once a second only: updated every 20 ms, it was once
# missing from a read (browser-use takes the DOM tree and the layout snapshot one after the other).
CLOCK_PAGE = TODO_PAGE.replace(
    '<ul id="items"></ul>',
    '<ul id="items"></ul><p id="clock">open 0 s</p><script>setInterval(() => {'
    " const shown = 'open ' + Math.floor(performance.now() / 1000) + ' s';"
    " const clock = document.getElementById('clock'); if (clock.textContent !== shown) clock.textContent = shown;"
    " }, 100);</script>",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("scope-site")
    (root / "todo.html").write_text(TODO_PAGE, encoding="utf-8")
    (root / "chores.html").write_text(CHORE_PAGE, encoding="utf-8")
    (root / "other.html").write_text("<title>Another run</title><h1>Another run's page</h1>", encoding="utf-8")
    (root / "clock.html").write_text(CLOCK_PAGE, encoding="utf-8")

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            PAGE_LOADS[self.path] += 1
            super().do_GET()

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


async def page_urls(browser: SharedBrowser) -> list[str]:
    """Every page of the browser, whatever context it is in (asked over the agent's own socket)."""
    async with connect_browser(browser.ws_url, 10) as connection:
        await connection.send(json.dumps({"id": 1, "method": "Target.getTargets"}))
        answer = json.loads(await connection.recv())
    return [t["url"] for t in answer["result"]["targetInfos"] if t["type"] == "page"]


@pytest.fixture
async def other_runs_page(shared_browser: SharedBrowser, site: str) -> AsyncIterator[Any]:
    """A page of another run (as a capture holds one), open for the whole test."""
    context = await shared_browser.browser.new_context()
    page = await context.new_page()
    await page.goto(site + "/other.html")
    yield page
    await context.close()


async def test_a_client_sees_and_creates_only_pages_of_its_own_context(
    shared_browser: SharedBrowser, site: str, other_runs_page: Any
) -> None:
    async with scoped_cdp_endpoint(shared_browser.ws_url) as endpoint:
        async with connect(endpoint.url, max_size=None) as connection:
            client = CdpClient(connection)
            assert (await client.command("Target.getTargets"))["result"]["targetInfos"] == []

            created = await client.command("Target.createTarget", {"url": site + "/todo.html"})
            mine = created["result"]["targetId"]
            await client.command("Target.setDiscoverTargets", {"discover": True})
            await client.command(
                "Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True}
            )
            await client.drain(1.0)
            infos = (await client.command("Target.getTargets"))["result"]["targetInfos"]
            assert [(t["targetId"], t["type"]) for t in infos] == [(mine, "page")]

            # The browser knows both pages; nothing the client received names the other run's page.
            assert {site + "/todo.html", site + "/other.html"} <= set(await page_urls(shared_browser))
            seen = json.dumps(client.received)
            assert "other.html" not in seen and other_runs_page.url.endswith("/other.html")
            attached = [
                m["params"]["targetInfo"]["targetId"]
                for m in client.received
                if m.get("method") == "Target.attachedToTarget"
            ]
            assert attached == [mine]

            refused = await client.command("Browser.close")
            assert "not allowed" in refused["error"]["message"]
        # Disconnected: the context went with its page; the shared browser and the other page did not.
        await asyncio.sleep(0.5)
        urls = await page_urls(shared_browser)
        assert site + "/todo.html" not in urls and site + "/other.html" in urls
        assert shared_browser.healthy and await other_runs_page.title() == "Another run"


async def test_two_gui_agents_test_their_own_sites_side_by_side_on_one_chromium(
    shared_browser: SharedBrowser, site: str, other_runs_page: Any
) -> None:
    async def agent(page: str, rules: list[dict]) -> tuple[float, float, Any]:
        async with scripted(rules) as server:
            started = time.monotonic()
            run = await run_gui_agent(
                url=f"{site}/{page}",
                task=TASK,
                settings=GuiAgentSettings(
                    model="vlm",
                    base_url=server.base_url,
                    api_key="k",
                    cdp_url=shared_browser.ws_url,
                    timeout_s=90,
                ),
            )
            return started, time.monotonic(), run

    (todo_start, todo_end, todo), (chore_start, chore_end, chore) = await asyncio.gather(
        agent("todo.html", TODO_RULES), agent("chores.html", CHORE_RULES)
    )
    # Each agent typed into and read its own page only: no item of the other app reached it.
    assert todo.stopped_reason == "done" and todo.final_answer == "YES - Buy milk is listed", todo.errors
    assert chore.stopped_reason == "done" and chore.final_answer == "YES - Walk dog is listed", chore.errors
    assert [a.params.get("text") for a in todo.actions if a.name == "input"] == ["Buy milk"]
    assert [a.params.get("text") for a in chore.actions if a.name == "input"] == ["Walk dog"]
    # They ran at the same time, not in turns.
    assert max(todo_start, chore_start) < min(todo_end, chore_end)
    # Another run's page is untouched, and the agents' tabs are gone with their contexts.
    assert await other_runs_page.title() == "Another run"
    await asyncio.sleep(0.5)
    assert not any(url.endswith(("/todo.html", "/chores.html")) for url in await page_urls(shared_browser))
    assert shared_browser.healthy


async def test_a_session_opened_ahead_is_used_by_the_run_and_closed_with_it(
    shared_browser: SharedBrowser, site: str
) -> None:
    url = f"{site}/todo.html"
    loads_before = PAGE_LOADS["/todo.html"]
    prepared = await open_gui_session(url=url, cdp_url=shared_browser.ws_url)
    assert url in await page_urls(shared_browser) and PAGE_LOADS["/todo.html"] == loads_before + 1
    async with scripted(TODO_RULES) as server:
        run = await run_gui_agent(
            url=url,
            task=TASK,
            settings=GuiAgentSettings(
                model="vlm",
                base_url=server.base_url,
                api_key="k",
                cdp_url=shared_browser.ws_url,
                timeout_s=90,
            ),
            prepared=prepared,
        )
    assert run.stopped_reason == "done" and run.final_answer == "YES - Buy milk is listed", run.errors
    # The run tested the page the session had loaded: it did not load it again.
    assert PAGE_LOADS["/todo.html"] == loads_before + 1
    await asyncio.sleep(0.5)
    assert url not in await page_urls(shared_browser) and not prepared.session.is_cdp_connected


@pytest.mark.parametrize("settle_s", [0.0, 1.0])
async def test_a_session_opened_ahead_reads_its_page_once_settled_and_the_agent_starts_from_that_read(
    shared_browser: SharedBrowser, site: str, settle_s: float
) -> None:
    """The agent's first page read (DOM and screenshot) is made as soon as the prepared page loaded
    and settled (the profile's wait after a load: none, or WebVoyager's), while a grading call would
    still run, not when the agent starts; its later reads when it asks."""
    url = f"{site}/clock.html"
    prepared = await open_gui_session(url=url, cdp_url=shared_browser.ws_url, settle_s=settle_s)
    await asyncio.sleep(3)  # the screenshot's grading call
    async with scripted(TODO_RULES) as server:
        run = await run_gui_agent(
            url=url,
            task=TASK,
            settings=GuiAgentSettings(
                model="vlm", base_url=server.base_url, api_key="k", cdp_url=shared_browser.ws_url, timeout_s=90
            ),
            prepared=prepared,
        )
    assert run.stopped_reason == "done" and run.final_answer == "YES - Buy milk is listed", run.errors
    opened_for = [int(m) for r in server.requests for m in re.findall(r"open (\d+) s", r.last_user_text)]
    assert len(opened_for) == 2, [r.last_user_text for r in server.requests]
    first, second = opened_for
    # Read once settled, not after the 3 s wait; then anew.
    assert settle_s <= first <= 2 < 3 <= second, opened_for


async def test_a_session_closed_while_it_reads_its_page_ahead_closes_without_errors(
    shared_browser: SharedBrowser, site: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A session nobody takes (a grade too low for a GUI test) may be closed while its read ahead
    runs: the read ends first, and nothing of browser-use's reports a failure."""
    url = f"{site}/clock.html"
    with caplog.at_level(logging.WARNING):
        for reading_for in (0.02, 0.05, 0.1):
            prepared = await open_gui_session(url=url, cdp_url=shared_browser.ws_url)
            await asyncio.sleep(reading_for)
            await prepared.close()
        await asyncio.sleep(0.5)  # anything cut off reports it by now
    failures = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert failures == [], failures
    assert url not in await page_urls(shared_browser)


async def test_a_session_closed_while_its_page_settles_closes_at_once(shared_browser: SharedBrowser, site: str) -> None:
    """A session dropped during its read's settle wait (WebVoyager's 5 s after a load) is not held
    open until the read would have been made: its close does not wait for the page to settle."""
    prepared = await open_gui_session(url=f"{site}/clock.html", cdp_url=shared_browser.ws_url, settle_s=30.0)
    started = time.monotonic()
    await prepared.close()
    assert time.monotonic() - started < 3, "the close waited for the read's settle wait (5 s at most)"
    assert f"{site}/clock.html" not in await page_urls(shared_browser)


async def test_a_session_opened_for_another_page_is_closed_and_the_run_opens_its_own(
    shared_browser: SharedBrowser, site: str
) -> None:
    stale = await open_gui_session(url=f"{site}/other.html", cdp_url=shared_browser.ws_url)
    async with scripted(CHORE_RULES) as server:
        run = await run_gui_agent(
            url=f"{site}/chores.html",
            task=TASK,
            settings=GuiAgentSettings(
                model="vlm",
                base_url=server.base_url,
                api_key="k",
                cdp_url=shared_browser.ws_url,
                timeout_s=90,
            ),
            prepared=stale,
        )
    assert run.final_answer == "YES - Walk dog is listed", run.errors
    await asyncio.sleep(0.5)
    assert not any(u.endswith(("/other.html", "/chores.html")) for u in await page_urls(shared_browser))


async def test_a_run_gets_the_session_opened_for_the_step_it_tests_and_no_other(
    tmp_path: Path, site: str, chromium_path: str
) -> None:
    from webgen_agent.apps.demo import scripted_context
    from webgen_agent.nodes.resources import Resources, use_resources

    context = scripted_context("http://127.0.0.1:9/v1", max_steps=2).model_copy(update={"chromium": chromium_path})
    async with use_resources(Resources(tmp_path / "webgen.db", chromium=chromium_path)) as resources:
        browser = await resources.browser(context)
        resources.prepare_gui_session("run-a", 3, f"{site}/todo.html", context)
        opening = resources._gui_sessions["run-a"][1]
        assert await resources.take_gui_session("run-a", 4) is None  # another step: dropped, closed
        # ... in the background: the caller did not wait for the session to open only to close it.
        assert not opening.done()
        await asyncio.wait({opening})
        for _ in range(100):  # then closed, its page gone
            if f"{site}/todo.html" not in await page_urls(browser):
                break
            await asyncio.sleep(0.1)
        assert f"{site}/todo.html" not in await page_urls(browser)

        resources.prepare_gui_session("run-a", 5, f"{site}/chores.html", context)
        taken = await resources.take_gui_session("run-a", 5)
        assert taken is not None and taken.url == f"{site}/chores.html" and taken.session.is_cdp_connected
        assert await resources.take_gui_session("run-a", 5) is None  # handed out once
        await taken.close()

        # One opened on a Chromium that died (and was relaunched) since is not handed out: its pages are gone.
        resources.prepare_gui_session("run-c", 2, f"{site}/todo.html", context)
        opening = resources._gui_sessions["run-c"][1]
        await asyncio.wait({opening})  # opened: its page is loaded on this Chromium
        assert opening.exception() is None and f"{site}/todo.html" in await page_urls(browser)
        await kill_chromium(browser)
        assert await resources.browser(context) is browser and browser.healthy  # relaunched
        stale = await resources.take_gui_session("run-c", 2)
        if stale is not None:
            await asyncio.wait_for(stale.close(), 30)
        assert stale is None, "a GUI session on the dead Chromium was handed out"

        resources.prepare_gui_session("run-b", 1, f"{site}/other.html", context)
    # Closing the resources closes the session nobody took, then the browser.
    assert not browser.healthy


async def test_a_confined_context_reaches_only_its_site_and_web_pages_cannot_connect(
    shared_browser: SharedBrowser, site: str
) -> None:
    from websockets.exceptions import InvalidStatus

    async with scoped_cdp_endpoint(shared_browser.ws_url, confine_to=site + "/todo.html") as endpoint:
        # A page of the site (or any page) that finds the relay's port cannot drive the browser.
        with pytest.raises(InvalidStatus):
            async with connect(endpoint.url, origin="http://127.0.0.1:1"):  # type: ignore[arg-type]
                pass
        async with connect(endpoint.url, max_size=None) as connection:
            client = CdpClient(connection)
            session = await client.open_page(site + "/todo.html", settle_s=0)

            async def fetch(url: str) -> str:
                expression = f"fetch({url!r}, {{mode: 'no-cors'}}).then(() => 'ok', () => 'blocked')"
                return str(await client.evaluate(session, expression))

            await asyncio.sleep(0.5)
            assert await fetch(site + "/todo.html") == "ok"
            assert await fetch(endpoint.url.replace("ws://", "http://")) == "blocked"  # another local port
            # Private and link-local addresses too (public hosts: tests/test_hostile_page_network.py).
            assert await fetch("http://169.254.169.254/latest/meta-data/") == "blocked"
            assert await fetch("http://10.0.0.1/") == "blocked"
