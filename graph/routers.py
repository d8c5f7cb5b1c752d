"""Where the loop goes after each node: named pure functions of the state and the run's limits.

Each returns a ``Literal`` of its destinations; LangGraph reads that return type to draw the edges
(Studio) and to check the route. The run's limits come from the LangGraph runtime's context.
"""

from __future__ import annotations

from typing import Literal, Protocol

from langgraph.runtime import Runtime

from webgen_agent.core.context import AgentContext, Profile
from webgen_agent.core.state import AgentState
from webgen_agent.nodes.profile import rules_for


class RoutingError(RuntimeError):
    """The state reached a router in a shape it does not expect (a bug, not a model failure)."""


class RoutingLimits(Protocol):
    """What routers read from the run context (AgentContext satisfies it)."""

    max_steps: int
    error_limit: int
    backtrack: bool
    appearance_threshold: int
    profile: Profile


# Used only when a router runs outside a run (e.g. a state update from Studio without context).
DEFAULT_LIMITS: RoutingLimits = AgentContext.model_construct(
    **{
        name: field.default
        for name, field in AgentContext.model_fields.items()
        if name in RoutingLimits.__annotations__
    }
)


def limits_of(runtime: Runtime[AgentContext] | None) -> RoutingLimits:
    context = runtime.context if runtime is not None else None
    return context if context is not None else DEFAULT_LIMITS


def _should_backtrack(state: AgentState, context: RoutingLimits) -> bool:
    return context.backtrack and state.get("consecutive_errors", 0) >= context.error_limit


def _budget_spent(state: AgentState, context: RoutingLimits) -> bool:
    return len(state.get("steps") or []) >= context.max_steps


def route_after_coder(
    state: AgentState, runtime: Runtime[AgentContext]
) -> Literal["executor", "gui_tester", "critic", "backtrack", "finalize"]:
    context = limits_of(runtime)
    step = state["steps"][state["current"]]
    action = step["action"]
    if action == "edit":
        return "executor"
    if action == "finish":
        return "finalize"
    if action == "screenshot_validated":
        if step["tests_step"] is None:
            return "backtrack" if _should_backtrack(state, context) else "critic"  # nothing to test yet
        if rules_for(context.profile).judging == "upstream":
            return "gui_tester"  # upstream starts the site again for every GUI test
        execution = state["steps"][step["tests_step"]].get("execution")
        return "gui_tester" if execution and execution["ok"] else "critic"
    if action == "malformed":
        return "backtrack" if _should_backtrack(state, context) else "critic"
    raise RoutingError(f"step {step.get('index')} has unknown action {action!r}")


def route_after_executor(
    state: AgentState, runtime: Runtime[AgentContext]
) -> Literal["screenshot_judge", "critic", "backtrack"]:
    context = limits_of(runtime)
    step = state["steps"][state["current"]]
    execution = step.get("execution")
    if execution is None:
        raise RoutingError(f"step {step['index']} left the executor without an execution result")
    if execution.get("ok"):
        return "screenshot_judge"
    if rules_for(context.profile).judging == "upstream" and step.get("screenshot"):
        return "screenshot_judge"  # upstream grades every captured screenshot, errors or not
    return "backtrack" if _should_backtrack(state, context) else "critic"


def route_after_judge(
    state: AgentState, runtime: Runtime[AgentContext]
) -> Literal["gui_tester", "critic", "backtrack"]:
    context = limits_of(runtime)
    step = state["steps"][state["current"]]
    if rules_for(context.profile).gui_on_threshold and step["screenshot_score"] >= context.appearance_threshold:
        return "gui_tester"
    return "backtrack" if _should_backtrack(state, context) else "critic"


def route_after_gui(state: AgentState, runtime: Runtime[AgentContext]) -> Literal["finalize", "critic", "backtrack"]:
    context = limits_of(runtime)
    edit_step = state.get("edit_step")
    if edit_step is None:
        raise RoutingError("a GUI test ended with no code-edit step under test")
    tested = state["steps"][edit_step]
    rules = rules_for(context.profile)
    if rules.finish_on_gui_pass:
        if tested["gui_passed"] and tested["screenshot_score"] >= context.appearance_threshold:
            return "finalize"
        return "critic"
    # Upstream: only the coder's finish ends the run; an errored GUI step counts toward a backtrack.
    return "backtrack" if _should_backtrack(state, context) else "critic"


def route_after_critic(state: AgentState, runtime: Runtime[AgentContext]) -> Literal["refiner", "finalize"]:
    context = limits_of(runtime)
    return "finalize" if _budget_spent(state, context) else "refiner"


def route_after_backtrack(
    state: AgentState, runtime: Runtime[AgentContext]
) -> Literal["refiner", "generator", "finalize"]:
    context = limits_of(runtime)
    if _budget_spent(state, context):
        return "finalize"
    return "refiner" if state.get("messages") else "generator"
