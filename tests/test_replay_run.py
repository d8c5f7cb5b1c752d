"""A scripted run where a later edit breaks a function that worked: the replay catches it at that step."""

from __future__ import annotations

import pytest

from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.report.html import render_report
from webgen_agent.apps.report.model import load_report
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.export import rewards_records
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.checkpoints.trajectories import load_trajectories
from webgen_agent.checkpoints.views import ExportOptions
from webgen_agent.graph.api import run_requirement
from webgen_agent.graph.history import recorded_tests, run_history
from webgen_agent.tools.replay.views import RecordedTest

REQUIREMENT = "A todo app: add todos, mark them done, and show how many there are and how many are done."


@pytest.mark.e2e
async def test_a_broken_function_is_caught_by_replay_at_the_step_that_breaks_it(
    tmp_path, chromium_path, vite_template
) -> None:
    with ScriptedServer(Scenario.load(scenario_path("replay"))) as server:
        result = await run_requirement(
            REQUIREMENT,
            context=scripted_context(server.base_url, max_steps=6, gui_max_actions=4),
            run_id="replay",
            out_dir=tmp_path / "out",
            db_path=tmp_path / "webgen.db",
        )
        agent_steps = sum(r.agent_step for r in server.requests)
    state = await final_state(tmp_path / "webgen.db", "replay")
    steps = state["steps"]
    assert result.status == "finished" and [s["action"] for s in steps] == [
        "edit", "screenshot_validated", "edit", "edit", "edit"
    ]  # fmt: skip
    # Step 0's GUI test (on the coder's signal) ran the agent and was recorded.
    assert steps[0]["gui_passed"] is True and steps[0]["gui_run"]
    (ref,) = state["replay_tests"]
    assert ref["name"] == "step-0" and ref["covers_all"] is True
    blobs = BlobStore(tmp_path / "webgen.db")
    test = RecordedTest.model_validate(blobs.get_json(ref["hash"]))
    # The elements browser-use acted on, as role and name (never its element index).
    targets = [s.target.describe() for s in test.steps if s.kind in ("fill", "click") and s.target]
    assert targets == ['textbox "What needs doing?"', 'button "Add item"', 'button "Mark Buy milk done"']
    assert [s.kind for s in test.steps if not s.kind.startswith("expect")] == ["goto", "fill", "click", "click"]
    # Step 2 kept both functions: its replay passed (its page graded 3: no GUI test).
    assert steps[2]["replay"]["passed"] == 1 and steps[2]["gui_passed"] is None
    # Step 3 broke marking done: caught by the replay at that step, no agent run for it.
    broken = steps[3]["replay"]
    assert broken["failed"] == 1 and broken["passed"] == 0
    regression = broken["regressions"][0]
    assert regression.startswith("Recorded test 'step-0' (it passed at step 0) now fails at step 8: expect text")
    assert "Call log" not in regression and "(the page showed: My Todos Plan your day" in regression
    assert steps[3]["gui_passed"] is False and steps[3]["gui_run"] is None
    assert steps[3]["gui_suggestions"] == broken["regressions"]
    (verdict,) = blobs.get_json(broken["verdicts"])
    assert verdict["failed_action"] == test.steps[verdict["failed_step"]].describe()
    assert verdict["status"] == "failed" and blobs.get(verdict["screenshot"]).startswith(b"\x89PNG")
    feedback = blobs.get(steps[3]["feedback"]).decode()
    assert "Regressions: recorded tests of functions that worked" in feedback
    # Step 4 fixed it: the replay covers the test, the run finishes without another agent run.
    assert steps[4]["replay"]["passed"] == 1 and steps[4]["gui_passed"] is True and steps[4]["gui_run"] is None
    assert agent_steps == 3  # one GUI-agent run of three steps, for step 0 only

    # The replay verdicts as a training signal (the -replay rewards, docs/rewards.md).
    trajectories = await load_trajectories(tmp_path / "webgen.db")
    (plain,) = rewards_records(trajectories, options=ExportOptions(reward="step"))
    (grounded,) = rewards_records(trajectories, options=ExportOptions(reward="step-replay"))
    assert grounded.replay_scores[:5] == [None, None, 1.0, 0.0, 1.0]
    assert plain.rewards[2:5] == [3.0, 6.0, 10.0]  # screenshot + GUI grade (step 2 had no GUI test)
    assert grounded.rewards[2:5] == [8.0, 4.0, 10.0]  # step 2 kept both functions; step 3 broke one

    # Listed in history and the report.
    assert [t.name for t in await recorded_tests("replay", db_path=tmp_path / "webgen.db")] == ["step-0"]
    rows, _ = await run_history("replay", db_path=tmp_path / "webgen.db")
    assert [r.replay for r in rows[:5]] == ["", "", "1 passed", "1 failed", "1 passed"]
    html = render_report(await load_report("replay", db_path=tmp_path / "webgen.db"))
    assert "Recorded GUI tests" in html and "step-0: failed at expect text" in html and "step-0 when it failed" in html
