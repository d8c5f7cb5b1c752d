"""Rollouts on Ray: the driver process plans, actors run, the listener sees what it sees in-process.

``run_rollout_on_ray`` starts (or joins) a Ray cluster, starts actors (each reserving
``cpus_per_run`` x ``runs_per_actor`` CPUs), and keeps ``runs_per_actor`` trajectories in flight on
each. When an actor dies (killed, out of memory, its machine gone) its unfinished trajectories are
marked interrupted, whatever its processes left running on its machine is reaped, a replacement
actor starts, and the trajectories continue there from their last checkpoints.
"""

from __future__ import annotations

import asyncio
import collections
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webgen_agent.apps.cluster.settings import (
    FORWARDED_ENV_PREFIXES,
    RaySettings,
    check_store_reaches_nodes,
    import_ray,
)
from webgen_agent.apps.rollout.service import RolloutListener, TrajectoryOutcome, TrajectorySpec
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.core.context import AgentContext

# A trajectory whose actor died this many times is given up (reported failed; a re-run continues it).
MAX_ATTEMPTS = 3


def _reap_node(db: str) -> list[int]:
    """Run on the dead actor's machine: kill the process groups of agent processes that are gone."""
    from webgen_agent.nodes.resources import Resources

    return Resources.reap_orphans(Database.of(db))


@dataclass
class _Actor:
    handle: Any
    where: dict[str, Any]
    generation: int = 0
    running: set[str] = field(default_factory=set)


class _RayRollout:
    def __init__(
        self,
        ray: Any,
        settings: RaySettings,
        *,
        context: AgentContext,
        database: Database,
        out_dir: Path,
        listener: RolloutListener | None,
    ) -> None:
        from webgen_agent.apps.cluster.actor import RolloutActor

        self.ray = ray
        self.settings = settings
        self.database = database
        self.listener = listener
        self.args = (context.model_dump_json(), database.target, str(out_dir))
        self.remote_actor = ray.remote(RolloutActor).options(
            num_cpus=settings.cpus_per_actor, max_concurrency=settings.runs_per_actor + 4, max_restarts=0
        )
        self.runs = RunIndex(database)
        self._replacing = asyncio.Lock()

    async def start_actor(self) -> _Actor:
        handle = self.remote_actor.remote(*self.args)
        return _Actor(handle=handle, where=await handle.where.remote())

    async def drive(self, actor: _Actor, spec: TrajectorySpec) -> TrajectoryOutcome | None:
        """Run one trajectory on ``actor``; None when the actor died under it."""
        actor.running.add(spec.run_id)
        try:
            async for ref in actor.handle.run.options(num_returns="streaming").remote(spec.model_dump_json()):
                item = await ref
                if item["kind"] == "started" and self.listener is not None:
                    self.listener.started(spec, resumed=item["resumed"])
                elif item["kind"] == "event" and self.listener is not None:
                    self.listener.event(spec, item["event"])
                elif item["kind"] == "ended":
                    outcome = TrajectoryOutcome.model_validate(item["outcome"])
                    if self.listener is not None:
                        self.listener.ended(outcome)
                    return outcome
        except self.ray.exceptions.RayActorError:
            return None
        finally:
            actor.running.discard(spec.run_id)
        raise RuntimeError(f"the actor ended {spec.run_id} without an outcome")

    async def replace(self, actor: _Actor, generation: int) -> None:
        """Once per death: mark its runs interrupted, reap its machine, start a new actor in its place."""
        async with self._replacing:
            if actor.generation != generation:
                return  # another of its slots did it already
            dead = actor.where
            for run_id in list(actor.running):
                record = await self.runs.aget(run_id)
                if record is not None and record.status == "running" and record.pid == dead["pid"]:
                    await self.runs.aupdate(run_id, status="interrupted", error="its Ray actor died")
            actor.running.clear()
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            reaper = self.ray.remote(_reap_node).options(
                num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(dead["node_id"], soft=True)
            )
            await reaper.remote(self.database.target)
            fresh = await self.start_actor()
            actor.handle, actor.where = fresh.handle, fresh.where
            actor.generation += 1

    async def close(self, actors: list[_Actor]) -> None:
        await asyncio.gather(*(a.handle.close.remote() for a in actors), return_exceptions=True)
        for a in actors:
            self.ray.kill(a.handle)


async def run_rollout_on_ray(
    specs: list[TrajectorySpec],
    *,
    context: AgentContext,
    db: str | Path | Database,
    out_dir: str | Path,
    settings: RaySettings,
    listener: RolloutListener | None = None,
) -> list[TrajectoryOutcome]:
    """``run_rollout`` on Ray actors: the same outcomes, in plan order, and the same listener calls."""
    ray = import_ray()
    database = Database.of(db)
    if not database.is_postgres:
        database = Database.of(database.path.resolve())
    started_here = not ray.is_initialized()
    if started_here:
        env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV_PREFIXES)}
        ray.init(
            address=settings.address or None,
            include_dashboard=False,
            configure_logging=False,
            log_to_driver=False,
            runtime_env={"env_vars": env},
        )
    try:
        check_store_reaches_nodes(database, ray.nodes())
        count = settings.actor_count(float(ray.cluster_resources().get("CPU", 0)))
        out = await asyncio.to_thread(Path(out_dir).resolve)
        rollout = _RayRollout(ray, settings, context=context, database=database, out_dir=out, listener=listener)
        actors = list(await asyncio.gather(*(rollout.start_actor() for _ in range(count))))
        pending = collections.deque(range(len(specs)))
        attempts = [0] * len(specs)
        outcomes: list[TrajectoryOutcome | None] = [None] * len(specs)

        async def slot(actor: _Actor) -> None:
            while pending:
                position = pending.popleft()
                spec = specs[position]
                attempts[position] += 1
                generation = actor.generation
                outcome = await rollout.drive(actor, spec)
                if outcome is not None:
                    outcomes[position] = outcome
                    continue
                await rollout.replace(actor, generation)
                if attempts[position] < MAX_ATTEMPTS:
                    pending.appendleft(position)  # continues from its checkpoints on the new actor
                else:
                    given_up = outcomes[position] = TrajectoryOutcome(
                        run_id=spec.run_id,
                        group_id=spec.group_id,
                        status="failed",
                        error=f"its Ray actor died {MAX_ATTEMPTS} times; run the same command again to continue",
                    )
                    if listener is not None:
                        listener.ended(given_up)

        try:
            async with asyncio.TaskGroup() as group:
                for actor in actors:
                    for _ in range(settings.runs_per_actor):
                        group.create_task(slot(actor))
        finally:
            await rollout.close(actors)
        return [outcome for outcome in outcomes if outcome is not None]
    finally:
        if started_here:
            ray.shutdown()
