"""The workflow: nodes joined by conditional edges; routing in named pure functions.

START -> generator -> executor -> screenshot_judge -> gui_tester -> finalize, with critic -> refiner
closing the loop and backtrack after ``error_limit`` consecutive errored steps.
"""

from __future__ import annotations

from typing import Literal, Protocol, get_args, get_type_hints

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import get_runtime
from langgraph.types import Checkpointer

from webgen_agent.core.context import AgentContext
from webgen_agent.core.state import AgentState, InputState, OutputState
from webgen_agent.nodes.backtrack import backtrack
from webgen_agent.nodes.critic import critic
from webgen_agent.nodes.executor import executor
from webgen_agent.nodes.finalize import finalize
from webgen_agent.nodes.generator import generator
from webgen_agent.nodes.gui_tester import gui_tester
from webgen_agent.nodes.refiner import refiner
from webgen_agent.nodes.screenshot_judge import screenshot_judge


class RoutingError(RuntimeError):
    """The state reached a router in a shape it does not expect (a bug, not a model failure)."""


class RoutingLimits(Protocol):
    """What routers read from the run context (AgentContext satisfies it)."""

    max_steps: int
    error_limit: int
    backtrack: bool
    appearance_threshold: int


# Used only when a router runs outside a run (e.g. a state update from Studio without context).
DEFAULT_LIMITS: RoutingLimits = AgentContext.model_construct(
    **{
        name: field.default
        for name, field in AgentContext.model_fields.items()
        if name in RoutingLimits.__annotations__
    }
)


def _should_backtrack(state: AgentState, context: RoutingLimits) -> bool:
    return context.backtrack and state.get("consecutive_errors", 0) >= context.error_limit


def _budget_spent(state: AgentState, context: RoutingLimits) -> bool:
    return len(state.get("steps") or []) >= context.max_steps


def route_after_coder(
    state: AgentState, context: RoutingLimits
) -> Literal["executor", "gui_tester", "critic", "backtrack", "finalize"]:
    step = state["steps"][state["current"]]
    action = step.get("action")
    if action == "edit":
        return "executor"
    if action == "finish":
        return "finalize"
    if action == "screenshot_validated":
        tested = state["steps"][step["tests_step"]]
        return "gui_tester" if (tested.get("execution") or {}).get("ok") else "critic"
    if action == "malformed":
        return "backtrack" if _should_backtrack(state, context) else "critic"
    raise RoutingError(f"step {step.get('index')} has unknown action {action!r}")


def route_after_executor(
    state: AgentState, context: RoutingLimits
) -> Literal["screenshot_judge", "critic", "backtrack"]:
    step = state["steps"][state["current"]]
    execution = step.get("execution")
    if execution is None:
        raise RoutingError(f"step {step['index']} left the executor without an execution result")
    if execution.get("ok"):
        return "screenshot_judge"
    return "backtrack" if _should_backtrack(state, context) else "critic"


def route_after_judge(state: AgentState, context: RoutingLimits) -> Literal["gui_tester", "critic", "backtrack"]:
    step = state["steps"][state["current"]]
    if step.get("screenshot_score", 0) >= context.appearance_threshold:
        return "gui_tester"
    return "backtrack" if _should_backtrack(state, context) else "critic"


def route_after_gui(state: AgentState, context: RoutingLimits) -> Literal["finalize", "critic"]:
    tested = state["steps"][state["edit_step"]]
    if tested.get("gui_passed") and tested.get("screenshot_score", 0) >= context.appearance_threshold:
        return "finalize"
    return "critic"


def route_after_critic(state: AgentState, context: RoutingLimits) -> Literal["refiner", "finalize"]:
    return "finalize" if _budget_spent(state, context) else "refiner"


def route_after_backtrack(state: AgentState, context: RoutingLimits) -> Literal["refiner", "generator", "finalize"]:
    if _budget_spent(state, context):
        return "finalize"
    return "refiner" if state.get("messages") else "generator"


def _with_context(router):
    """Adapt a pure (state, limits) router to LangGraph's call, reading the run's context."""

    def route(state: AgentState) -> str:
        runtime = get_runtime()
        context = runtime.context if runtime is not None and runtime.context is not None else DEFAULT_LIMITS
        return router(state, context)

    route.__name__ = router.__name__
    return route


def _destinations(router) -> list[str]:
    """The Literal return type of a router: the edges Studio draws."""
    return list(get_args(get_type_hints(router)["return"]))


def _route(builder: StateGraph, source: str, router) -> None:
    builder.add_conditional_edges(source, _with_context(router), _destinations(router))


def build_graph() -> StateGraph:
    builder = StateGraph(AgentState, context_schema=AgentContext, input_schema=InputState, output_schema=OutputState)
    builder.add_node("generator", generator)
    builder.add_node("executor", executor)
    builder.add_node("screenshot_judge", screenshot_judge)
    builder.add_node("gui_tester", gui_tester)
    builder.add_node("critic", critic)
    builder.add_node("refiner", refiner)
    builder.add_node("backtrack", backtrack)
    builder.add_node("finalize", finalize)

    builder.add_edge(START, "generator")
    _route(builder, "generator", route_after_coder)
    _route(builder, "refiner", route_after_coder)
    _route(builder, "executor", route_after_executor)
    _route(builder, "screenshot_judge", route_after_judge)
    _route(builder, "gui_tester", route_after_gui)
    _route(builder, "critic", route_after_critic)
    _route(builder, "backtrack", route_after_backtrack)
    builder.add_edge("finalize", END)
    return builder


def compile_graph(checkpointer: Checkpointer = None) -> CompiledStateGraph:
    """The compiled workflow; pass an async checkpointer for resumable runs."""
    return build_graph().compile(checkpointer=checkpointer, name="webgen-agent")
