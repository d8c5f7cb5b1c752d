"""Rollouts on Ray: each trajectory is a job of a ``RayPool``; the listener sees what it sees in-process."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

from webgen_agent.apps.cluster.actor import Item, emit
from webgen_agent.apps.cluster.driver import GIVEN_UP, RayPool
from webgen_agent.apps.cluster.settings import RaySettings
from webgen_agent.apps.rollout.service import RolloutListener, TrajectoryDriver, TrajectoryOutcome, TrajectorySpec
from webgen_agent.checkpoints.database import Database
from webgen_agent.core.context import AgentContext, dump_with_secrets
from webgen_agent.core.costs import Spending
from webgen_agent.nodes.resources import Resources


class RolloutWork:
    """Inside an actor: runs (or continues) trajectories with the in-process rollout's driver."""

    def __init__(self, context_json: str, out_dir: str, resources: Resources) -> None:
        context = AgentContext.model_validate_json(context_json)
        self.driver = TrajectoryDriver(
            context=context, db_path=resources.database, out_dir=Path(out_dir), listener=self
        )

    async def run(self, job_json: str) -> Any:
        outcome = await self.driver.run_one(TrajectorySpec.model_validate_json(job_json))
        return outcome.model_dump(mode="json")

    async def close(self) -> None:
        return None

    # -- RolloutListener: progress goes to the driver, the outcome is the job's result ------------
    def started(self, spec: TrajectorySpec, *, resumed: bool) -> None:
        emit({"kind": "started", "resumed": resumed})

    def event(self, spec: TrajectorySpec, event: dict[str, Any]) -> None:
        emit({"kind": "event", "event": event})

    def ended(self, outcome: TrajectoryOutcome) -> None:
        return None


def rollout_pool(
    settings: RaySettings, *, context: AgentContext, db: str | Path | Database, out_dir: str | Path
) -> RayPool:
    """A pool of actors that run trajectories (enter it to start them)."""
    work = functools.partial(RolloutWork, dump_with_secrets(context), str(Path(out_dir).resolve()))
    return RayPool(settings, work=work, db=Database.of(db), chromium=context.chromium)


async def rollout_on_pool(
    pool: RayPool,
    specs: list[TrajectorySpec],
    *,
    listener: RolloutListener | None = None,
    spending: Spending | None = None,
) -> list[TrajectoryOutcome]:
    """``run_rollout`` on a started pool: the same outcomes, in plan order, and the same listener
    calls. With ``spending``, counted here from the events the actors send, no trajectory is sent
    once it is spent (those in flight finish); the ones never started have no outcome."""

    async def one(spec: TrajectorySpec) -> TrajectoryOutcome | None:
        def on_item(item: Item) -> None:
            if item["kind"] == "event" and spending is not None:
                spending.add(item["event"])
            if listener is None:
                return
            if item["kind"] == "started":
                listener.started(spec, resumed=item["resumed"])
            elif item["kind"] == "event":
                listener.event(spec, item["event"])

        may_start = spending.has_room if spending is not None else None
        ran = await pool.run(spec.model_dump_json, on_item=on_item, run_id=spec.run_id, may_start=may_start)
        if ran is None:
            return None
        done, value = ran
        if done:
            outcome = TrajectoryOutcome.model_validate(value)
        else:
            outcome = TrajectoryOutcome(run_id=spec.run_id, group_id=spec.group_id, status="failed", error=GIVEN_UP)
        if listener is not None:
            listener.ended(outcome)
        return outcome

    return [outcome for outcome in await asyncio.gather(*(one(spec) for spec in specs)) if outcome is not None]


async def run_rollout_on_ray(
    specs: list[TrajectorySpec],
    *,
    context: AgentContext,
    db: str | Path | Database,
    out_dir: str | Path,
    settings: RaySettings,
    listener: RolloutListener | None = None,
    spending: Spending | None = None,
) -> list[TrajectoryOutcome]:
    """``run_rollout`` on Ray actors (started for this call and closed at its end)."""
    async with rollout_pool(settings, context=context, db=db, out_dir=out_dir) as pool:
        return await rollout_on_pool(pool, specs, listener=listener, spending=spending)
