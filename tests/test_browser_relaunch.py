"""Chromium dies at the worst moment for a run that shares it: a Playwright call in flight, a confined
page being set up to record a passing GUI test, a replay, a capture while another run relaunches it.
Each time it is relaunched once and the work done again; nothing fails. (A death during a capture or
a GUI agent's run: tests/test_browser.py, tests/test_browser_crash.py.)

Each test kills Chromium from inside the project's own code path at the exact moment (a hook that
calls the real function after the kill), so none depends on timing."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Error as PlaywrightError

import webgen_agent.tools.browser as browser_module
import webgen_agent.tools.replay.runner as runner_module
from tests.helpers import chromium_main, eventually, kill_chromium
from tests.test_gui_agent import TASK
from tests.test_replay import site  # noqa: F401 (a fixture: the todo page, served)
from webgen_agent.tools.browser import SharedBrowser
from webgen_agent.tools.gui_agent import ElementLocator, GuiAction, GuiRun
from webgen_agent.tools.page_proxy import PageProxy
from webgen_agent.tools.process import ProcessRegistry
from webgen_agent.tools.replay.record import record_test

pytestmark = pytest.mark.e2e

# The todo page's function as a GUI agent did it: type an item, add it.
ADD_ITEM = GuiRun(
    actions=[
        GuiAction(
            step=1,
            name="input",
            params={"text": "Buy milk"},
            locator=ElementLocator(
                tag="input", role="textbox", name="What needs doing?", placeholder="What needs doing?"
            ),
        ),
        GuiAction(
            step=2,
            name="click",
            locator=ElementLocator(tag="button", role="button", name="Add item", text="Add item", element_id="add"),
        ),
    ],
    stopped_reason="done",
)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def browser(chromium_path: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SharedBrowser]:
    """A Chromium of this module's own, which its tests kill (the session's shared one stays up)."""
    registry = ProcessRegistry(tmp_path_factory.mktemp("relaunch") / "processes.jsonl")
    async with SharedBrowser(chromium_path, registry=registry) as shared:
        yield shared


async def test_a_call_in_flight_on_a_chromium_that_dies_fails_at_once(browser: SharedBrowser) -> None:
    await browser.start()
    chromium = chromium_main(browser)
    chromium.send_signal(signal.SIGSTOP)  # it cannot answer: the call below stays in flight
    try:
        pending = asyncio.create_task(browser.browser.new_context())
        pipe = browser._pipe
        assert pipe is not None
        await eventually(
            lambda: any(client is not None for client, _, _ in pipe._pending.values()),
            timeout_s=30,
            what="the call reaching Chromium's pipe",
            off_loop=False,
        )
    finally:
        chromium.kill()
    # Bounded here only so that a hang fails the test: the call ends as soon as the pipe closes.
    with pytest.raises(PlaywrightError, match="closed"):
        await asyncio.wait_for(pending, 60)


async def test_chromium_killed_as_a_passing_gui_test_is_recorded_is_relaunched_and_the_test_recorded(
    browser: SharedBrowser,
    site: tuple[str, Path],  # noqa: F811 (a fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await browser.start()
    launches = browser.launches
    real_confine = browser_module.confine_to_origin
    killed: list[int] = []

    async def confine_after_a_kill(context, page, url, *, offline=False):  # type: ignore[no-untyped-def]
        if not killed:  # the page is open; Chromium dies before its network policy is set
            killed.append(launches)
            await kill_chromium(browser)
        return await real_confine(context, page, url, offline=offline)

    monkeypatch.setattr(browser_module, "confine_to_origin", confine_after_a_kill)
    url, _ = site
    test = await record_test(browser, url, ADD_ITEM, name="step-1", instruction=TASK, step=1, covers_all=True, score=5)
    assert killed and browser.launches == launches + 1  # one relaunch
    assert test is not None and [s.kind for s in test.steps][:3] == ["goto", "fill", "click"], test
    assert any(s.kind == "expect_text" and s.target and s.target.value == "Todo: Buy milk" for s in test.steps)


async def test_chromium_killed_during_a_replay_is_not_the_sites_failure(
    browser: SharedBrowser,
    site: tuple[str, Path],  # noqa: F811 (a fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, _ = site
    test = await record_test(browser, url, ADD_ITEM, name="step-1", instruction=TASK, step=1, covers_all=True, score=5)
    assert test is not None
    launches = browser.launches
    real_step = runner_module.run_step
    killed: list[bool] = []

    async def step_after_a_kill(page, base_url, step, timeout_s):  # type: ignore[no-untyped-def]
        if not killed and step.kind == "click":  # Chromium dies as the test clicks "Add item"
            killed.append(True)
            await kill_chromium(browser)
        return await real_step(page, base_url, step, timeout_s)

    monkeypatch.setattr(runner_module, "run_step", step_after_a_kill)
    verdict = await runner_module.replay_test(browser, url, test)
    assert killed and browser.launches == launches + 1
    # Passed at its first run, on the relaunched browser: neither failed nor "flaky".
    assert verdict.status == "passed" and verdict.attempts == 1, verdict


@pytest.fixture
def held_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[list]:
    """Hooks the first page proxy a capture starts: the test's callbacks run there, then it goes on."""
    hooks: list = []

    class Held(PageProxy):
        async def start(self) -> PageProxy:
            started = await super().start()
            if hooks:
                await hooks.pop()()
            return started

    monkeypatch.setattr(browser_module, "PageProxy", Held)
    yield hooks


async def test_a_capture_in_flight_while_another_run_relaunches_chromium_waits_and_uses_the_new_one(
    browser: SharedBrowser,
    site: tuple[str, Path],  # noqa: F811 (a fixture)
    held_proxy: list,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, _ = site
    await browser.start()
    await browser._drop_spare()  # no page opened ahead: this capture opens its own (a proxy first)
    launches = browser.launches
    relaunching = asyncio.Event()
    real_launch = browser._launch

    async def launch() -> None:
        relaunching.set()  # the dead browser is shut down; the new one is not up yet
        await real_launch()

    monkeypatch.setattr(browser, "_launch", launch)
    other: list[asyncio.Task] = []

    async def another_run_relaunches() -> None:
        # This capture has passed its start(); Chromium dies and another run's capture relaunches it.
        await kill_chromium(browser)
        other.append(asyncio.create_task(browser.capture(url)))
        await relaunching.wait()

    held_proxy.append(another_run_relaunches)
    first = await browser.capture(url)
    second = await other[0]
    for capture in (first, second):
        assert capture.load_error is None and "Add item" in capture.visible_text, capture.load_error
        assert capture.png
    assert browser.launches == launches + 1  # one relaunch, used by both
