"""The driver side of the Ray backend: a pool of actors that runs jobs and survives their deaths.

``RayPool`` starts (or joins) a Ray cluster with its first job, starts its actors together (each
reserving ``cpus_per_run`` x ``runs_per_actor`` CPUs, each warm before it takes work) and hands every
job to a free run slot of an actor. When an actor dies (killed, out of memory, its machine gone) its
unfinished runs are marked interrupted, whatever its processes left running on its machine is
reaped, a replacement actor starts, and the job is sent again to it: a run continues from its last
checkpoint there. The rollout (apps/cluster/rollout.py) and the benchmark (apps/cluster/bench.py)
are both jobs of such a pool.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from webgen_agent.apps.cluster.actor import Item, WorkActor, WorkFactory
from webgen_agent.apps.cluster.settings import (
    FORWARDED_ENV_PREFIXES,
    RaySettings,
    check_store_reaches_nodes,
    import_ray,
)
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.core.errors import ConfigError

# A job whose actor died this many times in a row without the job getting on is given up (reported
# failed; a re-run continues it).
MAX_ATTEMPTS = 3
GIVEN_UP = f"its Ray actor died {MAX_ATTEMPTS} times in a row; run the same command again to continue"


def _reap_node(db: str) -> list[int]:
    """Run on the dead actor's machine: kill the process groups of agent processes that are gone."""
    from webgen_agent.nodes.resources import Resources

    return Resources.reap_orphans(Database.of(db))


def start_ray(ray: Any, settings: RaySettings) -> bool:
    """Join the cluster at ``settings.address``, or start a local instance; True when this call
    connected (the caller then shuts it down), False when this process was already connected.

    A local instance is started lean: no dashboard, no log forwarding, no usage report.
    """
    if ray.is_initialized():
        return False
    env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV_PREFIXES)}
    if not settings.address:  # a local instance's actors keep this machine's state where the driver does
        env.setdefault("WEBGEN_STATE_DIR", str(Path(".webgen").resolve()))
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        ray.init(
            # "local": a new instance even when RAY_ADDRESS or a `ray start` on this machine names a cluster.
            address=settings.address or "local",
            include_dashboard=False,
            configure_logging=False,
            log_to_driver=False,
            runtime_env={"env_vars": env},
        )
    except ConnectionError as exc:  # no cluster at that address
        where = settings.address or "local"
        raise ConfigError(f"--ray {where}: no Ray cluster there ({str(exc).splitlines()[0][:200]})") from None
    return True


class _Progress:
    """``on_item`` that notes whether the job sent anything back since it was (re)sent."""

    def __init__(self, on_item: Callable[[Item], None]) -> None:
        self.on_item, self.made = on_item, False

    def __call__(self, item: Item) -> None:
        kind = item.get("kind")
        if kind in ("case", "site") or (kind == "event" and item.get("event", {}).get("phase") == "end"):
            self.made = True  # a node finished, a test case was recorded: the job got on
        self.on_item(item)


@dataclass
class _Actor:
    handle: Any
    where: dict[str, Any]
    generation: int = 0
    running: set[str] = field(default_factory=set)


class RayPool:
    """Actors of one kind of work; ``await pool.run(...)`` runs a job on a free slot (use as
    ``async with``: the actors start with the first job, or ``start()``, and are closed, with
    their servers, on exit)."""

    def __init__(self, settings: RaySettings, *, work: WorkFactory, db: str | Database, chromium: str = "") -> None:
        database = Database.of(db)
        # Actors run elsewhere (another working folder, another machine): the path must not be relative.
        self.database = database if database.is_postgres else Database.of(database.path.resolve())
        self.settings = settings
        self._work = work
        self._chromium = chromium
        self._ray: Any = None
        self._remote: Any = None
        self._started_here = False
        self._actors: list[_Actor] = []
        self._slots: asyncio.Queue[_Actor] = asyncio.Queue()
        self._replacing = asyncio.Lock()
        self._starting = asyncio.Lock()
        self._failed: Exception | None = None

    async def __aenter__(self) -> RayPool:
        return self

    async def start(self) -> None:
        """Join or start Ray and start the actors, once (the first job does it: a command with
        nothing left to do starts no cluster)."""
        async with self._starting:
            if self._actors:
                return
            if self._failed is not None:
                raise self._failed  # said once: the jobs waiting for the same start are not retried
            try:
                self._ray = ray = import_ray()
                self._started_here = start_ray(ray, self.settings)
                check_store_reaches_nodes(self.database, ray.nodes())
                count = self.settings.actor_count(float(ray.cluster_resources().get("CPU", 0)))
                self._remote = ray.remote(WorkActor).options(
                    num_cpus=self.settings.cpus_per_actor,
                    max_concurrency=self.settings.runs_per_actor + 4,
                    max_restarts=0,
                )
                self._actors = list(await asyncio.gather(*(self._start_actor() for _ in range(count))))
            except Exception as exc:
                self._failed = exc
                await self._shutdown()
                raise
            for _ in range(self.settings.runs_per_actor):
                for actor in self._actors:
                    self._slots.put_nowait(actor)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._shutdown()

    async def _start_actor(self) -> _Actor:
        handle = self._remote.remote(self._work, self.database.target, self._chromium)
        return _Actor(handle=handle, where=await handle.where.remote())

    async def run(
        self,
        job: Callable[[], str],
        *,
        on_item: Callable[[Item], None],
        run_id: str | None = None,
        may_start: Callable[[], bool] | None = None,
    ) -> tuple[bool, Any] | None:
        """Run one job on a free slot: ``(True, result)``, or ``(False, None)`` when its actors died
        ``MAX_ATTEMPTS`` times. ``job`` builds the job when it is sent (again after a death, so it
        can say what earlier attempts recorded); ``run_id``: the agent run it drives, if any.
        ``may_start`` is asked once a slot is free, as an in-process worker asks before taking the
        next job (a command's budget): when it says no, nothing is sent and the answer is None.
        A job sent again after its actor died was taken up already and is not asked about."""
        await self.start()
        actor = await self._slots.get()
        try:
            if may_start is not None and not may_start():
                return None
            deaths = 0
            while deaths < MAX_ATTEMPTS:
                generation = actor.generation
                progress = _Progress(on_item)
                done, value = await self._drive(actor, job(), progress, run_id)
                if done:
                    return True, value
                # Only deaths that cost the job all its work count: a job that got on before its
                # actor was killed (an operator, a node lost) is not the one killing its actors.
                deaths = 0 if progress.made else deaths + 1
                await self._replace(actor, generation)  # the same slot, on the new actor
            return False, None
        finally:
            self._slots.put_nowait(actor)

    async def _drive(
        self, actor: _Actor, job_json: str, on_item: Callable[[Item], None], run_id: str | None
    ) -> tuple[bool, Any]:
        if run_id is not None:
            actor.running.add(run_id)
        try:
            async for ref in actor.handle.run.options(num_returns="streaming").remote(job_json):
                for item in await ref:
                    if item.get("kind") == "ended":
                        return True, item.get("value")
                    on_item(item)
        except self._ray.exceptions.RayActorError:
            return False, None
        finally:
            if run_id is not None:
                actor.running.discard(run_id)
        raise RuntimeError(f"the actor ended job {job_json[:80]} without a result")

    async def _replace(self, actor: _Actor, generation: int) -> None:
        """Once per death: mark its runs interrupted, reap its machine, start a new actor in its place."""
        async with self._replacing:
            if actor.generation != generation:
                return  # another of its slots did it already
            dead = actor.where
            runs = RunIndex(self.database)
            for run_id in list(actor.running):
                record = await runs.aget(run_id)
                if record is not None and record.status == "running" and record.pid == dead["pid"]:
                    await runs.aupdate(run_id, status="interrupted", error="its Ray actor died")
            actor.running.clear()
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            reaper = self._ray.remote(_reap_node).options(
                num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(dead["node_id"], soft=True)
            )
            await reaper.remote(self.database.target)
            fresh = await self._start_actor()
            actor.handle, actor.where = fresh.handle, fresh.where
            actor.generation += 1

    async def _shutdown(self) -> None:
        try:
            if self._actors:
                handles = [a.handle for a in self._actors]
                await asyncio.gather(*(h.close.remote() for h in handles), return_exceptions=True)
                for handle in handles:
                    self._ray.kill(handle)
        finally:
            self._actors = []
            if self._started_here:
                self._ray.shutdown()
                self._started_here = False
