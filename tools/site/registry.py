"""npm's registry as the agent sees it: which one npm installs from, and whether it answers."""

from __future__ import annotations

import dataclasses
import os
import time

import httpx

from webgen_agent.tools.endpoints import connection_problem

DEFAULT_REGISTRY = "https://registry.npmjs.org/"
REGISTRY_UNREACHABLE = "`npm install` needs npm's registry, which cannot be reached"
_REGISTRY_CONNECT_TIMEOUT_S = 3.0


def npm_registry() -> str:
    """The registry npm installs from: npm_config_registry, else npm's default."""
    return os.environ.get("npm_config_registry") or os.environ.get("NPM_CONFIG_REGISTRY") or DEFAULT_REGISTRY


# How long an answer of the registry check stands: an install the dependency cache cannot serve
# asks again only after this (a reachable registry rarely goes away; an unreachable one is asked
# sooner again, as the network may come back).
REGISTRY_REACHABLE_TTL_S = 300.0
REGISTRY_UNREACHABLE_TTL_S = 15.0


@dataclasses.dataclass
class _RegistryCheck:
    """The last answer of ``registry_problem`` for one registry, and when it was asked."""

    asked_at: float
    problem: str | None

    def fresh(self, now: float) -> bool:
        ttl = REGISTRY_REACHABLE_TTL_S if self.problem is None else REGISTRY_UNREACHABLE_TTL_S
        return now - self.asked_at < ttl


_REGISTRY_CHECKS: dict[str, _RegistryCheck] = {}  # by registry URL: the process asks each one rarely


async def registry_problem(*, fresh: bool = False) -> str | None:
    """Why npm's registry cannot be reached from here; None when it answers (any HTTP status).

    Asked before an install the dependency cache cannot serve: npm itself would wait out its
    retries (minutes) before failing, and the retries with looser flags would wait again. The
    answer is kept per registry for a while (``REGISTRY_*_TTL_S``), so that installs do not each
    pay a request; ``fresh`` asks now whatever is kept (``webgen-agent doctor``).
    """
    registry = npm_registry()
    kept = _REGISTRY_CHECKS.get(registry)
    if kept is not None and not fresh and kept.fresh(time.monotonic()):
        return kept.problem
    problem = None
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(10.0, connect=_REGISTRY_CONNECT_TIMEOUT_S)) as client:
            await client.get(registry)
    except httpx.HTTPError as error:
        problem = connection_problem(error)
    _REGISTRY_CHECKS[registry] = _RegistryCheck(time.monotonic(), problem)
    return problem


def registry_unreachable(error: str | None) -> bool:
    """Whether an execution error is the unreachable registry (``install_dependencies`` gave up at once)."""
    return bool(error) and REGISTRY_UNREACHABLE in str(error)
