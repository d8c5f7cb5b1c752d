"""The workflow: nodes joined by conditional edges; the routers live in ``graph/routers.py``.

START -> generator -> executor -> screenshot_judge -> gui_tester -> finalize, with critic -> refiner
closing the loop and backtrack after ``error_limit`` consecutive errored steps (WebGen-Agent). The
same graph holds WebLoop's checker and execution-free code_critic; the routers choose the edges
by the run's ``loop`` (docs/loops.md). A run whose budget is spent pauses before the ``budget``
node between two coder steps (docs/costs.md).
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Checkpointer

from webgen_agent.core.context import AgentContext
from webgen_agent.core.state import AgentState, InputState, OutputState
from webgen_agent.graph.routers import (
    route_after_backtrack,
    route_after_budget,
    route_after_checker,
    route_after_code_critic,
    route_after_coder,
    route_after_critic,
    route_after_executor,
    route_after_gui,
    route_after_judge,
)
from webgen_agent.nodes.backtrack import backtrack
from webgen_agent.nodes.budget import budget
from webgen_agent.nodes.checker import checker
from webgen_agent.nodes.code_critic import code_critic
from webgen_agent.nodes.common import GraphNode, Update
from webgen_agent.nodes.critic import critic
from webgen_agent.nodes.executor import executor
from webgen_agent.nodes.finalize import finalize
from webgen_agent.nodes.generator import generator
from webgen_agent.nodes.gui_tester import gui_tester
from webgen_agent.nodes.readable import readable_changes
from webgen_agent.nodes.refiner import refiner
from webgen_agent.nodes.screenshot_judge import screenshot_judge

NODES = (
    generator,
    executor,
    screenshot_judge,
    gui_tester,
    critic,
    refiner,
    backtrack,
    finalize,
    checker,
    code_critic,
    budget,
)
# Where each node may go next: its router. The router's ``Literal`` return type is its list of
# destinations (``destinations``): the path map handed to LangGraph (what Studio draws;
# docs/architecture.md lists the same, tests/test_graph_drawing.py compares them, and
# tests/test_routing.py checks that every router returns only what its type names).
ROUTES: dict[str, Callable[..., str]] = {
    "generator": route_after_coder,
    "refiner": route_after_coder,
    "executor": route_after_executor,
    "screenshot_judge": route_after_judge,
    "gui_tester": route_after_gui,
    "critic": route_after_critic,
    "backtrack": route_after_backtrack,
    "checker": route_after_checker,
    "code_critic": route_after_code_critic,
    "budget": route_after_budget,
}


def destinations(router: Callable[..., str]) -> tuple[str, ...]:
    """The nodes ``router`` may send a run to: the members of its ``Literal`` return type."""
    returned = typing.get_type_hints(router)["return"]
    if typing.get_origin(returned) is not typing.Literal:
        raise TypeError(f"{router.__name__} must return a Literal of node names, not {returned}")
    return typing.get_args(returned)


# A run pauses before these nodes (LangGraph interrupt); resuming the thread runs them.
PAUSE_BEFORE = ["budget"]


def with_readable_state(node: GraphNode) -> GraphNode:
    """The node, its update completed with the readable keys it changed (nodes/readable.py: what Studio shows)."""

    @functools.wraps(node)
    async def run(state: AgentState, runtime: Runtime[AgentContext]) -> Update:
        update = await node(state, runtime)
        return {**update, **await readable_changes(state, update)}

    return run


def build_graph() -> StateGraph[AgentState, AgentContext, InputState, OutputState]:
    builder = StateGraph(AgentState, context_schema=AgentContext, input_schema=InputState, output_schema=OutputState)
    for node in NODES:
        builder.add_node(node.__name__, with_readable_state(node))  # type: ignore[call-overload]  # a decorated async node
    builder.add_edge(START, "generator")
    for source, router in ROUTES.items():
        builder.add_conditional_edges(source, router, path_map=list(destinations(router)))
    builder.add_edge("finalize", END)
    return builder


def compile_graph(
    checkpointer: Checkpointer = None,
) -> CompiledStateGraph[AgentState, AgentContext, InputState, OutputState]:
    """The compiled workflow; pass an async checkpointer for resumable runs.

    A run whose budget is spent pauses before the ``budget`` node (nodes/budget.py).
    """
    return build_graph().compile(checkpointer=checkpointer, interrupt_before=PAUSE_BEFORE, name="webgen-agent")
