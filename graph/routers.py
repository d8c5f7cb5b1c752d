"""Where the loop goes after each node: named pure functions of the state and the run's limits.

Each returns a ``Literal`` of its destinations; LangGraph reads that return type to draw the edges
(Studio) and to check the route. Inside a run, LangGraph calls ``router(state)`` and the limits come
from the run's context (the LangGraph runtime); tests and callers may pass ``limits`` themselves.
(A ``runtime`` parameter would be injected by LangGraph, but not on every path: LangGraph's server
routes a state update without one, and the router would fail.)
"""

from __future__ import annotations

from typing import Literal, Protocol

from langgraph.runtime import get_runtime

from webgen_agent.core.context import AgentContext, LoopName, Profile
from webgen_agent.core.costs import budget_spent_by
from webgen_agent.core.error_count import error_count
from webgen_agent.core.profiles import EnvironmentName
from webgen_agent.core.rules import RunRules
from webgen_agent.core.state import AgentState, conversation_of


class RoutingError(RuntimeError):
    """The state reached a router in a shape it does not expect (a bug, not a model failure)."""


class RoutingLimits(Protocol):
    """What routers read from the run context (AgentContext satisfies it)."""

    max_steps: int
    error_limit: int
    backtrack: bool
    stall_steps: int
    appearance_threshold: int
    profile: Profile
    environment: EnvironmentName
    loop: LoopName
    critique_rounds: int
    requirement_checks: bool | None
    budget_usd: float | None
    budget_tokens: int | None

    @property
    def rules(self) -> RunRules: ...


# Used only when a router runs outside a run (e.g. a state update from Studio without context).
DEFAULT_LIMITS: RoutingLimits = AgentContext.model_construct(
    **{
        name: field.default
        for name, field in AgentContext.model_fields.items()
        if name in RoutingLimits.__annotations__
    }
)


def limits_of(limits: RoutingLimits | None) -> RoutingLimits:
    """The given limits, else the running graph's context, else the defaults."""
    if limits is not None:
        return limits
    try:
        runtime = get_runtime(AgentContext)
    except RuntimeError:  # called outside a graph run
        return DEFAULT_LIMITS
    context = runtime.context if runtime is not None else None
    return context if context is not None else DEFAULT_LIMITS


def _should_backtrack(state: AgentState, context: RoutingLimits) -> bool:
    return context.backtrack and error_count(state) >= context.error_limit


def _restarting(state: AgentState) -> bool:
    """A step raised earlier (upstream profile): every later step starts from the best good step."""
    return state.get("restarts", 0) > 0


def _after_exception(state: AgentState, context: RoutingLimits) -> Literal["backtrack", "finalize"]:
    """The step raised: restart from the best good step, or end once the restarts are used up."""
    limit = context.rules.environment.restart_limit or 0
    return "finalize" if state.get("restarts", 0) > limit else "backtrack"


def _budget_spent(state: AgentState, context: RoutingLimits) -> bool:
    return len(state.get("steps") or []) >= context.max_steps


def over_budget(state: AgentState, context: RoutingLimits) -> str | None:
    """Why the run's USD or token budget is spent (checked before each new coder step), else None."""
    if context.budget_usd is None and context.budget_tokens is None:
        return None
    return budget_spent_by(state.get("steps") or [], context)


def _next_coder_turn(state: AgentState, context: RoutingLimits) -> Literal["refiner", "generator", "budget"]:
    """A new coder step, unless the budget is spent: then the run pauses before the ``budget`` node."""
    if over_budget(state, context):
        return "budget"
    return "refiner" if conversation_of(state) else "generator"


def _rounds_left(state: AgentState, context: RoutingLimits) -> bool:
    """Another Critic + Refiner round fits (rounds and step budget)."""
    refined = sum(1 for s in state.get("steps") or [] if s["role"] == "refiner")
    return refined < context.critique_rounds and not _budget_spent(state, context)


def _next_round(state: AgentState, context: RoutingLimits) -> Literal["code_critic", "finalize"]:
    """A loop without GUI testing: the next critique round if the loop has them and one is left, else the end."""
    if context.rules.loop.critique_rounds and _rounds_left(state, context):
        return "code_critic"
    return "finalize"


def route_after_coder(
    state: AgentState, limits: RoutingLimits | None = None
) -> Literal["executor", "gui_tester", "critic", "code_critic", "backtrack", "finalize"]:
    context = limits_of(limits)
    step = state["steps"][state["current"]]
    action = step["action"]
    if action == "edit":
        return "executor"
    if action == "finish":
        return "finalize"
    if not context.rules.loop.gui_testing:  # no page changed: a next round criticises the same code
        return _next_round(state, context)
    if action == "screenshot_validated":
        if step["tests_step"] is None:
            return "backtrack" if _should_backtrack(state, context) else "critic"  # nothing to test yet
        if context.rules.profile.gui_test_restarts_site:
            return "gui_tester"
        execution = state["steps"][step["tests_step"]].get("execution")
        return "gui_tester" if execution and execution["ok"] else "critic"
    if action == "malformed":
        return "backtrack" if _should_backtrack(state, context) else "critic"
    raise RoutingError(f"step {step.get('index')} has unknown action {action!r}")


def route_after_executor(
    state: AgentState, limits: RoutingLimits | None = None
) -> Literal["screenshot_judge", "checker", "critic", "backtrack"]:
    context = limits_of(limits)
    step = state["steps"][state["current"]]
    execution = step.get("execution")
    if execution is None:
        raise RoutingError(f"step {step['index']} left the executor without an execution result")
    if execution["ok"]:
        return "screenshot_judge"
    if not context.rules.loop.gui_testing:
        return "checker"  # a page that did not run fails every check (the Critic's D is measured on it)
    if context.rules.profile.grade_every_capture and step.get("screenshot"):
        return "screenshot_judge"
    return "backtrack" if _should_backtrack(state, context) else "critic"


def _after_judgement(state: AgentState, context: RoutingLimits) -> Literal["gui_tester", "critic", "backtrack"]:
    """WebGen-Agent's choice after a page was judged: GUI test a good-looking page, else criticise."""
    step = state["steps"][state["current"]]
    if context.rules.profile.gui_on_threshold and step["screenshot_score"] >= context.appearance_threshold:
        return "gui_tester"
    return "backtrack" if _should_backtrack(state, context) else "critic"


def route_after_judge(
    state: AgentState, limits: RoutingLimits | None = None
) -> Literal["checker", "gui_tester", "critic", "backtrack", "finalize"]:
    context = limits_of(limits)
    if state["steps"][state["current"]].get("exception"):
        return _after_exception(state, context)
    return "checker" if context.rules.requirement_checks else _after_judgement(state, context)


def route_after_checker(
    state: AgentState, limits: RoutingLimits | None = None
) -> Literal["code_critic", "finalize", "gui_tester", "critic", "backtrack"]:
    context = limits_of(limits)
    if not context.rules.loop.gui_testing:
        return _next_round(state, context)
    return _after_judgement(state, context)


def route_after_gui(
    state: AgentState, limits: RoutingLimits | None = None
) -> Literal["finalize", "critic", "backtrack"]:
    context = limits_of(limits)
    edit_step = state.get("edit_step")
    if edit_step is None:
        raise RoutingError("a GUI test ended with no code-edit step under test")
    tested = state["steps"][edit_step]
    rules = context.rules.profile
    if rules.finish_on_gui_pass:
        if tested["gui_passed"] and tested["screenshot_score"] >= context.appearance_threshold:
            return "finalize"
        return "critic"
    # Only the coder's finish ends the run; an errored GUI step counts toward a backtrack.
    return "backtrack" if _should_backtrack(state, context) else "critic"


def route_after_critic(
    state: AgentState, limits: RoutingLimits | None = None
) -> Literal["refiner", "finalize", "budget", "backtrack"]:
    context = limits_of(limits)
    if _budget_spent(state, context):
        return "finalize"
    if _restarting(state):  # WebGen-Agent's restart flag is never reset
        return "backtrack"
    if state.get("governor") is not None:  # the critic node's call (core/governor.py)
        return "backtrack"  # it goes back to the best step, or records why the run stops
    return "budget" if over_budget(state, context) else "refiner"


def route_after_backtrack(
    state: AgentState, limits: RoutingLimits | None = None
) -> Literal["refiner", "generator", "finalize", "budget"]:
    context = limits_of(limits)
    if _budget_spent(state, context) or _stopped(state):
        return "finalize"
    return _next_coder_turn(state, context)


def _stopped(state: AgentState) -> bool:
    """The loop governor stopped the run (the backtrack node recorded why)."""
    events = state.get("events") or []
    return bool(events) and events[-1].get("kind") == "stop"


def route_after_code_critic(state: AgentState, limits: RoutingLimits | None = None) -> Literal["refiner", "budget"]:
    return "budget" if over_budget(state, limits_of(limits)) else "refiner"


def route_after_budget(
    state: AgentState, limits: RoutingLimits | None = None
) -> Literal["refiner", "generator", "finalize", "budget"]:
    """After a budget stop is resumed: on with the coder step it held back, or stop again while the
    (resumed run's) budget is still spent."""
    return route_after_backtrack(state, limits)
