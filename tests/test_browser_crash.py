"""Chromium dies under a GUI test (a crash, a kill, the OOM killer): it is relaunched and the test run
once more, so a dead browser is never the site's failing grade. (A capture: tests/test_browser.py.)"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.helpers import eventually
from tests.node_harness import NodeHarness
from tests.test_node_executor import edit_state
from webgen_agent.apps.demo import scenario_path
from webgen_agent.apps.scripted import server as scripted_server
from webgen_agent.nodes.executor import executor
from webgen_agent.nodes.gui_tester import gui_tester
from webgen_agent.tools.browser import SharedBrowser
from webgen_agent.tools.process import ProcessRegistry

pytestmark = pytest.mark.e2e

INSTRUCTION = (
    "1. Click 'Show opening hours'. 2. Check that the opening hours appear. Answer YES if they do, otherwise NO."
)
CLICK = {"click": {"target": "Show opening hours"}}
RULES: list[dict[str, Any]] = [
    # The agent's first step is answered slowly: the test kills Chromium meanwhile.
    {
        "model": "scripted-vlm",
        "turn": 0,
        "delay_s": 4,
        "agent": {"memory": "", "next_goal": "Click.", "actions": [CLICK]},
    },
    {
        "model": "scripted-vlm",
        "turn": 1,
        "page_contains": ["Hours: Mon-Fri"],
        "agent": {
            "memory": "",
            "next_goal": "Report.",
            "actions": [{"done": {"text": "YES - shown.", "success": True}}],
        },
    },
    {
        "model": "scripted-vlm",
        "agent": {
            "memory": "",
            "next_goal": "Report.",
            "actions": [{"done": {"text": "NO - gone.", "success": False}}],
        },
    },
    {
        "model": "scripted-feedback",
        "schema": "GuiVerdict",
        "contains": ["YES - shown"],
        "json": {"passed": True, "score": 5, "suggestions": []},
    },
    {
        "model": "scripted-feedback",
        "schema": "GuiVerdict",
        "json": {"passed": False, "score": 1, "suggestions": ["Fix it."]},
    },
]


async def test_chromium_killed_during_a_gui_test_is_relaunched_and_the_test_run_again(
    tmp_path: Path, chromium_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = threading.Event()  # the GUI agent's first step reached the model
    original = scripted_server.request_facts

    def watching(body: dict[str, Any]):
        if body.get("model") == "scripted-vlm":
            asked.set()
        return original(body)

    monkeypatch.setattr(scripted_server, "request_facts", watching)
    page = (Path(scenario_path("landing")).parent / "landing" / "page-v2.txt").read_text()
    async with (
        SharedBrowser(chromium_path, registry=ProcessRegistry(tmp_path / "processes.jsonl")) as browser,
        NodeHarness.open(tmp_path, browser=browser) as harness,
    ):
        executed = await harness.run(executor, edit_state(harness, page))
        assert executed.update["steps"][0]["execution"]["ok"], executed.update["steps"][0]["execution"]
        state = {**executed.state, "current": 0, "edit_step": 0, "test_instruction": INSTRUCTION}
        first_pid = browser.pid

        async def kill_chromium_once_asked() -> None:
            await eventually(asked.is_set, timeout_s=120, what="the GUI agent's first step")
            chromium = [p for p in psutil.Process(first_pid).children(recursive=True) if "chrom" in p.name()]
            assert chromium
            chromium[0].kill()

        killer = asyncio.create_task(kill_chromium_once_asked())
        run = await harness.run(gui_tester, state, rules=RULES)
        await killer
    (tested, *_) = run.update["steps"]
    assert tested["gui_passed"] is True and tested["gui_score"] == 5, tested
    assert browser.launches == 2
    record = harness.store.get_json(tested["gui_run"])
    assert record["final_answer"].startswith("YES")
