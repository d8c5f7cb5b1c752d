"""Step rewards, reward pools and group-normalised advantages for Step-GRPO (pure functions).

A trajectory's rewards form a pool of entries, each covering the tokens of one or more coder steps.
Reward of an entry = screenshot score + GUI score (0-10); -1 for a badly formatted reply.
Default profile: every coder step is its own entry, a control step (``screenshot_validated``,
``finish``) credited with the scores of the code edit it refers to. Upstream profile: WebGen-Agent's
pool (``upstream_pool``). Advantage = (reward - mean(R)) / (std(R) + 1e-6) over every entry R of
every trajectory of one group, std the sample std (ddof=1); a group of one entry uses mean 0, std 1
(as upstream's trainer does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from webgen_agent.core.profiles import profile_rules
from webgen_agent.core.profiles.rules import RewardPool
from webgen_agent.core.state import Step
from webgen_agent.core.views import Grade

MALFORMED_REWARD = -1.0
EPSILON = 1e-6


def scored_step(step: Step, steps: Sequence[Step]) -> Step:
    """The step whose scores a step is credited with: itself, or the code edit a control word tests."""
    if step["action"] in ("screenshot_validated", "finish") and step["tests_step"] is not None:
        return next((s for s in steps if s["index"] == step["tests_step"]), step)
    return step


def group_stats(rewards: Sequence[float]) -> tuple[float, float]:
    """(mean, sample std) of a group's rewards; (0, 1) for a group of one."""
    if len(rewards) <= 1:
        return 0.0, 1.0
    mean = sum(rewards) / len(rewards)
    variance = sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1)
    return mean, math.sqrt(variance)


def advantages(rewards: Sequence[float]) -> list[float]:
    mean, std = group_stats(rewards)
    return [(r - mean) / (std + EPSILON) for r in rewards]


@dataclass
class PoolEntry:
    """One entry of a trajectory's reward pool: a reward and the coder steps whose tokens it covers."""

    steps: list[int]  # coder steps whose completion tokens get this entry's advantage
    scored_step: int  # the step whose grades give the reward
    screenshot_score: Grade
    gui_score: Grade
    format_ok: bool

    @property
    def reward(self) -> float:
        return MALFORMED_REWARD if not self.format_ok else float(self.screenshot_score + self.gui_score)


def step_pool(steps: Sequence[Step]) -> list[PoolEntry]:
    """The default profile's pool: every coder step is an entry of its own, a control step credited with
    the grades of the edit it refers to, a badly formatted step -1."""
    entries = []
    for step in steps:
        scored = scored_step(step, steps)
        entries.append(
            PoolEntry(
                steps=[step["index"]],
                scored_step=scored["index"],
                screenshot_score=scored["screenshot_score"],
                gui_score=scored["gui_score"],
                format_ok=step["format_ok"] and step["action"] != "malformed",
            )
        )
    return entries


def upstream_pool(steps: Sequence[Step]) -> list[PoolEntry]:
    """WebGen-Agent's Step-GRPO pool of one trajectory (its rollout's score list), step by step.

    A code-edit turn (also one with no file in it) adds an entry with its screenshot grade and GUI
    grade 0. A screenshot_validated turn writes its GUI grade into the last entry; a finish turn adds
    nothing. A well-formed control turn's tokens join the last entry; a badly formatted one adds a
    copy of the last entry flagged as badly formatted (reward -1) that covers its tokens, and any
    later control turn joins that copy. A repetitive edit is an entry of its own, reward -1.
    Upstream's trainer fails on a control turn before any edit; here a badly formatted one gets an
    entry of its own (-1) and a well-formed one joins the next entry.
    """
    entries: list[PoolEntry] = []
    waiting: list[int] = []  # well-formed control turns before the first entry
    for step in sorted(steps, key=lambda s: s["index"]):
        index, action = step["index"], step["action"]
        if action in ("edit", "malformed"):
            entries.append(
                PoolEntry(
                    steps=[*waiting, index],
                    scored_step=index,
                    screenshot_score=step["screenshot_score"],
                    gui_score=0,
                    format_ok=step["format_ok"] and action != "malformed",
                )
            )
            waiting = []
            continue
        last = entries[-1] if entries else None
        if action == "screenshot_validated" and last is not None:
            last.gui_score = step["gui_score"]
        if step["format_ok"]:
            if last is not None:
                last.steps.append(index)
            else:
                waiting.append(index)
        elif last is not None:
            entries.append(replace(last, steps=[index], format_ok=False))
        else:
            entries.append(
                PoolEntry(steps=[index], scored_step=index, screenshot_score=0, gui_score=0, format_ok=False)
            )
    return entries


_POOLS: dict[RewardPool, Callable[[Sequence[Step]], list[PoolEntry]]] = {
    "code-edits": step_pool,
    "every-step": upstream_pool,
}


def reward_pool(steps: Sequence[Step], profile: str) -> list[PoolEntry]:
    """A trajectory's pool under the rules of the profile it ran with."""
    return _POOLS[profile_rules(profile).reward_pool](steps)
