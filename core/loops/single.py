"""One Generator turn (WebGen-R1 style): its page is judged and checked, then the run ends."""

from __future__ import annotations

from webgen_agent.core.loops.rules import LoopRules

RULES = LoopRules(name="single", gui_testing=False, critique_rounds=False, checks_by_default=True)
