"""Step 0 of a run started from the user's folder (``run --from``, ``AgentContext.start_from``).

No coder call: the folder's files are step 0's edit (``imported``, which the executor writes instead
of a reply's files), run and judged as they are, and the loop improves them. The coder reads the
project as the conversation's first assistant turn, in its own edit format; that turn is not a
model completion, so no export trains on it (checkpoints/trajectories.py, docs/exports.md).
"""

from __future__ import annotations

import asyncio

from langgraph.runtime import Runtime

from webgen_agent.checkpoints.folder_import import ProjectFolder, import_folder, read_project_folder
from webgen_agent.core.context import AgentContext
from webgen_agent.core.error_count import count_after, verdict_of
from webgen_agent.core.state import AgentState, ChatRef, Step
from webgen_agent.nodes import prompts
from webgen_agent.nodes.coding import chat_ref
from webgen_agent.nodes.common import NodeResult, Update, store
from webgen_agent.nodes.local_dirs import agent_paths
from webgen_agent.nodes.readable import SHOWN_FILE_MAX
from webgen_agent.nodes.resources import get_resources


def _texts(folder: ProjectFolder) -> tuple[dict[str, str], list[str]]:
    """(path -> text of the files the coder is shown, the paths of the others: binary or too big)."""
    texts, others = {}, []
    for path in folder.files:
        text = _text((folder.root / path).read_bytes())
        if text is None:
            others.append(path)
        else:
            texts[path] = text
    return texts, others


def _text(data: bytes) -> str | None:
    if len(data) > SHOWN_FILE_MAX or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


async def imported_turn(
    state: AgentState, runtime: Runtime[AgentContext], conversation: list[ChatRef], out_dir: str
) -> NodeResult:
    """Step 0: the folder ``start_from`` names, stored as the step's files; a refused folder raises
    ``FolderRefused`` (one line), as the command line refuses it before a run is recorded."""
    context = runtime.context
    resources = get_resources()
    leave_out = agent_paths(resources.database, context.runs_dir, out_dir)
    folder = await asyncio.to_thread(
        read_project_folder, context.start_from, cap_mb=context.sandbox.workspace_mb, leave_out=leave_out
    )
    files = await asyncio.to_thread(import_folder, resources.store, folder)
    texts, others = await asyncio.to_thread(_texts, folder)
    text = prompts.imported_project(context.start_from, texts, others, SHOWN_FILE_MAX // 1024)
    answer = await chat_ref("assistant", text)
    index = len(state.get("steps") or [])
    step: Step = {
        "index": index,
        "role": "generator",
        "action": "edit",
        "parent": None,
        "tests_step": None,
        "prompt_len": len(conversation),
        "prompt": await store().aput_json(conversation),
        "completion": answer["hash"],
        "summary": f"imported {len(folder.files)} file(s) from {folder.root}",
        "format_ok": True,
        "problems": folder.notes(),
        "screenshot_score": 0,
        "gui_score": 0,
        "gui_passed": None,
        "errored": False,
        "timings": {},
        "model": "",
        "tokens": {},
        "imported": files,
        "imported_from": str(folder.root),
    }
    update: Update = {
        "conversation": [*conversation, answer],
        "current": index,
        "steps": [step],
        "feedback": None,
        "consecutive_errors": count_after(state, verdict_of(False, final=False)),
    }
    return NodeResult(update, f"step {index}: {step['summary']}")
