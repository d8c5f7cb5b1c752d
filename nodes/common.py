"""What every node shares: timing and progress events, the step being worked on, paths."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from webgen_agent.core.context import AgentContext
from webgen_agent.core.events import ProgressEvent
from webgen_agent.core.state import AgentState, Step, StepUpdate
from webgen_agent.nodes.resources import get_resources
from webgen_agent.tools.models import Usage

Update = dict[str, Any]
NodeFn = Callable[[AgentState, Runtime[AgentContext]], Awaitable[Update]]


def workspace_dir(state: AgentState) -> Path:
    return Path(state["out_dir"]) / "workspace"


WORKSPACE_MARKER = ".webgen-manifest"  # which snapshot the workspace on disk holds


def prepared_workspace(state: AgentState) -> Path:
    """The run's workspace, made to hold exactly the snapshot the state names.

    After a backtrack, a resume (the dead process may have written half a step) or a fork (a new
    folder), the files on disk differ from the state; they are restored from the store.
    """
    workspace = workspace_dir(state)
    workspace.mkdir(parents=True, exist_ok=True)
    files = state.get("files") or ""
    marker = workspace / WORKSPACE_MARKER
    if not (marker.exists() and marker.read_text() == files):
        get_resources().store.materialize(files or None, workspace)
        marker.write_text(files)
    return workspace


def current_step(state: AgentState) -> Step:
    return state["steps"][state["current"]]


def edit_step(state: AgentState) -> Step | None:
    index = state.get("edit_step")
    return None if index is None else state["steps"][index]


def usage_record(usage: Usage) -> dict[str, int]:
    return {"input": usage.input_tokens, "output": usage.output_tokens, "calls": usage.calls}


def _emit(runtime: Runtime[AgentContext], event: ProgressEvent) -> None:
    writer = runtime.stream_writer
    if writer is not None:
        writer({"webgen": event.model_dump(exclude_none=True)})


def node(fn: NodeFn) -> NodeFn:
    """Decorate a node: emit start/end progress events and record its wall time on its step.

    The node's name is its function's name (what the graph registers it as). The step is the last
    one the node's update names, else the state's current step.
    """
    name = fn.__name__

    @functools.wraps(fn)
    async def run(state: AgentState, runtime: Runtime[AgentContext]) -> Update:
        step_index = state.get("current")
        _emit(runtime, ProgressEvent(node=name, step=step_index, phase="start"))
        started = time.monotonic()
        update = await fn(state, runtime)
        seconds = round(time.monotonic() - started, 3)
        patches: list[StepUpdate] = list(update.get("steps") or [])
        if patches:
            step_index = patches[-1]["index"]
        if step_index is not None:
            own = next((p for p in patches if p["index"] == step_index), None)
            if own is None:
                own = {"index": step_index}
                patches.append(own)
            own["timings"] = {**own.get("timings", {}), name: seconds}
            update["steps"] = patches
        tokens = (patches[-1].get("tokens", {}) if patches else {}).get(name, {})
        _emit(
            runtime,
            ProgressEvent(
                node=name,
                step=step_index,
                phase="end",
                seconds=seconds,
                screenshot_score=_last(patches, "screenshot_score"),
                gui_score=_last(patches, "gui_score"),
                errored=_last(patches, "errored"),
                message=str(update.pop("_message", "")),
                input_tokens=tokens.get("input", 0),
                output_tokens=tokens.get("output", 0),
            ),
        )
        return update

    return run


def _last(patches: list[StepUpdate], key: str) -> Any:
    for patch in reversed(patches):
        if key in patch:
            return patch[key]  # type: ignore[literal-required]
    return None


def store():
    """The blob store of the bound resources."""
    return get_resources().store
