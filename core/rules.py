"""A run's rules, resolved once: its profile's, its environment's (inference or rollout), its loop's,
and the tri-state settings (a run's own ``True``/``False``, else ``None``: the rule's) decided.

``AgentContext.rules`` is the one place this happens; nodes, routers and the command line read
``context.rules`` and never look a profile or loop up by name, nor decide a tri-state again.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from webgen_agent.core.loops import LoopRules, loop_rules
from webgen_agent.core.profiles import EnvironmentName, EnvironmentRules, ProfileRules, profile_rules


@dataclass(frozen=True)
class RunRules:
    profile: ProfileRules
    environment: EnvironmentRules
    loop: LoopRules
    replay_tests: bool  # passing GUI tests are recorded and replayed (docs/replay.md)
    requirement_checks: bool  # each requirement is checked after every judged page (docs/loops.md)


@functools.cache
def run_rules(
    profile: str,
    environment: EnvironmentName,
    loop: str,
    replay_tests: bool | None = None,
    requirement_checks: bool | None = None,
) -> RunRules:
    """The rules of a run with these settings (the same settings give the same object)."""
    rules = profile_rules(profile)
    loop_of = loop_rules(loop)
    return RunRules(
        profile=rules,
        environment=rules.environment(environment),
        loop=loop_of,
        replay_tests=rules.replay_tests if replay_tests is None else replay_tests,
        requirement_checks=loop_of.checks_by_default if requirement_checks is None else requirement_checks,
    )
