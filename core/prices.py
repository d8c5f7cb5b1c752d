"""What the models charge, per role (docs/costs.md): the run context's ``prices``."""

from __future__ import annotations

from pydantic import BaseModel, Field

from webgen_agent.core.errors import ConfigError
from webgen_agent.core.names import ROLES


class RolePrice(BaseModel):
    """What one role's endpoint charges, in USD per million tokens; None: not known (never guessed)."""

    input_usd_per_mtok: float | None = Field(default=None, ge=0, description="USD per million input tokens.")
    output_usd_per_mtok: float | None = Field(default=None, ge=0, description="USD per million output tokens.")

    @property
    def known(self) -> bool:
        return self.input_usd_per_mtok is not None and self.output_usd_per_mtok is not None


class Prices(BaseModel):
    """Prices per model role (docs/costs.md); the GUI agent is the vlm role. No built-in price table."""

    coder: RolePrice = Field(default_factory=RolePrice, description="The coder model's prices.")
    vlm: RolePrice = Field(default_factory=RolePrice, description="The vision model's prices (judge, GUI agent).")
    feedback: RolePrice = Field(default_factory=RolePrice, description="The feedback model's prices.")

    def unknown(self) -> list[str]:
        """The prices not given, as ``role input``/``role output`` words."""
        return [
            f"{role} {side}"
            for role in ROLES
            for side in ("input", "output")
            if getattr(getattr(self, role), f"{side}_usd_per_mtok") is None
        ]

    def over(self, base: Prices) -> Prices:
        """These prices where given, ``base``'s elsewhere (flags on resume beat the recorded ones)."""
        merged = base.model_dump()
        for role, price in self.model_dump().items():
            merged[role].update({side: value for side, value in price.items() if value is not None})
        return Prices.model_validate(merged)


def require_prices(prices: Prices, why: str = "a budget in USD") -> None:
    """Raise ConfigError (one line) unless every role's price is known."""
    missing = prices.unknown()
    if missing:
        raise ConfigError(
            f"{why} needs every model's price, unknown: {', '.join(missing)} "
            "(pass --price-in/--price-out or --<role>-price-in/--<role>-price-out, "
            "or set WEBGEN_PRICE_IN / WEBGEN_<ROLE>_PRICE_IN ...)."
        )
