"""Published model prices, for roles whose price the user did not give (docs/costs.md).

The table is tokencost's: a maintained copy of litellm's model price map, shipped as a JSON file in
the tokencost package. It is read as a file, not through ``import tokencost``: the package's import
pulls tiktoken and an HTTP client and may fetch newer prices from the internet, while a run must
start fast and offline. A model that is not in the table stays unknown (never guessed).
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path


@functools.cache
def _table() -> dict[str, tuple[float, float]]:
    """Model name -> (USD per million input tokens, USD per million output tokens)."""
    spec = importlib.util.find_spec("tokencost")
    if spec is None or spec.origin is None:
        return {}
    try:
        raw = json.loads((Path(spec.origin).parent / "model_prices.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    table = {}
    for name, entry in raw.items():
        if not isinstance(entry, dict):
            continue
        price_in, price_out = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
        if isinstance(price_in, (int, float)) and isinstance(price_out, (int, float)):
            table[name] = (price_in * 1e6, price_out * 1e6)
    return table


def listed_price(model: str) -> tuple[float, float] | None:
    """The published (input, output) USD per million tokens of ``model``; None when it is not listed.

    The name is looked up as given, then lower-cased, then without a provider prefix
    (``openai/gpt-4o`` -> ``gpt-4o``).
    """
    table = _table()
    name = model.strip()
    for candidate in (name, name.lower(), name.rsplit("/", 1)[-1], name.rsplit("/", 1)[-1].lower()):
        if candidate in table:
            return table[candidate]
    return None
