"""The profiles: one module of rules each (``ProfileRules``), looked up by name."""

from __future__ import annotations

from webgen_agent.core.profiles import default, upstream
from webgen_agent.core.profiles.rules import ERRORED_SCORE, EnvironmentName, EnvironmentRules, Profile, ProfileRules

PROFILES: dict[str, ProfileRules] = {rules.name: rules for rules in (default.RULES, upstream.RULES)}


def profile_rules(profile: str) -> ProfileRules:
    """The rules of ``profile``; an unknown name is a clear error."""
    try:
        return PROFILES[profile]
    except KeyError:
        raise ValueError(f"unknown profile {profile!r}: use one of {', '.join(PROFILES)}") from None


def environment_rules(profile: str, environment: EnvironmentName) -> EnvironmentRules:
    """How a run of ``profile`` observes its steps in ``environment`` (inference or rollout)."""
    return profile_rules(profile).environment(environment)


__all__ = [
    "ERRORED_SCORE",
    "PROFILES",
    "EnvironmentName",
    "EnvironmentRules",
    "Profile",
    "ProfileRules",
    "environment_rules",
    "profile_rules",
]
