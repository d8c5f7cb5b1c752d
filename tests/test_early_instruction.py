"""The GUI test instruction is written by the feedback model while the coder writes the first version."""

from __future__ import annotations

import pytest

from webgen_agent.apps.demo import scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.history import final_state
from webgen_agent.graph.api import run_requirement

pytestmark = pytest.mark.e2e

PAGE = '<boltArtifact id="s" title="S"><boltAction type="file" filePath="index.html"><h1>Opening hours</h1></boltAction></boltArtifact>'
INSTRUCTION = "Check that the opening hours are shown. Answer YES or NO."
RULES = [
    # The coder answers slowly: a sequential generator would log its reply before the instruction.
    {"model": "scripted-coder", "turn": 0, "content": PAGE, "delay_s": 0.5},
    {"model": "scripted-coder", "content": "finish"},
    {"model": "scripted-vlm", "schema": "ScreenshotJudgement", "json": {"description": "A heading.", "score": 4}},
    {
        "model": "scripted-vlm",
        "agent": {"actions": [{"done": {"text": "YES - the hours are shown.", "success": True}}]},
    },
    {"model": "scripted-feedback", "schema": "TestInstruction", "json": {"instruction": INSTRUCTION}},
    {"model": "scripted-feedback", "schema": "GuiVerdict", "json": {"passed": True, "score": 5, "suggestions": []}},
]


async def test_instruction_is_written_alongside_the_first_coder_call_and_reused(tmp_path, chromium_path) -> None:
    with ScriptedServer(Scenario.model_validate({"name": "early", "rules": RULES})) as server:
        context = scripted_context(server.base_url, gui_max_actions=2)
        result = await run_requirement(
            "A page with the opening hours.",
            context=context,
            run_id="early",
            out_dir=tmp_path / "out",
            db_path=tmp_path / "webgen.db",
        )
        requests = [(r.model, r.rule_index) for r in server.requests]
    assert result.status == "finished"
    asked = [index for model, index in requests if model == "scripted-feedback" and index == 4]
    assert asked == [4], "the instruction is asked once per run; the GUI-Tester reuses it"
    assert requests.index(("scripted-feedback", 4)) < requests.index(("scripted-coder", 0)), (
        "the instruction was answered while the coder's slower reply was still pending"
    )
    state = await final_state(tmp_path / "webgen.db", "early")
    assert state["test_instruction"] == INSTRUCTION
    tokens = state["steps"][0]["tokens"]
    assert tokens["test_instruction"]["calls"] == 1 and tokens["generator"]["calls"] == 1
