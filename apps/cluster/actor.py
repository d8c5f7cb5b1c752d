"""The Ray actor: one worker process that owns its live resources and runs several jobs at once.

An actor owns one ``Resources`` (one Chromium, its dev servers, the dependency cache of its machine)
for its whole life and binds them around each job, as the in-process commands do around their
workers. What a job is depends on the work the actor was started with (``Work``): a rollout
trajectory (apps/cluster/rollout.py) or a WebGen-Bench record (apps/cluster/bench.py). A job's
progress goes back to the driver as a stream of batches of items (``emit``), then its result.
Ray is imported by the driver only; this module runs inside a Ray worker and needs nothing of it.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from typing import Any, Protocol

from webgen_agent.checkpoints.database import Database
from webgen_agent.nodes.resources import Resources, bind_resources
from webgen_agent.tools.gui_agent import import_browser_use

Item = dict[str, Any]


class Work(Protocol):
    """One kind of job an actor runs; built once per actor around its resources."""

    async def run(self, job_json: str) -> Any:
        """Run one job; progress through ``emit``; returns the job's result (JSON-able)."""
        ...

    async def close(self) -> None: ...


WorkFactory = Callable[[Resources], Work]

_stream: ContextVar[asyncio.Queue[Item | None] | None] = ContextVar("webgen_job_stream", default=None)


def emit(item: Item) -> None:
    """Send ``item`` to the driver on the stream of the job the calling code runs for.

    A context variable, not an argument: the job's tasks (LangGraph nodes, evaluation cases) copy
    the context they start in, so progress reaches the right job however deep it is made.
    """
    stream = _stream.get()
    if stream is not None:
        stream.put_nowait(item)


class WorkActor:
    """Runs jobs of one kind; ``runs_per_actor`` calls of ``run`` proceed at once."""

    def __init__(self, make_work: WorkFactory, db: str, chromium: str) -> None:
        self.database = Database.of(db)
        self.chromium = chromium
        self._make_work = make_work
        self._resources: Resources | None = None
        self._work: Work | None = None

    def where(self) -> dict[str, Any]:
        """This actor's process and machine (the driver marks its runs and reaps its node if it dies).

        Also readies the actor (its imports and resources), so a started actor is a warm one."""
        import ray

        self._ready()
        return {"pid": os.getpid(), "host": socket.gethostname(), "node_id": ray.get_runtime_context().get_node_id()}

    def _ready(self) -> tuple[Resources, Work]:
        if self._resources is None or self._work is None:
            # browser-use (about 3 s, once per process) is imported while the actor starts, as a
            # long-lived in-process worker has it, not in the middle of its first job.
            import_browser_use()
            # What an earlier actor on this machine left running when it was killed.
            Resources.reap_orphans(self.database)
            self._resources = Resources(self.database, chromium=self.chromium)
            self._work = self._make_work(self._resources)
        return self._resources, self._work

    async def run(self, job_json: str) -> AsyncIterator[list[Item]]:
        """Batches of the job's items (whatever came since the last one), the last ending with
        ``{"kind": "ended", "value": <result>}``: one round trip per batch, not per event."""
        resources, work = self._ready()
        stream: asyncio.Queue[Item | None] = asyncio.Queue()

        async def drive() -> None:
            token = _stream.set(stream)
            try:
                with bind_resources(resources):
                    value = await work.run(job_json)
                stream.put_nowait({"kind": "ended", "value": value})
            finally:
                _stream.reset(token)
                stream.put_nowait(None)

        task = asyncio.create_task(drive())
        try:
            ended = False
            while not ended:
                batch = [await stream.get()]
                while not stream.empty():
                    batch.append(stream.get_nowait())
                ended = batch[-1] is None
                items = [item for item in batch if item is not None]
                if items:
                    yield items
            await task  # a job that raised raises here, and so on the driver
        finally:
            if not task.done():
                task.cancel()

    async def close(self) -> None:
        """Stop this actor's servers and browsers."""
        if self._work is not None:
            await self._work.close()
            self._work = None
        if self._resources is not None:
            await self._resources.close()
            self._resources = None
