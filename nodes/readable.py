"""The state as a person reads it in LangGraph Studio, derived from the compact state after each node.

Nodes keep hashes into the blob store; Studio shows state values as they are. So after each node
the graph (graph/builder.py) adds what changed of three keys that no node reads:

- ``messages``: the coder conversation as LangChain messages (Studio draws the ``messages`` key as a
  chat), then the latest step's results with its screenshot as an image block (a PNG data URL),
  then the feedback the next Refiner turn will get, once the Critic wrote it;
- ``latest_step``: the latest step's grades and outcome in words and numbers;
- ``latest_files``: that step's files, path -> text.

Storage: the checkpointer's serializer stores long texts, data URLs and path -> text mappings by
content (checkpoints/saver.py), so these keys share the blobs the hashes already name.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Sequence
from typing import Any, cast

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage

from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.state import (
    AgentState,
    ChatRef,
    Step,
    StepUpdate,
    StepView,
    append_events,
    conversation_of,
    merge_steps,
)
from webgen_agent.nodes.common import Update, store
from webgen_agent.nodes.selection import step_files

RESULTS_NAME = "results"  # the name on the message that shows a step's results (not a coder turn)
# A file shown in full up to this size; a bigger one (a lock file, a bundled asset) by its size only.
SHOWN_FILE_MAX = 64 * 1024


async def readable_changes(state: AgentState, update: Update) -> Update:
    """The readable keys after ``update`` is applied to ``state``, those that changed only."""
    after = state_after(state, update)
    readable = await asyncio.to_thread(readable_state, after, store())
    return cast(Update, {key: value for key, value in readable.items() if state.get(key) != value})


def state_after(state: AgentState, update: Update) -> AgentState:
    """``state`` with a node's ``update`` applied: steps and events by their reducers, the rest replaced."""
    merged: dict[str, Any] = {**state, **update}
    if "steps" in update:
        merged["steps"] = merge_steps(state.get("steps"), cast(list[StepUpdate], list(update["steps"])))
    if "events" in update:
        merged["events"] = append_events(state.get("events"), update["events"])
    return cast(AgentState, merged)


def readable_state(state: AgentState, blobs: BlobStore) -> Update:
    steps = state.get("steps") or []
    current = state.get("current")
    latest = steps[current] if current is not None and 0 <= current < len(steps) else None
    readable: Update = {"messages": chat_messages(state, blobs)}
    if latest is not None:
        readable["latest_step"] = step_view(latest, blobs)
        readable["latest_files"] = file_texts(step_files(latest, steps), blobs)
    return readable


def chat_messages(state: AgentState, blobs: BlobStore) -> list[AnyMessage]:
    """The conversation, the results of the step whose reply ends it, and the feedback waiting for the coder."""
    refs = conversation_of(state)
    messages = [chat_message(position, ref, blobs.get_text(ref["hash"])) for position, ref in enumerate(refs)]
    answered = replied_step(refs, state.get("steps") or [])
    if answered is not None and _has_results(answered):
        messages.append(results_message(answered, blobs))
    feedback = state.get("feedback")
    if feedback and refs and refs[-1]["role"] == "assistant":
        messages.append(chat_message(len(refs), {"role": "user", "hash": feedback}, blobs.get_text(feedback)))
    return messages


def chat_message(position: int, ref: ChatRef, text: str) -> AnyMessage:
    # The id names the place and the text: stable across checkpoints, so stored once (and Studio
    # keeps the messages it has drawn).
    message_id = f"{position}-{ref['hash'][:16]}"
    if ref["role"] == "system":
        return SystemMessage(content=text, id=message_id)
    if ref["role"] == "user":
        return HumanMessage(content=text, id=message_id)
    return AIMessage(content=text, id=message_id)


def replied_step(refs: Sequence[ChatRef], steps: Sequence[Step]) -> Step | None:
    """The newest step whose reply is the conversation's last message (None after a restart)."""
    if not refs or refs[-1]["role"] != "assistant":
        return None
    last = refs[-1]["hash"]
    return next(
        (s for s in reversed(steps) if s["completion"] == last and s["prompt_len"] == len(refs) - 1),
        None,
    )


def _has_results(step: Step) -> bool:
    return "execution" in step or bool(step["screenshot_score"] or step["gui_score"]) or step["errored"]


def results_message(step: Step, blobs: BlobStore) -> AIMessage:
    """What became of the step: its run, grades and screenshot (an image block Studio shows)."""
    content: list[str | dict[str, Any]] = [{"type": "text", "text": results_text(step_view(step, blobs))}]
    if step.get("screenshot"):
        png = base64.b64encode(blobs.get(str(step["screenshot"]))).decode("ascii")
        content.append({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}})
    return AIMessage(content=content, name=RESULTS_NAME, id=f"results-{step['index']}")


def results_text(view: StepView) -> str:
    lines = [f"Step {view['index']} ({view['role']}, {view['action']}): {view['summary']}"]
    if "run" in view:
        lines.append(f"Run: {view['run']}")
    if view.get("screenshot_score"):
        lines.append(f"Screenshot: {view['screenshot_score']}/5. {view.get('screenshot', '')}".rstrip())
    if view.get("gui_passed") is not None:
        verdict = "passed" if view["gui_passed"] else "failed"
        lines.append(f"GUI test: {verdict}, {view.get('gui_score', 0)}/5")
    if "check_score" in view:
        lines.append(f"Requirement checks: {view['check_score']:.0%}")
    if view.get("errored"):
        lines.append("Errored step.")
    lines += [f"Problem: {problem}" for problem in view.get("problems", [])]
    return "\n".join(lines)


def step_view(step: Step, blobs: BlobStore) -> StepView:
    view: StepView = {
        "index": step["index"],
        "role": step["role"],
        "action": step["action"],
        "summary": step["summary"],
        "errored": step["errored"],
        "screenshot_score": step["screenshot_score"],
        "gui_score": step["gui_score"],
        "gui_passed": step["gui_passed"],
        "problems": list(step["problems"]),
        "changed": list(step.get("changed") or []),
    }
    execution = step.get("execution")
    if execution is not None:
        view["run"] = "ok" if execution["ok"] else f"failed at {execution['stage']}: {execution['error'] or ''}".strip()
    if step.get("description"):
        view["screenshot"] = step["description"]
    if "check_score" in step:
        view["check_score"] = step["check_score"]
    if step.get("feedback"):
        view["feedback"] = blobs.get_text(str(step["feedback"]))
    return view


def file_texts(manifest: str | None, blobs: BlobStore) -> dict[str, str]:
    """path -> text of a snapshot; a binary or very big file by its size only."""
    if not manifest:
        return {}
    # One by one through the store's memory cache: the same files are read again after every node.
    return {path: _shown(blobs.get(digest)) for path, digest in sorted(blobs.manifest(manifest).items())}


def _shown(data: bytes) -> str:
    if len(data) > SHOWN_FILE_MAX:
        return f"({len(data):,} bytes: too long to show; `webgen-agent report` has every file)"
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return f"({len(data):,} bytes of binary data)"
