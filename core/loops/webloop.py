"""WebLoop's loop: Generator, then Code-Critic + Refiner rounds, each page checked against the requirement."""

from __future__ import annotations

from webgen_agent.core.loops.rules import LoopRules

RULES = LoopRules(
    name="webloop", gui_testing=False, critique_rounds=True, checks_by_default=True, trains_every_role=True
)
