"""The loop governor: a run going in circles goes back to its best step once, then stops.

Two signs that more steps of the same branch would be spent for nothing (under profiles whose
``loop_governor`` rule is on; the upstream profile spends its step budget as WebGen-Agent does):

- **a revisit**: the latest code edit produced a file tree the run already had (the same manifest
  hash as an earlier step: the coder undid its change, or made none);
- **a stall**: the best score (a good page first, then the GUI grade, then the screenshot grade) has
  not improved for ``stall_steps`` steps, counted from the step that reached it or from the last
  backtrack, whichever came later.

The first time, the run backtracks to its best step (the backtrack node, as after ``error_limit``
errored steps; with no good step it starts over). If it has already gone back since its best score
was reached, it stops: finalize picks the best step, and the reason is an event of the run (run.json,
``history``, the report). The router before each coder turn (``route_after_critic``) and the
backtrack node read the same verdict from this pure function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from webgen_agent.core.profiles.rules import ERRORED_SCORE, Profile
from webgen_agent.core.rules import RunRules
from webgen_agent.core.state import AgentState, Event, GovernorCall, Step
from webgen_agent.core.views import Grade

# A backtrack target must be a good step: it ran and its screenshot grade is above ERRORED_SCORE
# (nodes/selection.py's rule).
_GOOD_SCREENSHOT = ERRORED_SCORE + 1


class GovernorLimits(Protocol):
    """What the governor reads from the run context (AgentContext satisfies it)."""

    profile: Profile
    stall_steps: int
    backtrack: bool

    @property
    def rules(self) -> RunRules: ...


@dataclass(frozen=True)
class GovernorVerdict:
    action: Literal["backtrack", "stop"]
    reason: str  # for the run's events: what was seen, in one line


def _score(step: Step) -> tuple[bool, Grade, Grade]:
    """Higher is better: a good page, then the GUI grade, then the screenshot grade."""
    good = not step["errored"] and step["screenshot_score"] >= _GOOD_SCREENSHOT
    return (good, step["gui_score"], step["screenshot_score"])


def _edits(steps: Sequence[Step]) -> list[Step]:
    return [s for s in steps if s.get("action") == "edit" and s.get("files")]


def best_reached(steps: Sequence[Step]) -> tuple[Step | None, int]:
    """The best code edit (the earliest of equals) and the step at which its score was known: its own
    index, or a later control step's whose GUI test graded it. (None, -1) before any edit."""
    best: Step | None = None
    for step in _edits(steps):
        if best is None or _score(step) > _score(best):
            best = step
    if best is None:
        return None, -1
    testers = [s["index"] for s in steps if s.get("tests_step") == best["index"]]
    return best, max([best["index"], *testers])


def _revisited(steps: Sequence[Step], current: int) -> int | None:
    """The earlier step whose file tree the current code edit has again, else None."""
    step = steps[current] if 0 <= current < len(steps) else None
    if step is None or step.get("action") != "edit" or not step.get("files"):
        return None
    return next((s["index"] for s in steps[:current] if s.get("files") == step["files"]), None)


def _last_reset(events: Sequence[Event]) -> int:
    """The step after which the run last went back (a backtrack or a restart); -1 if it never did."""
    return max(
        (int(e.get("after_step", -1)) for e in events if e.get("kind") in ("backtrack", "restart")),
        default=-1,
    )


def governor_verdict(state: AgentState, limits: GovernorLimits) -> GovernorVerdict | None:
    """Backtrack or stop, and why, when the run revisits a file tree or its score stalls; else None."""
    if not limits.rules.profile.loop_governor or limits.stall_steps <= 0:
        return None
    steps: Sequence[Step] = state.get("steps") or []
    current = state.get("current", len(steps) - 1)
    reset = _last_reset(state.get("events") or [])
    if not steps or current <= reset:
        return None  # nothing new since the run last went back
    best, reached = best_reached(steps)
    since = current - max(reached, reset)
    revisit = _revisited(steps, current)
    if revisit is not None:
        seen = f"step {current} has the same files as step {revisit}"
    elif since >= limits.stall_steps:
        where = f"step {best['index']}" if best is not None else "the start"
        seen = f"no better score in the {since} steps since {where}"
    else:
        return None
    went_back = reset >= 0 and reset >= reached  # already went back, and nothing improved since
    if went_back:
        return GovernorVerdict("stop", f"loop governor: {seen}, after going back once; stopped early")
    if not limits.backtrack:
        return GovernorVerdict("stop", f"loop governor: {seen}; stopped early (backtracking is off)")
    return GovernorVerdict("backtrack", f"loop governor: {seen}")


def governor_call(state: AgentState, limits: GovernorLimits) -> GovernorCall | None:
    """``governor_verdict`` as the state carries it (``AgentState.governor``): the critic node's call."""
    verdict = governor_verdict(state, limits)
    return {"action": verdict.action, "reason": verdict.reason} if verdict is not None else None
