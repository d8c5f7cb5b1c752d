"""Which step is best: WebGen-Agent's ranking, used for backtracking and for the final choice.

Good steps (no error, screenshot grade >= 3) first, or every candidate when none is good; then
the highest GUI grade, the highest screenshot grade, the latest step. The candidates differ by
profile: the default profile ranks code edits (a GUI test's grade is credited to the edit it
tested); the upstream profile ranks every step as WebGen-Agent does (a control step carries the
grades of its edit and its own GUI test, and stands for its edit's files).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from webgen_agent.core.profiles.rules import Selection
from webgen_agent.core.state import Step
from webgen_agent.core.views import Grade

GOOD_SCREENSHOT = 3


def is_good(step: Step) -> bool:
    """A step worth returning to: it ran, and its screenshot scored at least 3."""
    return not step["errored"] and step["screenshot_score"] >= GOOD_SCREENSHOT


def code_steps(steps: Iterable[Step]) -> list[Step]:
    """Steps that produced a project snapshot (code edits)."""
    return [s for s in steps if s["action"] == "edit" and s.get("files")]


def step_files(step: Step, steps: Sequence[Step]) -> str | None:
    """The files a step stands for: its own snapshot, or for a control step its edit's."""
    if step.get("files"):
        return step.get("files")
    tests_step = step["tests_step"]
    return steps[tests_step].get("files") if tests_step is not None else None


def candidates(steps: Iterable[Step], selection: Selection = "code-edits") -> list[Step]:
    steps = list(steps)
    if selection == "every-step":
        pool = [s for s in steps if s["action"] != "malformed" and step_files(s, steps)]
    else:
        pool = code_steps(steps)
    # A step that raised is never ranked (WebGen-Agent saves no history for it).
    return [s for s in pool if not s.get("exception")]


def rank_key(step: Step, selection: Selection = "code-edits") -> tuple[Grade, Grade, int]:
    """Higher is better: GUI score, then screenshot score, then the later step.

    Ranking every step as WebGen-Agent does, a code edit counts no GUI grade: upstream records an
    edit before any GUI test of it (A `agent/webgen_agent.py` 240, 256-261), and the test's grade
    belongs to the control step that ran it. (The edit's own record carries that grade here, for
    the people and exports that read it; an errored test step must not lend it to its edit.)
    """
    gui = 0 if selection == "every-step" and step["action"] == "edit" else step["gui_score"]
    return (gui, step["screenshot_score"], step["index"])


def best_step(steps: Iterable[Step], selection: Selection = "code-edits") -> Step | None:
    """Among good steps (all candidates if none is good): the highest by ``rank_key``."""
    pool = candidates(steps, selection)
    good = [s for s in pool if is_good(s)]
    return max(good or pool, key=lambda s: rank_key(s, selection)) if pool else None


def best_good_step(
    steps: Iterable[Step], selection: Selection = "code-edits", *, away_from: str | None = None
) -> Step | None:
    """The backtrack target: the best good step, or None when no step was good; with ``away_from``
    (a manifest hash: the files the run has now) only a step with other files (a move)."""
    steps = list(steps)
    good = [s for s in candidates(steps, selection) if is_good(s) and step_files(s, steps) != away_from]
    return max(good, key=lambda s: rank_key(s, selection)) if good else None
