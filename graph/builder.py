"""The workflow: nodes joined by conditional edges; the routers live in ``graph/routers.py``.

START -> generator -> executor -> screenshot_judge -> gui_tester -> finalize, with critic -> refiner
closing the loop and backtrack after ``error_limit`` consecutive errored steps (WebGen-Agent). The
same graph holds WebLoop's checker and execution-free code_critic; the routers choose the edges
by the run's ``loop`` (docs/loops.md). A run whose budget is spent pauses before the ``budget``
node between two coder steps (docs/costs.md).
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
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
from webgen_agent.nodes.critic import critic
from webgen_agent.nodes.executor import executor
from webgen_agent.nodes.finalize import finalize
from webgen_agent.nodes.generator import generator
from webgen_agent.nodes.gui_tester import gui_tester
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
# A run pauses before these nodes (LangGraph interrupt); resuming the thread runs them.
PAUSE_BEFORE = ["budget"]


def build_graph() -> StateGraph[AgentState, AgentContext, InputState, OutputState]:
    builder = StateGraph(AgentState, context_schema=AgentContext, input_schema=InputState, output_schema=OutputState)
    for node in NODES:
        builder.add_node(node.__name__, node)  # type: ignore[call-overload]  # a decorated async node
    # Each router's Literal return type names its destinations (what Studio draws).
    builder.add_edge(START, "generator")
    builder.add_conditional_edges("generator", route_after_coder)
    builder.add_conditional_edges("refiner", route_after_coder)
    builder.add_conditional_edges("executor", route_after_executor)
    builder.add_conditional_edges("screenshot_judge", route_after_judge)
    builder.add_conditional_edges("gui_tester", route_after_gui)
    builder.add_conditional_edges("critic", route_after_critic)
    builder.add_conditional_edges("backtrack", route_after_backtrack)
    builder.add_conditional_edges("checker", route_after_checker)
    builder.add_conditional_edges("code_critic", route_after_code_critic)
    builder.add_conditional_edges("budget", route_after_budget)
    builder.add_edge("finalize", END)
    return builder


def compile_graph(
    checkpointer: Checkpointer = None,
) -> CompiledStateGraph[AgentState, AgentContext, InputState, OutputState]:
    """The compiled workflow; pass an async checkpointer for resumable runs.

    A run whose budget is spent pauses before the ``budget`` node (nodes/budget.py).
    """
    return build_graph().compile(checkpointer=checkpointer, interrupt_before=PAUSE_BEFORE, name="webgen-agent")
