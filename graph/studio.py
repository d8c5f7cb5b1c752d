"""What ``langgraph dev`` / LangGraph Studio load (see ``langgraph.json``).

- ``graph``: compiled without a checkpointer (the server brings its own). The context schema
  (``AgentContext``) is what Studio shows as the editable settings form.
- ``checkpointer``: the server keeps its threads with the project's own saver in ``WEBGEN_DB``, so
  runs made through the server are in the same database as CLI runs; the saver also keeps each
  thread's row in the runs table (``checkpoints/recording.py``), so ``runs``, ``history`` and
  ``report`` list and read them.
- ``app``: an (empty) HTTP app whose lifespan closes the process's live resources (Chromium, dev
  servers) when the server shuts down. uvicorn ends a SIGTERM'd server by re-raising the signal
  after the lifespans ran, so exit handlers would never run.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from langgraph.checkpoint.base import BaseCheckpointSaver
from starlette.applications import Starlette

from webgen_agent.checkpoints.saver import open_checkpointer
from webgen_agent.core.context import Settings
from webgen_agent.graph.builder import compile_graph
from webgen_agent.nodes.resources import close_default_resources

graph = compile_graph()


@contextlib.asynccontextmanager
async def checkpointer() -> AsyncIterator[BaseCheckpointSaver]:
    async with open_checkpointer(Settings().db) as saver:
        yield saver


@contextlib.asynccontextmanager
async def _lifespan(_app: Starlette) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await close_default_resources()


app = Starlette(lifespan=_lifespan)
