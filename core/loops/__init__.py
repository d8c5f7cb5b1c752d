"""The loops: one module of rules each (``LoopRules``), looked up by name."""

from __future__ import annotations

from webgen_agent.core.loops import single, webgen_agent, webloop
from webgen_agent.core.loops.rules import LoopName, LoopRules

LOOPS: dict[str, LoopRules] = {rules.name: rules for rules in (webgen_agent.RULES, webloop.RULES, single.RULES)}


def loop_rules(loop: str) -> LoopRules:
    """The rules of ``loop``; an unknown name is a clear error."""
    try:
        return LOOPS[loop]
    except KeyError:
        raise ValueError(f"unknown loop {loop!r}: use one of {', '.join(LOOPS)}") from None


__all__ = ["LOOPS", "LoopName", "LoopRules", "loop_rules"]
