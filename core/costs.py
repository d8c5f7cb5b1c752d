"""What model calls cost, and how much of a run's budget is spent (docs/costs.md).

Costs are USD floats, or None when a price they need is unknown: an unknown price is shown as
unknown ("?"), never guessed. The step record keeps one cost per node (``Step.cost``); a step's and
a run's cost are sums, unknown as soon as one of their parts is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, Field

from webgen_agent.core.money import add_costs, usd_text

if TYPE_CHECKING:  # the settings module (pydantic-settings): not needed to read what a run spent
    from webgen_agent.core.context import Prices, Role

MILLION = 1_000_000


def call_cost(prices: Prices, role: Role, input_tokens: int, output_tokens: int) -> float | None:
    """USD for these tokens at ``role``'s prices; None when a price the tokens need is unknown."""
    price = getattr(prices, role)
    total = 0.0
    for tokens, per_mtok in ((input_tokens, price.input_usd_per_mtok), (output_tokens, price.output_usd_per_mtok)):
        if tokens:
            if per_mtok is None:
                return None
            total += tokens * per_mtok / MILLION
    return total


class Usage(BaseModel):
    """What model calls used: tokens in and out, the calls, and those that came without token counts."""

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    # Calls whose answer came without token counts (some servers send none): their tokens are in
    # neither count, so their cost is unknown and no budget can be kept over them.
    uncounted: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            calls=self.calls + other.calls,
            uncounted=self.uncounted + other.uncounted,
        )


def step_cost(step: Mapping[str, Any]) -> float | None:
    """A step's cost from its per-node costs (0.0 when it made no model call); unknown when a node
    used tokens that have no cost (a step recorded before costs were)."""
    costs: Mapping[str, float | None] = step.get("cost") or {}
    tokens: Mapping[str, Mapping[str, int]] = step.get("tokens") or {}
    if any(node not in costs and usage.get("input", 0) + usage.get("output", 0) for node, usage in tokens.items()):
        return None
    return add_costs(costs.values())


def step_tokens(tokens: Mapping[str, Mapping[str, int]]) -> int:
    return sum(usage.get("input", 0) + usage.get("output", 0) for usage in tokens.values())


def uncounted_calls(steps: Iterable[Mapping[str, Any]]) -> int:
    """Model calls of these steps whose answer came without token counts (their tokens are in no count)."""
    return sum(usage.get("uncounted", 0) for step in steps for usage in (step.get("tokens") or {}).values())


def spent(steps: Iterable[Mapping[str, Any]]) -> tuple[float | None, int]:
    """(USD, tokens) a run's steps used so far; USD None when some cost is unknown."""
    records = list(steps)
    usd = add_costs(step_cost(step) for step in records)
    return usd, sum(step_tokens(step.get("tokens") or {}) for step in records)


class BudgetLimits(Protocol):
    budget_usd: float | None
    budget_tokens: int | None


def budget_reached(usd: float | None, tokens: int, limits: BudgetLimits, uncounted: int = 0) -> str | None:
    """Why the budget is spent (one line), or None while there is room. ``uncounted``: model calls
    that came without token counts; never guessed, so no budget can be kept over them."""
    if uncounted and limits.budget_tokens is not None:
        return (
            f"{uncounted:,} model call(s) came back without token counts, so no "
            f"{limits.budget_tokens:,}-token budget can be kept (use an endpoint that reports usage, or no budget)"
        )
    if limits.budget_tokens is not None and tokens >= limits.budget_tokens:
        return f"{tokens:,} tokens used of a {limits.budget_tokens:,}-token budget"
    if limits.budget_usd is not None:
        if usd is None:  # never guessed: a USD budget cannot be kept over calls made without prices
            return (
                "the cost so far is unknown (calls made without prices or token counts), "
                f"so no {usd_text(limits.budget_usd)} budget can be kept"
            )
        if usd >= limits.budget_usd:
            return f"{usd_text(usd)} spent of a {usd_text(limits.budget_usd)} budget"
    return None


def budget_spent_by(steps: Iterable[Mapping[str, Any]], limits: BudgetLimits) -> str | None:
    """Why a run's steps spent its budget (one line), or None while there is room."""
    records = list(steps)
    usd, tokens = spent(records)
    return budget_reached(usd, tokens, limits, uncounted_calls(records))


class Budget(BaseModel):
    """A budget for a whole command (``rollout``, ``bench``): None means no limit of that kind."""

    budget_usd: float | None = Field(default=None, gt=0, description="USD the command's runs may spend.")
    budget_tokens: int | None = Field(default=None, ge=1, description="Tokens the command's runs may use.")

    @property
    def set(self) -> bool:
        return self.budget_usd is not None or self.budget_tokens is not None


class Spending:
    """What a command's runs spent so far, counted from their progress events (runs still going
    included), against the command's budget; one per command, shared by its concurrent runs."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.usd: float | None = 0.0
        self.tokens = 0
        self.uncounted = 0  # model calls that came without token counts

    def add(self, event: Mapping[str, Any]) -> None:
        """Count one progress event (a node's end carries its tokens and cost)."""
        self.tokens += event.get("input_tokens", 0) + event.get("output_tokens", 0)
        self.uncounted += event.get("uncounted_calls", 0)
        if event.get("priced") is False:
            self.usd = None
        elif event.get("cost_usd") is not None:
            self.usd = add_costs([self.usd, event["cost_usd"]])

    def reached(self) -> str | None:
        """Why the budget is spent (one line), or None while there is room (always None without one)."""
        return budget_reached(self.usd, self.tokens, self.budget, self.uncounted) if self.budget.set else None

    def has_room(self) -> bool:
        """Whether the command may start another run (asked before each one, in-process or on Ray)."""
        return self.reached() is None

    def line(self) -> str:
        return f"{usd_text(self.usd)} and {self.tokens:,} tokens spent"
