"""A run's recorded settings as rows people read: a name, the value in words, what the setting does.

What each setting does is the run context's own field description, so the report and the code
cannot disagree.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from webgen_agent.core.context import AgentContext

LABELS = {
    "loop": "Loop",
    "profile": "Profile",
    "max_steps": "Step limit",
    "error_limit": "Errored steps before a backtrack",
    "backtrack": "Backtrack to the best step",
    "select_best": "Finish with the best step",
    "appearance_threshold": "Screenshot score that starts the GUI test",
    "critic": "Critic",
    "critique_rounds": "Critique rounds",
    "shared_policy": "Coder answers as Critic",
    "gui_max_actions": "GUI agent action budget",
    "requirement_checks": "Requirement checks",
    "allow_shell": "Shell actions run",
    "scaffold": "Scaffold",
    "start_from": "Started from the folder",
    "max_pages": "Pages captured per step",
    "viewport": "Viewport",
    "review": "Human review at",
    "prices": "Prices (USD per million tokens)",
    "budget_usd": "Budget (USD)",
    "budget_tokens": "Budget (tokens)",
    "models": "Models (endpoints and sampling; no keys)",
}
# A value of None or "" in words, where "none" would mislead.
EMPTY_WORDS = {
    "requirement_checks": "the loop's default",
    "budget_usd": "no limit",
    "budget_tokens": "no limit",
    "scaffold": "none",
    "start_from": "none (the requirement alone)",
}


class SettingRow(BaseModel):
    name: str
    value: str
    meaning: str = ""


def setting_rows(settings: dict[str, Any]) -> list[SettingRow]:
    """The settings in ``LABELS`` order (unknown keys last, by their own name); width and height as one viewport."""
    values = dict(settings)
    if "viewport_width" in values or "viewport_height" in values:
        values["viewport"] = f"{values.pop('viewport_width', '?')} × {values.pop('viewport_height', '?')} px"
    ordered = [key for key in LABELS if key in values] + sorted(key for key in values if key not in LABELS)
    return [
        SettingRow(
            name=LABELS.get(key, key.replace("_", " ")),
            value=_words(key, values[key]),
            meaning=_meaning("viewport_width" if key == "viewport" else key),
        )
        for key in ordered
    ]


def _words(key: str, value: Any) -> str:
    if value is None or value == "" or value == []:
        return EMPTY_WORDS.get(key, "none")
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key == "prices" and isinstance(value, dict):
        return prices_words(value)
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {_words(k, v)}" for k, v in value.items())
    return str(value)


def prices_words(prices: dict[str, Any]) -> str:
    """``coder ? in / ? out · vlm 0.5 in / 1.5 out``: ``?`` for a price not given."""

    def price(value: Any) -> str:
        return "?" if value is None else f"{value:g}"

    parts = []
    for role, role_prices in prices.items():
        given = role_prices if isinstance(role_prices, dict) else {}
        parts.append(
            f"{role} {price(given.get('input_usd_per_mtok'))} in / {price(given.get('output_usd_per_mtok'))} out"
        )
    return " · ".join(parts)


def _meaning(key: str) -> str:
    field = AgentContext.model_fields.get(key)
    return (field.description or "") if field is not None else ""
