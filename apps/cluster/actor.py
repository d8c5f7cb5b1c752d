"""The Ray actor that runs trajectories: one per worker process, several runs at once.

An actor owns its live resources (one Chromium, its dev servers, the dependency cache of its
machine) for its whole life and binds them around each run, exactly as the in-process rollout does
around its workers. Progress comes back as a stream: ``started``, the run's events, ``ended``.
Ray is imported by the driver only; this module runs inside a Ray worker and needs nothing of it.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from webgen_agent.apps.rollout.service import TrajectoryDriver, TrajectoryOutcome, TrajectorySpec
from webgen_agent.checkpoints.database import Database
from webgen_agent.core.context import AgentContext
from webgen_agent.nodes.resources import Resources, bind_resources


class RolloutActor:
    """Runs (or continues) trajectories; ``runs_per_actor`` calls of ``run`` proceed at once."""

    def __init__(self, context_json: str, db: str, out_dir: str) -> None:
        self.context = AgentContext.model_validate_json(context_json)
        self.database = Database.of(db)
        self.out_dir = Path(out_dir)
        self._resources: Resources | None = None
        self._driver: TrajectoryDriver | None = None
        self._streams: dict[str, asyncio.Queue[dict[str, Any] | None]] = {}

    def where(self) -> dict[str, Any]:
        """This actor's process and machine (the driver marks its runs and reaps its node if it dies)."""
        import ray

        return {"pid": os.getpid(), "host": socket.gethostname(), "node_id": ray.get_runtime_context().get_node_id()}

    def _ready(self) -> TrajectoryDriver:
        if self._driver is None:
            # What an earlier actor on this machine left running when it was killed.
            Resources.reap_orphans(self.database)
            self._resources = Resources(self.database, chromium=self.context.chromium)
            self._driver = TrajectoryDriver(
                context=self.context, db_path=self.database, out_dir=self.out_dir, listener=self
            )
        return self._driver

    async def run(self, spec_json: str) -> AsyncIterator[dict[str, Any]]:
        """Stream of ``{"kind": "started" | "event" | "ended", ...}`` for one trajectory."""
        spec = TrajectorySpec.model_validate_json(spec_json)
        driver = self._ready()
        stream: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._streams[spec.run_id] = stream

        async def drive() -> None:
            try:
                assert self._resources is not None
                with bind_resources(self._resources):
                    await driver.run_one(spec)
            finally:
                stream.put_nowait(None)

        task = asyncio.create_task(drive())
        try:
            while (item := await stream.get()) is not None:
                yield item
            await task
        finally:
            self._streams.pop(spec.run_id, None)
            if not task.done():
                task.cancel()

    async def close(self) -> None:
        """Stop this actor's servers and browser."""
        if self._resources is not None:
            await self._resources.close()
            self._resources = None
            self._driver = None

    # -- RolloutListener (called by the driver inside this actor) -------------------------------
    def started(self, spec: TrajectorySpec, *, resumed: bool) -> None:
        self._send(spec.run_id, {"kind": "started", "resumed": resumed})

    def event(self, spec: TrajectorySpec, event: dict[str, Any]) -> None:
        self._send(spec.run_id, {"kind": "event", "event": event})

    def ended(self, outcome: TrajectoryOutcome) -> None:
        self._send(outcome.run_id, {"kind": "ended", "outcome": outcome.model_dump(mode="json")})

    def _send(self, run_id: str, item: dict[str, Any]) -> None:
        stream = self._streams.get(run_id)
        if stream is not None:
            stream.put_nowait(item)
