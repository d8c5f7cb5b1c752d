"""Which step is best: the upstream ranking, used for backtracking and for the final choice."""

from __future__ import annotations

from collections.abc import Iterable

from webgen_agent.core.state import Step

GOOD_SCREENSHOT = 3


def is_good(step: Step) -> bool:
    """A step worth returning to: it ran, and its screenshot scored at least 3."""
    return not step["errored"] and step["screenshot_score"] >= GOOD_SCREENSHOT


def code_steps(steps: Iterable[Step]) -> list[Step]:
    """Steps that produced a project snapshot (code edits)."""
    return [s for s in steps if s["action"] == "edit" and s.get("files")]


def rank_key(step: Step) -> tuple[int, int, int]:
    """Higher is better: GUI score, then screenshot score, then the later step."""
    return (step["gui_score"], step["screenshot_score"], step["index"])


def best_step(steps: Iterable[Step]) -> Step | None:
    """Among good steps (all code steps if none is good): the highest by ``rank_key``."""
    candidates = code_steps(steps)
    good = [s for s in candidates if is_good(s)]
    pool = good or candidates
    return max(pool, key=rank_key) if pool else None


def best_good_step(steps: Iterable[Step]) -> Step | None:
    """The backtrack target: the best good step, or None when no step was good."""
    good = [s for s in code_steps(steps) if is_good(s)]
    return max(good, key=rank_key) if good else None
