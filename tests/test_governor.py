"""The loop governor: a run that revisits a file tree or stalls goes back once, then stops early.

The rule (core/governor.py) on hand-built steps, the routers that consult it, and two scripted runs
through the real graph (static pages, real Chromium): one going in circles is sent back and then
stopped with its reason in run.json and ``history``; one that improves slowly is left alone.
"""

from __future__ import annotations

import asyncio
import html
import json
import subprocess
import sys
from pathlib import Path

import pytest

from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.report.html import write_report
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.history import final_state
from webgen_agent.core.context import AgentContext, ModelSettings
from webgen_agent.core.governor import governor_call, governor_verdict
from webgen_agent.graph.api import run_requirement
from webgen_agent.graph.routers import route_after_backtrack, route_after_critic

REQUIREMENT = "A notes page that shows the user's notes."


def ctx(**overrides: object) -> AgentContext:
    role = ModelSettings(model="m", base_url="http://x/v1")
    return AgentContext(coder=role, vlm=role, feedback=role, **overrides)  # type: ignore[arg-type]


def _criticised(state: dict, context: AgentContext) -> str:
    """Where the critic's router sends a run the critic node left (it records the governor's call)."""
    return route_after_critic({**state, "governor": governor_call(state, context)}, context)


def step(index: int, files: str | None, *, shot: int = 3, gui: int = 0, errored: bool = False, action: str = "edit"):
    return {
        "index": index,
        "action": action,
        "files": files,
        "screenshot_score": shot,
        "gui_score": gui,
        "errored": errored,
        "tests_step": None,
    }


def state(*steps: dict, events: list[dict] | None = None) -> dict:
    return {"steps": list(steps), "current": len(steps) - 1, "events": events or [], "messages": [{"role": "user"}]}


def test_a_revisited_file_tree_goes_back_once_then_stops() -> None:
    circling = state(step(0, "a"), step(1, "b"), step(2, "a"))
    verdict = governor_verdict(circling, ctx())
    assert verdict is not None and verdict.action == "backtrack"
    assert verdict.reason == "loop governor: step 2 has the same files as step 0"
    assert _criticised(circling, ctx()) == "backtrack"
    went_back = [{"kind": "backtrack", "after_step": 2, "target_step": 1, "reason": verdict.reason}]
    assert governor_verdict(state(*circling["steps"], events=went_back), ctx()) is None  # nothing new yet
    again = state(*circling["steps"], step(3, "b"), events=went_back)
    verdict = governor_verdict(again, ctx())
    assert verdict is not None and verdict.action == "stop"
    assert verdict.reason.startswith("loop governor: step 3 has the same files as step 1, after going back once")
    assert _criticised(again, ctx()) == "backtrack"  # the backtrack node records the stop
    stopped = {**again, "events": [*went_back, {"kind": "stop", "after_step": 3, "reason": verdict.reason}]}
    assert route_after_backtrack(stopped, ctx()) == "finalize"


def test_stall_steps_without_a_better_score_go_back_then_stop() -> None:
    plateau = [step(0, "a", shot=4, gui=2), *(step(i, f"f{i}", shot=4, gui=2) for i in range(1, 5))]
    assert governor_verdict(state(*plateau), ctx(stall_steps=5)) is None  # 4 steps since step 0
    stalled = state(*plateau, step(5, "f5", shot=3))
    verdict = governor_verdict(stalled, ctx(stall_steps=5))
    assert verdict is not None and verdict.action == "backtrack"
    assert verdict.reason == "loop governor: no better score in the 5 steps since step 0"
    went_back = [{"kind": "backtrack", "after_step": 5, "target_step": 0}]
    later = [step(i, f"f{i}", shot=4, gui=2) for i in range(6, 10)]
    assert governor_verdict(state(*stalled["steps"], *later, events=went_back), ctx(stall_steps=5)) is None
    verdict = governor_verdict(state(*stalled["steps"], *later, step(10, "f10"), events=went_back), ctx(stall_steps=5))
    assert verdict is not None and verdict.action == "stop"
    # A better score after going back starts the count again, and allows another backtrack later.
    better = [*stalled["steps"], step(6, "g", shot=5, gui=3)]
    assert governor_verdict(state(*better, events=went_back), ctx(stall_steps=5)) is None
    flat = [*better, *(step(i, f"h{i}", shot=4) for i in range(7, 11))]
    verdict = governor_verdict(state(*flat, step(11, "h11"), events=went_back), ctx(stall_steps=5))
    assert verdict is not None and verdict.action == "backtrack"


def test_a_run_that_keeps_improving_is_left_alone() -> None:
    steps = [step(i, f"f{i}", shot=3 + i // 3, gui=i // 2) for i in range(12)]
    for current in range(len(steps)):
        assert governor_verdict(state(*steps[: current + 1]), ctx(stall_steps=3)) is None


def test_the_upstream_profile_and_stall_steps_0_turn_it_off() -> None:
    circling = state(step(0, "a"), step(1, "b"), step(2, "a"))
    assert governor_verdict(circling, ctx(profile="upstream")) is None
    assert governor_verdict(circling, ctx(stall_steps=0)) is None
    assert _criticised(circling, ctx(profile="upstream")) == "refiner"
    # Without backtracking the governor stops at once.
    verdict = governor_verdict(circling, ctx(backtrack=False))
    assert verdict is not None and verdict.action == "stop" and "backtracking is off" in verdict.reason


def test_control_steps_count_but_only_edits_revisit() -> None:
    steps = [step(0, "a"), step(1, None, action="screenshot_validated"), step(2, "b")]
    steps[1]["tests_step"] = 0
    assert governor_verdict(state(*steps), ctx(stall_steps=5)) is None
    # A GUI grade found by a control step is progress at that step.
    steps[0]["gui_score"] = 4
    assert governor_verdict(state(*steps, step(3, "c"), step(4, "d"), step(5, "e")), ctx(stall_steps=5)) is None


async def _run(name: str, tmp_path: Path, **overrides: object):
    with ScriptedServer(Scenario.load(scenario_path(name))) as server:
        result = await run_requirement(
            REQUIREMENT,
            context=scripted_context(server.base_url, max_steps=10, **overrides),
            run_id=name,
            out_dir=tmp_path / "out",
            db_path=tmp_path / "runs.db",
        )
    return result, await final_state(tmp_path / "runs.db", name)


@pytest.mark.e2e
async def test_a_run_going_in_circles_is_sent_back_then_stopped(tmp_path, chromium_path) -> None:
    result, final = await _run("governor-circling", tmp_path)
    steps = final["steps"]
    assert len(steps) == 4  # of a budget of 10
    assert steps[2]["files"] == steps[0]["files"] and steps[3]["files"] == steps[1]["files"]
    backtrack, stop, finalize = final["events"]
    assert backtrack == {
        "kind": "backtrack",
        "after_step": 2,
        "target_step": 1,
        "reason": "loop governor: step 2 has the same files as step 0",
    }
    assert stop["kind"] == "stop" and stop["after_step"] == 3
    assert stop["reason"].startswith("loop governor: step 3 has the same files as step 1, after going back once")
    assert finalize["kind"] == "finalize" and result.status == "finished" and result.chosen_step is not None
    recorded = json.loads((tmp_path / "out" / "run.json").read_text())
    assert [e["kind"] for e in recorded["events"]] == ["backtrack", "stop", "finalize"]
    assert recorded["events"][1]["reason"] == stop["reason"]
    # ... and `history` and the report say why the run stopped.
    shown = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "webgen_agent", "history", "governor-circling", "--db", str(tmp_path / "runs.db")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert f"stop after step 3: {stop['reason'][:60]}" in " ".join(shown.stdout.split())
    report = await write_report("governor-circling", db_path=tmp_path / "runs.db", out=tmp_path / "report.html")
    assert html.escape(stop["reason"], quote=False) in report.read_text()


@pytest.mark.e2e
async def test_a_run_that_improves_slowly_is_not_stopped(tmp_path, chromium_path) -> None:
    result, final = await _run("governor-improving", tmp_path, stall_steps=3, appearance_threshold=5)
    assert [s["screenshot_score"] for s in final["steps"][:4]] == [3, 3, 3, 4]
    assert final["steps"][-1]["action"] == "finish"
    assert [e["kind"] for e in final["events"]] == ["finalize"]
    assert result.chosen_step == 3
