"""Settings of the Ray backend and the checks made before any work is sent to a cluster."""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

from pydantic import BaseModel, Field

from webgen_agent.checkpoints.database import Database
from webgen_agent.core.errors import ConfigError

RAY_EXTRA = "pip install 'webgen-agent[ray]'"
# Environment the actors need that a remote node would not have: model endpoints and keys, the
# project's settings. Only these prefixes travel (in Ray's runtime_env), nothing else of the driver's.
FORWARDED_ENV_PREFIXES = ("WEBGEN_", "OPENAI_")


class RaySettings(BaseModel):
    """Where and how wide: ``--ray [ADDRESS]``, ``--actors``, ``--runs-per-actor``, ``--cpus-per-run``."""

    address: str = Field(
        default="", description="Empty: a local Ray instance; 'auto' or host:port: an existing cluster."
    )
    actors: int | None = Field(default=None, ge=1, description="Actors to start; default: as many as the CPUs allow.")
    runs_per_actor: int = Field(default=2, ge=1, description="Runs one actor drives at the same time.")
    cpus_per_run: float = Field(
        default=1.0, gt=0, description="CPUs reserved per run (measured: a run keeps about one core busy)."
    )

    @property
    def cpus_per_actor(self) -> float:
        return self.cpus_per_run * self.runs_per_actor

    def actor_count(self, cluster_cpus: float) -> int:
        """``actors`` if given (checked to fit), else as many actors as the cluster's CPUs hold (at least one)."""
        fits = math.floor(cluster_cpus / self.cpus_per_actor + 1e-9)
        if self.actors is None:
            return max(1, fits)
        if self.actors > fits:
            raise ConfigError(
                f"{self.actors} actors x {self.runs_per_actor} runs x {self.cpus_per_run:g} CPU need "
                f"{self.actors * self.cpus_per_actor:g} CPUs; the cluster has {cluster_cpus:g}: "
                "lower --actors, --runs-per-actor or --cpus-per-run"
            )
        return self.actors


def import_ray() -> ModuleType:
    """The ray module, or a one-line error saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(f"--ray needs Ray: {RAY_EXTRA}") from exc
    return ray


def check_store_reaches_nodes(database: Database, nodes: list[dict[str, Any]]) -> None:
    """Several machines need one store they all reach: a SQLite file is local to one machine."""
    hosts = {node.get("NodeManagerAddress") for node in nodes if node.get("Alive")}
    if len(hosts) > 1 and not database.is_postgres:
        raise ConfigError(
            f"the Ray cluster has {len(hosts)} machines but the database {database} is a SQLite file on one of "
            "them: give --db postgresql://... (a PostgreSQL server every machine reaches)"
        )
