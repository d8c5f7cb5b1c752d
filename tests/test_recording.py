"""The runs table kept by the checkpointer (what LangGraph's server uses), on both stores.

The graph is run the way the server runs it: compiled with the project's checkpointer opened with
``record_runs=True``, called with a thread id and a context, no ``run_requirement`` around it.
The small static-site scenario (``landing``) with a one-token budget pauses at the budget after the
first step; the thread is then continued with no budget, as a Studio user would after raising it,
and finishes. The runs table follows each stage, and the CLI's ``history`` reads the thread.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.runs import RunIndex, RunRecord
from webgen_agent.checkpoints.saver import open_checkpointer
from webgen_agent.graph.builder import compile_graph
from webgen_agent.graph.history import run_history
from webgen_agent.nodes.resources import Resources, use_resources

pytestmark = pytest.mark.e2e

REQUIREMENT = "A one-page website for a coffee shop with its menu and a button that reveals the opening hours."


async def test_a_thread_run_without_a_driver_keeps_its_runs_row(
    tmp_path: Path, chromium_path: str, db_target: str
) -> None:
    def row() -> RunRecord | None:
        return RunIndex(db_target).get("served")

    config = {"configurable": {"thread_id": "served"}}
    async with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        context = scripted_context(
            server.base_url, max_steps=6, runs_dir=str(tmp_path / "runs"), chromium=chromium_path, budget_tokens=1
        )
        resources = await asyncio.to_thread(Resources, db_target, chromium=chromium_path)
        async with use_resources(resources), open_checkpointer(db_target, record_runs=True) as saver:
            graph = compile_graph(saver)
            await graph.ainvoke({"requirement": REQUIREMENT}, config, context=context)
            paused = await asyncio.to_thread(row)
            state = (await graph.aget_state(config)).values
            await graph.ainvoke(None, config, context=context.model_copy(update={"budget_tokens": None}))
            finished = await asyncio.to_thread(row)
            final = (await graph.aget_state(config)).values
    history, _ = await run_history("served", db_path=db_target)

    assert paused is not None and finished is not None
    assert (paused.status, paused.steps, paused.requirement) == ("budget", len(state["steps"]), REQUIREMENT)
    assert paused.tokens > 1 and paused.out_dir == state["out_dir"]
    assert (finished.status, finished.chosen_step, finished.steps) == ("finished", 1, len(final["steps"]))
    assert finished.best_screenshot == final["steps"][1]["screenshot_score"] > 0
    assert finished.tokens > paused.tokens and finished.cost_usd is None  # no prices given: unknown, not 0
    assert [h.index for h in history] == list(range(len(final["steps"])))


async def test_a_failing_node_marks_the_thread_failed(tmp_path: Path, db_target: str) -> None:
    config = {"configurable": {"thread_id": "broken"}}
    context = scripted_context("http://127.0.0.1:9/v1", runs_dir=str(tmp_path / "runs"))
    resources = await asyncio.to_thread(Resources, db_target)
    async with use_resources(resources), open_checkpointer(db_target, record_runs=True) as saver:
        with pytest.raises(KeyError, match="requirement"):  # an input without the requirement
            await compile_graph(saver).ainvoke({"group_id": "g"}, config, context=context)
    record = await asyncio.to_thread(RunIndex(db_target).get, "broken")
    assert record is not None and record.status == "failed" and "requirement" in record.error
    assert record.group_id == "g"


async def test_a_first_checkpoint_and_an_error_recorded_at_once_keep_the_group(db_target: str) -> None:
    """LangGraph saves a thread's first checkpoint and its task's error concurrently: the row is made
    once, so neither insert overwrites the other's fields (the group was lost now and then)."""
    async with open_checkpointer(db_target, record_runs=True) as saver:
        for attempt in range(50):
            thread = f"t{attempt}"
            await asyncio.gather(
                saver._record(thread, {"status": "failed", "error": "KeyError: 'requirement'"}),
                saver._record(thread, {"status": "running", "group_id": "g", "requirement": "A page."}),
            )
    rows = await asyncio.to_thread(RunIndex(db_target).list)
    assert [(row.group_id, row.requirement) for row in rows] == [("g", "A page.")] * 50
