"""The models a recorded run used, as the settings of the command that continues it (``resume``, ``fork``).

A run records each role's model, endpoint and sampling (never a key: graph/api.py,
``recorded_settings``), so continuing it needs no model flags again. What is given now wins: a flag,
an environment variable or ``.env`` naming a model or endpoint (for every role or for one) is used,
and the recorded value fills only what nothing gave.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webgen_agent.core.context import Settings

ROLES = ("coder", "vlm", "feedback")


def with_recorded_models(settings: Settings, recorded: dict[str, Any]) -> Settings:
    """``settings`` with the recorded run's model and endpoint of every role nothing given now names."""
    models = recorded.get("models") or {}
    filled: dict[str, Any] = {}
    for role in ROLES:
        model = models.get(role) or {}
        for field in ("model", "base_url"):
            given = getattr(settings, field) or getattr(settings, f"{role}_{field}")
            if not given and model.get(field):
                filled[f"{role}_{field}"] = model[field]
    coder = models.get("coder") or {}
    for field in ("temperature", "top_p"):
        if f"coder_{field}" not in settings.model_fields_set and coder.get(field) is not None:
            filled[f"coder_{field}"] = coder[field]
    return settings.model_copy(update=filled)
