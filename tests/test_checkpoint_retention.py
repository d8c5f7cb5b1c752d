"""The checkpointer deletes a run's checkpoints (the server's rollback of a cancelled run) and prunes
threads, on both stores, in the async and the sync forms the LangGraph server may call."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from webgen_agent.checkpoints.saver import open_checkpointer


class Counted(TypedDict):
    seen: Annotated[list[str], operator.add]


def _graph(saver: BaseCheckpointSaver) -> Any:
    builder = StateGraph(Counted)
    builder.add_node("first", lambda state: {"seen": ["first"]})
    builder.add_node("second", lambda state: {"seen": ["second"]})
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder.compile(checkpointer=saver)


async def _run(graph: Any, thread: str, run_id: str) -> None:
    # The server puts each run's id in its config's metadata, hence in its checkpoints'.
    config = {"configurable": {"thread_id": thread}, "metadata": {"run_id": run_id}}
    await graph.ainvoke({"seen": [run_id]}, config)


async def _checkpoints(saver: BaseCheckpointSaver, thread: str) -> list[Any]:
    return [found async for found in saver.alist({"configurable": {"thread_id": thread}})]


async def test_deleting_a_run_leaves_the_thread_as_before_it(db_target: str) -> None:
    async with open_checkpointer(db_target) as saver:
        graph = _graph(saver)
        await _run(graph, "t1", "run-a")
        before = await _checkpoints(saver, "t1")
        await _run(graph, "t1", "run-b")
        assert len(await _checkpoints(saver, "t1")) > len(before)
        await saver.adelete_for_runs(["run-b"])
        after = await _checkpoints(saver, "t1")
        assert [c.checkpoint["id"] for c in after] == [c.checkpoint["id"] for c in before]
        state = await graph.aget_state({"configurable": {"thread_id": "t1"}})
        assert state.values["seen"] == ["run-a", "first", "second"]
        # The sync form, from another thread, as a sync caller would.
        await asyncio.to_thread(saver.delete_for_runs, ["run-a"])
        assert await _checkpoints(saver, "t1") == []


async def test_pruning_keeps_the_latest_checkpoint_or_deletes_the_thread(db_target: str) -> None:
    async with open_checkpointer(db_target) as saver:
        graph = _graph(saver)
        for thread in ("t1", "t2", "t3"):
            await _run(graph, thread, f"run-{thread}")
        latest = (await _checkpoints(saver, "t1"))[0]
        await saver.aprune(["t1"], strategy="keep_latest")
        kept = await _checkpoints(saver, "t1")
        assert [c.checkpoint["id"] for c in kept] == [latest.checkpoint["id"]]
        state = await graph.aget_state({"configurable": {"thread_id": "t1"}})
        assert state.values["seen"] == ["run-t1", "first", "second"]
        await saver.aprune(["t2"], strategy="delete")
        assert await _checkpoints(saver, "t2") == []
        await asyncio.to_thread(saver.prune, ["t3"], strategy="delete")
        assert await _checkpoints(saver, "t3") == []
        assert len(await _checkpoints(saver, "t1")) == 1  # other threads untouched
