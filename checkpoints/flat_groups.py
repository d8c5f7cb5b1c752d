"""Groups that carry no training signal: every pool entry has the same reward, so every advantage is 0.

Such a group trains nothing under Step-GRPO; a rollout made only of them (a judge that never gave a
usable answer, a site that never rendered) would otherwise export and train with a loss of 0 and no
word. ``rollout``, ``export`` and ``train`` say how many there are and why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from webgen_agent.checkpoints.credit import RewardKind
from webgen_agent.core.profiles.rules import NO_PACKAGE_JSON
from webgen_agent.core.state import Execution

if TYPE_CHECKING:  # only for annotations
    from webgen_agent.checkpoints.trajectories import Trajectory

_REASONS_SHOWN = 3


class FlatGroup(BaseModel):
    """A group whose pool entries all have one reward (standard deviation 0)."""

    group_id: str
    reward: float = Field(description="The reward every pool entry of the group has.")
    entries: int = Field(description="Pool entries in the group.")
    trajectories: int
    judge_failures: int = Field(description="Steps whose screenshot judge gave no usable answer.")
    unrendered: int = Field(description="Code edits whose project did not run, so no page was graded.")
    no_package_json: int = Field(
        default=0, description="Of those, edits stopped for having no package.json (static sites not served)."
    )
    reasons: list[str] = Field(default_factory=list, description="The most frequent judge failure reasons.")

    def line(self) -> str:
        """One line: the group, its reward and why it is flat (as far as the steps tell)."""
        why = []
        if self.judge_failures:
            reasons = "; ".join(self.reasons)
            why.append(f"{self.judge_failures} judge failures ({reasons})")
        if self.unrendered:
            why.append(f"{self.unrendered} edits that did not run")
        if self.no_package_json:
            why.append(
                f"{self.no_package_json} of them had no package.json: this profile runs npm projects only, as "
                "WebGen-Agent does (`--profile default` also serves static sites)"
            )
        cause = ", ".join(why) or "every entry earned the same grades"
        return (
            f"{self.group_id}: all {self.entries} rewards of {self.trajectories} trajectories are "
            f"{self.reward:g}: {cause}"
        )


def _stopped_for_no_package_json(execution: Execution | None) -> bool:
    return execution is not None and execution.get("error") == NO_PACKAGE_JSON


def flat_groups(trajectories: Sequence[Trajectory], kind: RewardKind = "step") -> list[FlatGroup]:
    """The groups of ``trajectories`` with at least two pool entries, all of one reward.

    A one-entry group is not flat: its advantage is its reward (mean 0, std 1, as upstream).
    """
    by_group: dict[str, list[Trajectory]] = {}
    for trajectory in trajectories:
        by_group.setdefault(trajectory.group_id, []).append(trajectory)
    found = []
    for group_id, members in by_group.items():
        rewards = [t.entry_reward(entry, kind) for t in members for entry in t.pool]
        if len(rewards) < 2 or len(set(rewards)) > 1:
            continue
        steps = [step for t in members for step in t.own_steps]
        reasons = Counter(step.get("judge_error", "") for step in steps if step.get("judge_error"))
        found.append(
            FlatGroup(
                group_id=group_id,
                reward=rewards[0],
                entries=len(rewards),
                trajectories=len(members),
                judge_failures=sum(reasons.values()),
                unrendered=sum(
                    1 for s in steps if s["action"] == "edit" and s.get("execution") and not s["execution"]["ok"]
                ),
                no_package_json=sum(
                    1 for s in steps if s["action"] == "edit" and _stopped_for_no_package_json(s.get("execution"))
                ),
                reasons=[reason[:160] for reason, _ in reasons.most_common(_REASONS_SHOWN)],
            )
        )
    return found


def lone_groups(trajectories: Sequence[Trajectory], kind: RewardKind = "step") -> list[str]:
    """One line per group of a single pool entry: its advantage is its raw reward (mean 0, std 1, as
    upstream's trainer gives it), beside the normalised values of every other group."""
    by_group: dict[str, list[float]] = {}
    for trajectory in trajectories:
        rewards = by_group.setdefault(trajectory.group_id, [])
        rewards.extend(trajectory.entry_reward(entry, kind) for entry in trajectory.pool)
    return [
        f"{group_id}: one pool entry, so its advantage is its raw reward {rewards[0]:g} (mean 0, std 1), "
        "not a value normalised against other attempts"
        for group_id, rewards in by_group.items()
        if len(rewards) == 1
    ]


def mixed_rule_groups(trajectories: Sequence[Trajectory]) -> list[str]:
    """One line per group whose trajectories' pools were built by different rules (profiles):
    its advantages normalise entries of two kinds together."""
    rules: dict[str, Counter[str]] = {}
    for trajectory in trajectories:
        rules.setdefault(trajectory.group_id, Counter())[trajectory.pool_rule] += 1
    return [
        f"{group_id}: pools built by different rules, normalised together: "
        + ", ".join(f"{n} trajectories {rule}" for rule, n in sorted(counts.items()))
        for group_id, counts in rules.items()
        if len(counts) > 1
    ]
