"""The whole loop against a real OpenAI-compatible server: ``transformers serve`` with a tiny
random-weight model built here (no downloads). It answers nonsense, ignores ``response_format`` and
runs into its length limit on every structured answer, as a badly matched local model does; the run
must spend its step budget and finish, without a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tiny_model import TransformersServer, build_in_server_venv, missing
from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Rule, Scenario
from webgen_agent.checkpoints.history import final_state
from webgen_agent.core.context import AgentContext, ModelSettings
from webgen_agent.graph.api import run_requirement

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(missing() is not None, reason=str(missing()))]

REQUIREMENT = "A coffee-shop landing page with a button that shows the opening hours."


@pytest.fixture(scope="module")
def real_server(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("tiny-model")
    build_in_server_venv(folder / "model")
    with TransformersServer(folder / "model", folder / "serve.log") as server:
        yield server


def real_role(server: TransformersServer) -> ModelSettings:
    # max_tokens keeps answers short: the server's own default is 1024 tokens (~20 s on a CPU).
    return ModelSettings(
        model=server.model,
        base_url=server.base_url,
        api_key="none",
        max_tokens=16,
        patience_s=30.0,
        retry_initial_s=0.2,
        retry_max_s=1.0,
        timeout_s=120.0,
    )


async def test_every_role_on_a_nonsense_model_spends_the_step_budget(tmp_path: Path, real_server) -> None:
    role = real_role(real_server)
    context = AgentContext(coder=role.model_copy(update={"max_tokens": 48}), vlm=role, feedback=role, max_steps=2)
    result = await run_requirement(
        REQUIREMENT, context=context, run_id="nonsense", out_dir=tmp_path / "out", db_path=tmp_path / "webgen.db"
    )
    assert result.status == "finished"
    state = await final_state(tmp_path / "webgen.db", "nonsense")
    assert len(state["steps"]) == 2
    assert all(step["action"] == "malformed" and step["errored"] for step in state["steps"])
    # The test instruction asked alongside the first coder call could not be had (length limit,
    # no JSON): the requirement itself stands in.
    assert REQUIREMENT in state["test_instruction"]


async def test_judge_gui_agent_and_verdict_on_a_nonsense_model(tmp_path: Path, real_server, chromium_path) -> None:
    # The coder is scripted: it writes a real page, then asks for the GUI test itself (the grade of a
    # nonsense judge never reaches the threshold). Vision and feedback are the nonsense model.
    landing = Scenario.load(scenario_path("landing"))
    coder = [
        Rule.model_validate({"model": "scripted-coder", "turn": 0, "content": landing.rules[0].content}),
        Rule.model_validate({"model": "scripted-coder", "content": "screenshot_validated"}),
    ]
    with ScriptedServer(Scenario(name="real-judges", rules=coder)) as scripted:
        context = scripted_context(scripted.base_url, max_steps=2, gui_max_actions=2, critic="llm")
        role = real_role(real_server)
        context = context.model_copy(update={"vlm": role, "feedback": role})
        result = await run_requirement(
            REQUIREMENT, context=context, run_id="judged", out_dir=tmp_path / "out", db_path=tmp_path / "webgen.db"
        )
    assert result.status == "finished"
    state = await final_state(tmp_path / "webgen.db", "judged")
    edit, validated = state["steps"]
    assert (edit["action"], validated["action"]) == ("edit", "screenshot_validated")
    # The grade could not be had (nonsense, no JSON): score 0 and the reason, for the coder to see.
    assert edit["screenshot_score"] == 0 and "could not be graded" in edit["description"]
    # The GUI agent ran on the page with the nonsense model and its run was judged (badly): score 1.
    assert edit["gui_run"] and edit["gui_score"] == 1 and edit["gui_passed"] is False
    assert "could not be judged" in edit["gui_suggestions"][0]
