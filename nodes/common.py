"""What every node shares: timing and progress events, the step being worked on, paths."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from langgraph.runtime import Runtime

from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.context import AgentContext, ModelSettings
from webgen_agent.core.costs import Usage, call_cost
from webgen_agent.core.events import ProgressEvent
from webgen_agent.core.money import add_costs
from webgen_agent.core.state import AgentState, NodeUpdate, SampledTurn, Step, StepUpdate
from webgen_agent.nodes.resources import get_resources, resources_ready
from webgen_agent.tools.endpoints import EndpointEvent, listen
from webgen_agent.tools.models import Message, StructuredAnswer, UsageMeter, metered

Update = NodeUpdate  # what a node returns to the graph (typed: core/state.py)
T = TypeVar("T")


@dataclass(frozen=True)
class NodeResult:
    """What a node's function returns to ``node``: its state update, and the line its progress event shows."""

    update: Update
    message: str = ""


NodeFn = Callable[[AgentState, Runtime[AgentContext]], Awaitable[NodeResult]]
GraphNode = Callable[[AgentState, Runtime[AgentContext]], Awaitable[Update]]


def workspace_dir(state: AgentState) -> Path:
    return Path(state["out_dir"]) / "workspace"


WORKSPACE_MARKER = ".webgen-manifest"  # which snapshot the workspace on disk holds


async def prepared_workspace(state: AgentState) -> Path:
    """The run's workspace, made to hold exactly the snapshot the state names.

    After a backtrack, a resume (the dead process may have written half a step) or a fork (a new
    folder), the files on disk differ from the state; they are restored from the store (in a
    worker thread: file and SQLite I/O never run on the event loop).
    """
    return await asyncio.to_thread(_prepare_workspace, workspace_dir(state), state.get("files") or "")


def _prepare_workspace(workspace: Path, files: str) -> Path:
    workspace.mkdir(parents=True, exist_ok=True)
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
    record = {"input": usage.input_tokens, "output": usage.output_tokens, "calls": usage.calls}
    return {**record, "uncounted": usage.uncounted} if usage.uncounted else record


def _emit(runtime: Runtime[AgentContext], event: ProgressEvent) -> None:
    writer = runtime.stream_writer
    if writer is not None:
        writer({"webgen": event.model_dump(exclude_none=True)})


class _EndpointLog:
    """Endpoint trouble met by one node run: each wait shown as progress, the sum kept for the step."""

    KEPT_REASONS = 5

    def __init__(self, runtime: Runtime[AgentContext], name: str, step: int | None) -> None:
        self.runtime, self.name, self.step = runtime, name, step
        self.records: dict[str, dict[str, Any]] = {}

    def __call__(self, event: EndpointEvent) -> None:
        record = self.records.setdefault(f"{self.name}/{event.role}", {"retries": 0, "waited_s": 0.0, "reasons": []})
        if event.kind == "wait":
            record["retries"] += 1
            record["waited_s"] = round(record["waited_s"] + event.sleep_s, 2)
        elif event.kind == "fallback":
            record["fallback"] = event.model
        elif event.kind == "tokenizer_unusable":
            record["cut_by_characters"] = record.get("cut_by_characters", 0) + 1
        else:
            record["condensed"] = record.get("condensed", 0) + 1
        reason = event.reason[:160]
        if reason and reason not in record["reasons"] and len(record["reasons"]) < self.KEPT_REASONS:
            record["reasons"].append(reason)
        _emit(self.runtime, ProgressEvent(node=self.name, step=self.step, phase="wait", message=event.line()))


def node(fn: NodeFn) -> GraphNode:
    """Decorate a node: emit start/end progress events and record its wall time on its step.

    The node's name is its function's name (what the graph registers it as). The step is the last
    one the node's update names, else the state's current step. What the node's model calls cost
    (each role at its price, docs/costs.md) is recorded there too, under ``cost``; calls the node
    meters apart (``metered``) it records itself. Endpoint trouble of the node's model calls (waits,
    fallback, condensed prompts) is shown as ``wait`` progress events and recorded in the step's
    ``endpoint`` field, never as an error of the step. The graph gets the update; the end event
    shows the result's message.
    """
    name = fn.__name__

    @functools.wraps(fn)
    async def run(state: AgentState, runtime: Runtime[AgentContext]) -> Update:
        step_index = state.get("current")
        await resources_ready()  # the process's default set is created off the event loop
        _emit(runtime, ProgressEvent(node=name, step=step_index, phase="start"))
        started = time.monotonic()
        endpoint_log = _EndpointLog(runtime, name, step_index)
        with listen(endpoint_log), metered() as meter:
            result = await fn(state, runtime)
        update = result.update
        seconds = round(time.monotonic() - started, 3)
        cost = node_cost(meter, runtime.context)
        patches: list[Step | StepUpdate] = list(update.get("steps") or [])
        if patches:
            step_index = patches[-1]["index"]
        if step_index is not None:
            own = next((p for p in patches if p["index"] == step_index), None)
            if own is None:
                own = {"index": step_index}
                patches.append(own)
            own["timings"] = {**own.get("timings", {}), name: seconds}
            if endpoint_log.records:
                own["endpoint"] = {**own.get("endpoint", {}), **endpoint_log.records}
            if meter.by_role:
                own["cost"] = {**own.get("cost", {}), name: cost}
            update["steps"] = patches
        # What the node recorded on its step (a Generator's test instruction too) is what it spent.
        mine = [p for p in patches if p["index"] == step_index]
        used = [usage for p in mine for usage in (p.get("tokens") or {}).values()]
        costs = [usd for p in mine for usd in (p.get("cost") or {}).values()]
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
                message=result.message,
                input_tokens=sum(u.get("input", 0) for u in used),
                output_tokens=sum(u.get("output", 0) for u in used),
                cost_usd=add_costs(costs) if costs else None,
                priced=add_costs(costs) is not None,
                uncounted_calls=sum(u.get("uncounted", 0) for u in used),
            ),
        )
        return update

    return run


async def metered_apart(call: Awaitable[T]) -> tuple[T, UsageMeter]:
    """Await ``call`` with its model calls metered apart from the node's: the node records their
    cost itself, under its own key (``node_cost``)."""
    with metered() as meter:
        return await call, meter


def node_cost(meter: UsageMeter, context: AgentContext | None) -> float | None:
    """USD of the calls the meter saw, each role at its price; None when one of them is unpriced, or
    came without token counts."""
    if context is None:
        return None if meter.by_role else 0.0
    if any(usage.uncounted for usage in meter.by_role.values()):
        return None
    return add_costs(
        call_cost(context.prices, role, usage.input_tokens, usage.output_tokens)
        for role, usage in meter.by_role.items()
    )


def _last(patches: list[Step | StepUpdate], key: str) -> Any:
    for patch in reversed(patches):
        if key in patch:
            return patch[key]
    return None


def store() -> BlobStore:
    """The blob store of the bound resources (from async code, call its ``a*`` methods)."""
    return get_resources().store


async def sampled_turn(answer: StructuredAnswer[Any], messages: list[Message]) -> SampledTurn:
    """Store a used structured answer as sampled (its messages, text and token logprobs): what a
    trainer needs of a model turn to compute an importance ratio. Every role's turns go through here."""
    blobs = store()
    return {
        "prompt": await blobs.aput_json(answer.sent or messages),
        "completion": await blobs.aput_text(answer.text),
        "logprobs": await blobs.aput_json(answer.logprobs) if answer.logprobs is not None else None,
    }


async def sampled_turns(
    settings: ModelSettings, turns: dict[str, tuple[StructuredAnswer[Any], list[Message]]]
) -> dict[str, SampledTurn]:
    """The named turns as sampled (a step's ``sampled``), when the role's ``settings`` ask for
    logprobs: only then are its turns kept as training data. Turns with no usable answer are left out."""
    if not settings.logprobs:
        return {}
    return {
        name: await sampled_turn(answer, messages)
        for name, (answer, messages) in turns.items()
        if answer.value is not None
    }
