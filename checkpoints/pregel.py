"""The LangGraph internals this project relies on, in one place.

LangGraph has no public API for these: the checkpointer sees raw channel names, and
``update_state`` takes no context. Each name is pinned by tests/test_pregel.py against the
installed LangGraph (its constants and a real graph), so an upgrade that renames one fails there,
not in a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

# The pending-write channels of a task's error and of its interrupts (aput_writes sees these).
ERROR_CHANNEL = "__error__"
INTERRUPT_CHANNEL = "__interrupt__"
# The config key under which a graph reads its Runtime (the run's context).
RUNTIME_CONFIG_KEY = "__pregel_runtime"


def trigger_channel(node: str) -> str:
    """The channel a conditional edge writes to trigger ``node``; it stays in a checkpoint while the
    graph waits before that node (``interrupt_before``)."""
    return f"branch:to:{node}"


def waits_before(channel_values: Mapping[str, Any], node: str) -> bool:
    """A checkpoint's channel values were saved with ``node`` due next (a pause before it)."""
    return trigger_channel(node) in channel_values


def with_runtime_context(config: RunnableConfig, context: Any) -> RunnableConfig:
    """``config`` carrying ``context`` as the runtime's, for ``update_state`` (whose routers read the
    runtime's context, and which takes no context argument)."""
    # Imported here: langgraph.runtime pulls in LangGraph's SDK and httpx, which the readers of a
    # checkpoint (``history``, ``report``) do not need.
    from langgraph.runtime import Runtime

    return {**config, "configurable": {**config.get("configurable", {}), RUNTIME_CONFIG_KEY: Runtime(context=context)}}
