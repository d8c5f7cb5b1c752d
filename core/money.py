"""Costs as numbers and as text, free of pydantic: the commands that only read runs (``runs``,
``history``) show costs without importing the settings models (docs/performance.md, "Command-line
start"). A cost is USD, or None when a price it needs is unknown (docs/costs.md)."""

from __future__ import annotations

from collections.abc import Iterable


def add_costs(costs: Iterable[float | None]) -> float | None:
    """The sum; None (unknown) when any part is unknown."""
    total = 0.0
    for cost in costs:
        if cost is None:
            return None
        total += cost
    return total


def usd_text(usd: float | None) -> str:
    """A cost for people: ``$0.0123``; ``?`` when unknown."""
    if usd is None:
        return "?"
    return f"${usd:.4f}" if usd < 1 else f"${usd:,.2f}"
