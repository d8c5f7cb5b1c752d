"""Step rewards and group-normalised advantages for Step-GRPO (pure functions).

Reward of a coder step = screenshot score + GUI score (0-10); -1 for a malformed reply. A
control-word step (``screenshot_validated``, ``finish``) is credited with the scores of the code
edit it refers to. Advantage = (reward - mean(R)) / (std(R) + 1e-6) over every step reward R of
every trajectory of one group, std the sample std (ddof=1); a group of one step uses mean 0, std 1
(as upstream's trainer does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from webgen_agent.core.state import Step

MALFORMED_REWARD = -1.0
EPSILON = 1e-6


def scored_step(step: Step, steps: Sequence[Step]) -> Step:
    """The step whose scores a step is credited with: itself, or the code edit a control word tests."""
    if step["action"] in ("screenshot_validated", "finish") and step["tests_step"] is not None:
        return next((s for s in steps if s["index"] == step["tests_step"]), step)
    return step


def step_reward(step: Step, steps: Sequence[Step]) -> float:
    """The reward of one coder step, given the whole run's steps (for control-word credit)."""
    if not step["format_ok"] or step["action"] == "malformed":
        return MALFORMED_REWARD
    source = scored_step(step, steps)
    return float(source["screenshot_score"] + source["gui_score"])


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
