"""The LangGraph internals of checkpoints/pregel.py, pinned against the installed LangGraph.

Each test runs a tiny real graph (in-memory checkpointer) and checks that LangGraph still uses the
name the adapter assumes; an upgrade that renames one fails here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import get_runtime
from langgraph.types import interrupt
from typing_extensions import TypedDict

from webgen_agent.checkpoints.pregel import (
    ERROR_CHANNEL,
    INTERRUPT_CHANNEL,
    RETURN_CHANNEL,
    RUNTIME_CONFIG_KEY,
    kept_task,
    waits_before,
    with_runtime_context,
)


class State(TypedDict, total=False):
    count: int


@dataclass
class Limits:
    stop_at: int


class WritesSeen(InMemorySaver):
    """Remembers the channels of every pending write (what the runs-table mixin reads), and where each went."""

    def __init__(self) -> None:
        super().__init__()
        self.channels: list[str] = []
        self.keys: list[tuple[str, str, str, str]] = []  # (namespace, checkpoint id, task id, channel)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self.channels += [channel for channel, _ in writes]
        where = config["configurable"]
        self.keys += [(where["checkpoint_ns"], where["checkpoint_id"], task_id, channel) for channel, _ in writes]
        await super().aput_writes(config, writes, task_id, task_path)


def _count(state: State) -> State:
    return {"count": state.get("count", 0) + 1}


def _route(state: State) -> Literal["last", "__end__"]:
    """Like the project's routers: the limit comes from the runtime's context."""
    return "last" if state.get("count", 0) >= get_runtime(Limits).context.stop_at else END


def _graph(last: Any = _count) -> StateGraph:
    builder = StateGraph(State, context_schema=Limits)
    builder.add_node("first", _count)
    builder.add_node("last", last)
    builder.add_edge(START, "first")
    builder.add_conditional_edges("first", _route)
    builder.add_edge("last", END)
    return builder


def _config(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


async def test_a_checkpoint_paused_before_a_node_holds_its_trigger_channel():
    saver = InMemorySaver()
    graph = _graph().compile(checkpointer=saver, interrupt_before=["last"])
    await graph.ainvoke({"count": 0}, _config("t"), context=Limits(stop_at=1))
    saved = await saver.aget_tuple(_config("t"))
    assert saved is not None
    assert waits_before(saved.checkpoint["channel_values"], "last")
    assert (await graph.aget_state(_config("t"))).next == ("last",)


async def test_update_state_routes_with_the_context_of_the_runtime_config_key():
    graph = _graph().compile(checkpointer=InMemorySaver(), interrupt_before=["last"])
    config = _config("u")
    await graph.ainvoke({"count": 5}, config, context=Limits(stop_at=100))
    assert (await graph.aget_state(config)).next == ()  # 6 < 100: ended
    await graph.aupdate_state(with_runtime_context(config, Limits(stop_at=1)), {"count": 5}, as_node="first")
    assert (await graph.aget_state(config)).next == ("last",)  # the router read stop_at=1
    assert RUNTIME_CONFIG_KEY in with_runtime_context(config, Limits(stop_at=1))["configurable"]


async def test_a_failed_task_and_an_interrupt_are_written_on_the_assumed_channels():
    def fail(state: State) -> State:
        raise RuntimeError("boom")

    failing = WritesSeen()
    with pytest.raises(RuntimeError, match="boom"):
        await _graph(fail).compile(checkpointer=failing).ainvoke({"count": 0}, _config("e"), context=Limits(0))
    assert ERROR_CHANNEL in failing.channels

    def ask(state: State) -> State:
        return {"count": interrupt({"kind": "review"})}

    asking = WritesSeen()
    await _graph(ask).compile(checkpointer=asking).ainvoke({"count": 0}, _config("i"), context=Limits(0))
    assert INTERRUPT_CHANNEL in asking.channels


class Answers(TypedDict):
    answers: list[str]


async def test_a_node_in_a_graph_run_keeps_a_task_and_a_node_called_by_hand_is_told_it_cannot() -> None:
    """``nodes.coding.in_graph_run`` (public ``Runtime.execution_info``) says where the coder's reply can
    be a kept task: in a graph run, where the task's result reaches the checkpoint; not in a node
    called by hand (tests/node_harness.py), where calling a task fails."""
    from langgraph.func import task
    from langgraph.runtime import Runtime

    from webgen_agent.nodes.coding import in_graph_run

    @task
    async def reply(text: str) -> str:
        return text.upper()

    seen: list[bool] = []

    async def node(state: Answers, runtime: Runtime) -> dict[str, list[str]]:
        seen.append(in_graph_run(runtime))
        return {"answers": [await reply("hi")]}

    saver = InMemorySaver()
    graph = StateGraph(Answers).add_node("node", node).add_edge(START, "node").compile(checkpointer=saver)
    out = await graph.ainvoke({"answers": []}, {"configurable": {"thread_id": "kept"}})
    assert seen == [True] and out["answers"] == ["HI"]
    kept = [w for writes in saver.writes.values() for w in writes.values() if w[1] == "__return__"]
    assert [w[2] for w in kept] and all(saver.serde.loads_typed(w[2]) == "HI" for w in kept), kept

    by_hand = Runtime(context=None)  # as the node harness builds it
    assert not in_graph_run(by_hand)
    with pytest.raises(RuntimeError):  # what a kept task would meet there
        await reply("hi")


async def test_a_kept_task_result_is_written_where_langgraph_files_the_task_s_own():
    @kept_task
    async def reply(n: int) -> int:
        return n + 1

    async def ask(state: State) -> State:
        return {"count": await reply(state.get("count", 0))}

    saver = WritesSeen()
    await _graph(ask).compile(checkpointer=saver).ainvoke({"count": 0}, _config("k"), context=Limits(0))
    returned = [key for key in saver.keys if key[3] == RETURN_CHANNEL]
    # Once by kept_task (keep_task_result), once by LangGraph: the same key (the saver keeps the first).
    assert len(returned) == 2 and returned[0] == returned[1], returned
