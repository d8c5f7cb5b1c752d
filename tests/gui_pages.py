"""What the tests of the GUI agent's rules share (tests/test_gui_forced_answer.py,
tests/test_gui_webvoyager_actions.py): static pages served on loopback, and a GUI agent on the
shared Chromium that asks a scripted VLM."""

from __future__ import annotations

import contextlib
import functools
import http.server
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.tools.gui_agent import GuiAgentSettings, run_gui_agent

# WebVoyager's waits before each read of the page, off where a test is about something else (they have
# a test of their own).
NO_WAITS = {
    "settle_after_load_s": 0.0,
    "settle_after_action_s": {},
}


@contextlib.contextmanager
def serve_pages(pages: dict[str, str]) -> Iterator[str]:
    """``pages`` (file name -> HTML) served from a temporary folder on loopback; yields the base URL."""
    with tempfile.TemporaryDirectory(prefix="gui-pages-") as folder:
        for name, html in pages.items():
            (Path(folder) / name).write_text(html, encoding="utf-8")

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=folder))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{httpd.server_address[1]}/"
        finally:
            httpd.shutdown()
            httpd.server_close()


async def scripted_agent(server: ScriptedServer, shared_browser: Any, **rules: Any) -> GuiAgentSettings:
    """A GUI agent of 15 actions on the shared Chromium, asking the scripted VLM; ``rules`` beside."""
    return GuiAgentSettings(
        model="vlm",
        base_url=server.base_url,
        api_key="k",
        cdp_url=(await shared_browser.start()).ws_url,
        max_actions=15,
        timeout_s=240,
        **rules,
    )


async def answers_with_and_without(
    rule: str, scenario: Scenario, shared_browser: Any, *, url: str, task: str, **rules: Any
) -> dict[bool, tuple[str, list[int]]]:
    """The agent's answer, and the scenario rules that answered its requests, with the setting ``rule``
    on and off (``rules`` beside); each run must end with an answer."""
    answers = {}
    for on in (True, False):
        async with ScriptedServer(scenario) as server:
            settings = await scripted_agent(server, shared_browser, **{**rules, rule: on})
            run = await run_gui_agent(url=url, task=task, settings=settings)
        assert run.stopped_reason == "done", run.errors
        answers[on] = (run.final_answer or "", [r.rule_index for r in server.requests])
    return answers
