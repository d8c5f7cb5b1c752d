"""WebGen-Agent's loop: generate, run, grade, GUI-test, criticise, refine, backtrack."""

from __future__ import annotations

from webgen_agent.core.loops.rules import LoopRules

RULES = LoopRules(name="webgen-agent", gui_testing=True, critique_rounds=False, checks_by_default=False)
