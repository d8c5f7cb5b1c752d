"""What WebGen-RL's trainer does with a trajectory at its token budgets, and with a control reply
before any code edit, applied before the trajectory's reward pool is used (docs/rewards.md).

The trainer (WebGen-RL ``generation.py`` ``run_llm_loop``) keeps a rolling context of at most the
prompt budget (23,767 tokens in its run script): once a trajectory's prompt and replies pass it, the
token positions that close each pool entry stop growing, so later reply tokens are covered by no
entry (they keep the response mask's value, 1, as their advantage, or are cut off). A reply of the
response budget (9,000 tokens) or more drops the whole trajectory (no entry, no trained token) unless
it is repetitive, which ends the trajectory there. A control reply before any code edit makes the
trainer fail (``scores[i][-1]`` of an empty list) or, a well-formed ``finish``, leaves its tokens in
no entry. None of this can be written as records with one advantage per step, so such steps are left
out, each with a line saying why; the rest is exactly the trainer's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from webgen_agent.core.profiles import profile_rules
from webgen_agent.core.profiles.rules import REPEATS_ITSELF
from webgen_agent.core.state import Step

CONTROL_ACTIONS = ("screenshot_validated", "finish")


@dataclass(frozen=True)
class PoolLimits:
    """The steps a trajectory's pool is built from and the steps its records may carry."""

    steps: list[Step]  # the steps the pool is built from (a repetitive over-long reply ends them)
    withheld_from: int | None = None  # from this step on, no record (the entries still count)
    dropped: str = ""  # why the whole trajectory is left out ("" when it is kept)
    notes: list[str] = field(default_factory=list)  # what was left out and why, one line each


def coder_tokens(step: Step) -> tuple[int, int] | None:
    """(prompt tokens, reply tokens) of the coder's call as the endpoint counted them; None if unknown."""
    usage = (step.get("tokens") or {}).get(step["role"])
    if not usage or not usage.get("input"):
        return None
    return int(usage["input"]), int(usage.get("output", 0))


def _condensed(step: Step) -> bool:
    """The coder's prompt was condensed because the endpoint found it too long."""
    trouble = step.get("endpoint") or {}
    return any(key.startswith(f"{step['role']}/") and record.get("condensed") for key, record in trouble.items())


def pool_limits(steps: Sequence[Step], profile: str) -> PoolLimits:
    """The trainer's budgets and its control-before-edit failure applied to ``steps`` (one trajectory)."""
    rules = profile_rules(profile)
    ordered = sorted(steps, key=lambda s: s["index"])
    if rules.reward_pool == "every-step" and ordered and ordered[0]["action"] in CONTROL_ACTIONS:
        first = ordered[0]
        return PoolLimits(
            steps=ordered,
            dropped=(
                f"step {first['index']} is a '{first['action']}' reply before any code edit: WebGen-RL's trainer "
                "fails on it (screenshot_validated, or a badly formatted finish) or gives its tokens no pool "
                "entry (a well-formed finish)"
            ),
        )
    notes: list[str] = []
    budget = rules.pool_response_tokens
    for n, step in enumerate(ordered):
        counted = coder_tokens(step)
        if budget is None or counted is None or counted[1] < budget:
            continue
        if REPEATS_ITSELF not in step.get("problems", []):
            return PoolLimits(
                steps=ordered,
                dropped=(
                    f"step {step['index']}'s reply of {counted[1]:,} tokens reached the response budget "
                    f"({budget:,}): WebGen-RL drops such a trajectory"
                ),
            )
        if n + 1 < len(ordered):
            notes.append(
                f"step {step['index']}'s repetitive reply of {counted[1]:,} tokens reached the response budget "
                f"({budget:,}): the trajectory ends there, as WebGen-RL ends it; steps "
                f"{ordered[n + 1]['index']}-{ordered[-1]['index']} left out"
            )
        ordered = ordered[: n + 1]
        break
    cap = rules.pool_context_tokens
    if cap is None:
        return PoolLimits(steps=ordered, notes=notes)
    for step in ordered:
        counted = coder_tokens(step)
        over = counted is not None and counted[0] + counted[1] > cap
        if over or _condensed(step):
            why = (
                f"its prompt and reply ({sum(counted or (0,)):,} tokens) pass the context cap ({cap:,})"
                if over
                else f"its prompt was condensed to fit the endpoint (the trainer cuts its context at {cap:,} tokens)"
            )
            notes.append(
                f"steps {step['index']}-{ordered[-1]['index']} left out: at step {step['index']} {why}, where "
                "WebGen-RL's token positions stop growing, so no pool entry covers these tokens (their entries "
                "still count in the group)"
            )
            return PoolLimits(steps=ordered, withheld_from=step["index"], notes=notes)
    return PoolLimits(steps=ordered, notes=notes)
