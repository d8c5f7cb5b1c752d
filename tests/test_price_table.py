"""Published prices fill the roles nobody priced; given prices always win; unlisted models stay unknown."""

from __future__ import annotations

from webgen_agent.core.context import Settings
from webgen_agent.core.price_table import listed_price


def test_a_listed_model_gets_its_published_price_and_a_given_price_wins() -> None:
    assert listed_price("gpt-4o") == listed_price("openai/gpt-4o") == listed_price("GPT-4o")
    price_in, price_out = listed_price("gpt-4o") or (0.0, 0.0)
    assert 0 < price_in < price_out  # USD per million tokens: output costs more than input
    prices = Settings(model="gpt-4o", base_url="http://localhost:1/v1", vlm_price_in=9.0).prices()
    assert prices.coder.input_usd_per_mtok == price_in and prices.coder.output_usd_per_mtok == price_out
    assert prices.vlm.input_usd_per_mtok == 9.0 and prices.vlm.output_usd_per_mtok == price_out
    assert prices.unknown() == []


def test_a_self_hosted_model_stays_unknown() -> None:
    assert listed_price("Qwen/Qwen2.5-Coder-32B-Instruct") is None
    prices = Settings(model="Qwen/Qwen2.5-Coder-32B-Instruct", base_url="http://localhost:1/v1").prices()
    assert len(prices.unknown()) == 6
