"""The LangGraph internals this project relies on, in one place.

LangGraph has no public API for these: the checkpointer sees raw channel names,
``update_state`` takes no context, and a task's result is saved only after it returns. Each name is
pinned by tests/test_pregel.py against the installed LangGraph (its constants and a real graph), so
an upgrade that renames one fails there, not in a run.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

# The pending-write channels of a task's error and of its interrupts (aput_writes sees these).
ERROR_CHANNEL = "__error__"
INTERRUPT_CHANNEL = "__interrupt__"
# The config key under which a graph reads its Runtime (the run's context).
RUNTIME_CONFIG_KEY = "__pregel_runtime"
# The pending-write channel of a finished task's result (what a node that calls it again gets back).
RETURN_CHANNEL = "__return__"
# The config key of a graph run's checkpointer, as its tasks see it.
CHECKPOINTER_CONFIG_KEY = "__pregel_checkpointer"
# What separates the levels of a checkpoint namespace ("<node>:<task id>|<called task>:<task id>").
NAMESPACE_SEPARATOR = "|"


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


async def keep_task_result(value: Any) -> None:
    """Store ``value`` now, through the run's checkpointer, as the result of the LangGraph task running
    this code (a task a node called); returns once it is in the database.

    LangGraph hands a finished task's writes to the checkpointer through a background submit, so a
    process killed (or a database outage waited out) between the answer's arrival and that write
    loses a result it had, and the node, run again, does the work again. Written here first, under
    the key LangGraph itself files it by (thread, the graph's namespace, checkpoint, task id), the
    node run again finds it as LangGraph's own pending write; LangGraph's later write of the same
    row is an insert that leaves a row already there alone. A no-op outside a checkpointed run.
    """
    from langgraph.config import get_config
    from langgraph.runtime import get_runtime

    saver = get_config().get("configurable", {}).get(CHECKPOINTER_CONFIG_KEY)
    info = get_runtime().execution_info
    if saver is None or info is None or info.thread_id is None:
        return
    # A called task's namespace is "<graph's>|<node>:<id>|<task>:<id>"; its writes go under the graph's.
    graph_ns = NAMESPACE_SEPARATOR.join(info.checkpoint_ns.split(NAMESPACE_SEPARATOR)[:-2])
    where: RunnableConfig = {
        "configurable": {"thread_id": info.thread_id, "checkpoint_ns": graph_ns, "checkpoint_id": info.checkpoint_id}
    }
    await saver.aput_writes(where, [(RETURN_CHANNEL, value)], info.task_id)


P = ParamSpec("P")
T = TypeVar("T")


def kept_task(work: Callable[P, Awaitable[T]]) -> Any:
    """A LangGraph task (``langgraph.func.task``) whose result is stored (``keep_task_result``) before
    it returns: what a node that paid for an answer (a model's reply) calls it through."""
    from langgraph.func import task

    @functools.wraps(work)
    async def kept(*args: P.args, **kwargs: P.kwargs) -> T:
        value = await work(*args, **kwargs)
        await keep_task_result(value)
        return value

    return task(kept)
