"""Rollout defaults, in a module of their own: the command line reads them at start-up without
importing the rollout machinery (the graph, the nodes, the model clients)."""

from __future__ import annotations

from webgen_agent.core.loops import LoopName, loop_rules
from webgen_agent.core.profiles.rules import Profile

# WebGen-Agent's Step-GRPO rollout settings (its run script: 5 samples, 5 turns, temperature 1.0,
# top-p 0.95, no backtracking or best-step selection), under its rules and reward pools (docs/fidelity.md).
ROLLOUT_SAMPLES = 5
ROLLOUT_MAX_STEPS = 5
ROLLOUT_TEMPERATURE = 1.0
ROLLOUT_TOP_P = 0.95
ROLLOUT_PROFILE: Profile = "upstream"


def rollout_shared_policy(loop: LoopName | None, asked: bool | None) -> bool:
    """Whether the coder model answers as Critic in a rollout: as asked, else when the loop trains every role.

    WebLoop trains one policy in every role; a Critic turn sampled from another model is off-policy
    for the trained coder, so a webloop rollout asks the coder unless told ``--separate-critic``.
    """
    return asked if asked is not None else loop is not None and loop_rules(loop).trains_every_role
