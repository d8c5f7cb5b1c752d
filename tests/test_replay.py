"""Recorded GUI tests: a real browser-use run becomes a Playwright test that replays with no model call."""

from __future__ import annotations

import functools
import http.server
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_gui_agent import TASK, TODO_PAGE, TODO_RULES, needs_chromium, scripted
from webgen_agent.tools.browser import SharedBrowser
from webgen_agent.tools.gui_agent import ElementLocator, GuiAction, GuiAgentSettings, GuiRun, run_gui_agent
from webgen_agent.tools.replay.record import record_test, targets, url_suffix_pattern
from webgen_agent.tools.replay.runner import replay_test
from webgen_agent.tools.replay.spec import spec_js
from webgen_agent.tools.replay.views import RecordedTest, ReplayStep, Target

# A refiner's edit that breaks the function: the button is still there, adding does nothing.
BROKEN_PAGE = TODO_PAGE.replace("if (!text) return;", "return;")
# An intended redesign: the same function behind other words.
REDESIGNED_PAGE = TODO_PAGE.replace("Add item", "Create task").replace("What needs doing?", "New task")


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The todo page served from a folder whose index.html a test rewrites (as a code edit would)."""
    (tmp_path / "index.html").write_text(TODO_PAGE, encoding="utf-8")

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    handler = functools.partial(QuietHandler, directory=str(tmp_path))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/index.html", tmp_path / "index.html"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.e2e
@needs_chromium
async def test_a_passing_gui_run_becomes_a_replayable_test(
    site: tuple[str, Path], shared_browser: SharedBrowser
) -> None:
    url, index = site
    async with scripted(TODO_RULES) as server:
        settings = GuiAgentSettings(model="vlm", base_url=server.base_url, api_key="k", cdp_url=shared_browser.ws_url)
        run = await run_gui_agent(url=url, task=TASK, settings=settings)
        assert run.stopped_reason == "done", run.errors
        calls = len(server.requests)
        # The element each action targeted, read off the DOM: never browser-use's index.
        assert run.actions[1].locator == ElementLocator(
            tag="button", role="button", name="Add item", text="Add item", element_id="add"
        )
        assert run.actions[0].locator is not None and run.actions[0].locator.placeholder == "What needs doing?"
        test = await record_test(
            shared_browser, url, run, name="step-2", instruction=TASK, step=2, covers_all=True, score=5
        )
        assert test is not None
        assert [s.kind for s in test.steps] == ["goto", "fill", "click", "expect_count", "expect_text", "expect_text"]
        assert test.steps[1].target == Target(by="role", value="textbox", name="What needs doing?")
        assert test.steps[1].value == "Buy milk"
        assert test.steps[2].target == Target(by="role", value="button", name="Add item")
        assert test.steps[3] == ReplayStep(kind="expect_count", value="li", count=1)
        texts = [s.target.value for s in test.steps if s.kind == "expect_text" and s.target]
        assert texts == ["Todo: Buy milk", "1 items"]  # the typed text's line first

        spec = spec_js(test)
        assert 'page.getByRole("button", { name: "Add item", exact: true }).click();' in spec
        assert 'fill("Buy milk")' in spec and "toHaveCount(1)" in spec and "nth(" not in spec

        passed = await replay_test(shared_browser, url, test)
        assert passed.status == "passed" and passed.attempts == 1 and passed.failed_step is None

        index.write_text(BROKEN_PAGE, encoding="utf-8")
        broken = await replay_test(shared_browser, url, test, step_timeout_s=1.0)
        assert broken.status == "failed" and broken.attempts == 2
        assert broken.failed_step == 3 and broken.failed_action == "expect 1 elements matching 'li'"
        assert broken.screenshot_png is not None and broken.screenshot_png.startswith(b"\x89PNG")
        assert "now fails at step 4: expect 1 elements" in broken.for_coder()

        index.write_text(REDESIGNED_PAGE, encoding="utf-8")
        redesigned = await replay_test(shared_browser, url, test, step_timeout_s=1.0)
        assert redesigned.status == "unmatched" and redesigned.failed_step == 1
        assert len(server.requests) == calls  # replays and recording ask no model


def test_locator_candidates_prefer_test_ids_then_roles() -> None:
    locator = ElementLocator(tag="input", role="textbox", name="Email", test_id="email", placeholder="you@x")
    assert [t.by for t in targets(locator)] == ["test_id", "role", "placeholder"]
    assert targets(ElementLocator(tag="div", element_id='a"b')) == [Target(by="css", value='[id="a\\"b"]')]


def test_url_pattern_is_the_same_in_python_and_javascript() -> None:
    assert url_suffix_pattern("http://h:1/cart?id=2#top") == r"\/cart\?id=2#top$"


@pytest.mark.e2e
async def test_a_run_without_reproducible_actions_records_nothing(
    site: tuple[str, Path], shared_browser: SharedBrowser
) -> None:
    url, _ = site
    gone = ElementLocator(tag="button", role="button", name="Nowhere", text="Nowhere")
    run = GuiRun(actions=[GuiAction(step=1, name="click", locator=gone)], stopped_reason="done")
    test = await record_test(shared_browser, url, run, name="t", instruction="i", step=1, covers_all=True, score=5)
    assert test is None
    empty = RecordedTest(name="e", instruction="i", recorded_at_step=1, covers_all=True, source_score=5, steps=[])
    assert empty.actions == 0


@pytest.fixture
def alternating_site() -> Iterator[str]:
    """The todo page, broken on every other load: a test of it passes on the retry only."""
    loads = [0]

    class Alternating(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/":  # the favicon
                self.send_error(404)
                return
            loads[0] += 1
            body = (BROKEN_PAGE if loads[0] % 2 else TODO_PAGE).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Alternating)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.e2e
async def test_a_test_that_passes_only_on_the_retry_is_flaky_not_passed(
    alternating_site: str, shared_browser: SharedBrowser
) -> None:
    add = Target(by="role", value="button", name="Add item")
    test = RecordedTest(
        name="t",
        instruction="i",
        recorded_at_step=0,
        covers_all=True,
        source_score=5,
        steps=[
            ReplayStep(kind="goto", value="/"),
            ReplayStep(kind="fill", target=Target(by="placeholder", value="What needs doing?"), value="Tea"),
            ReplayStep(kind="click", target=add),
            ReplayStep(kind="expect_text", target=Target(by="text", value="Todo: Tea")),
        ],
    )
    verdict = await replay_test(shared_browser, alternating_site, test, step_timeout_s=1.0)
    assert verdict.status == "flaky" and verdict.attempts == 2
    assert verdict.failed_step == 3 and verdict.failed_action == "expect text 'Todo: Tea' visible"


# What the page and the agent gave (text typed, element names, the instruction) is untrusted: in a
# shipped spec it must stay data. Each payload would end the process with code 7 if it became code.
BREAKOUT = "x'); process.exit(7); ('\" + process.exit(7) + \"`${process.exit(7)}`"
HOSTILE_SPEC = RecordedTest(
    name=BREAKOUT,
    instruction=f"Click Add.\nprocess.exit(7)\u2028process.exit(7)\u2029process.exit(7)\r{BREAKOUT}",
    recorded_at_step=2,
    covers_all=True,
    source_score=5,
    steps=[
        ReplayStep(kind="goto", value=BREAKOUT),
        ReplayStep(kind="fill", target=Target(by="role", value=BREAKOUT, name=BREAKOUT), value=BREAKOUT),
        ReplayStep(kind="click", target=Target(by="text", value=BREAKOUT, first=True)),
        ReplayStep(kind="select", target=Target(by="label", value=BREAKOUT), value=BREAKOUT),
        ReplayStep(kind="press", value=BREAKOUT),
        ReplayStep(kind="expect_text", target=Target(by="placeholder", value=BREAKOUT)),
        ReplayStep(kind="expect_count", value=BREAKOUT, count=2),
        ReplayStep(kind="expect_url", value=url_suffix_pattern(f"http://127.0.0.1:5173/{BREAKOUT}")),
    ],
)
# Stands in for @playwright/test: runs the test's body against a page on which every call succeeds.
PLAYWRIGHT_STUB = """
const chain = new Proxy(function () {}, {
  get: (_target, key) => (key === 'then' ? undefined : chain),
  apply: () => chain,
});
const test = async (_name, body) => { await body({ page: chain }); console.log('ran'); };
const expect = () => chain;
"""


@pytest.mark.e2e  # runs node
def test_page_text_in_a_shipped_spec_stays_data(tmp_path: Path) -> None:
    spec = spec_js(HOSTILE_SPEC)
    runnable = spec.replace("import { test, expect } from '@playwright/test';", PLAYWRIGHT_STUB)
    assert runnable != spec
    (tmp_path / "hostile.spec.mjs").write_text(runnable)
    done = subprocess.run(["node", str(tmp_path / "hostile.spec.mjs")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ran", (done.returncode, done.stderr, spec)
