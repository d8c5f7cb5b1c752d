"""Finalize: choose the best step (or the last one), write its files as the site, record the run."""

from __future__ import annotations

import asyncio
from pathlib import Path

from langgraph.runtime import Runtime

from webgen_agent.checkpoints.outputs import write_run_outputs
from webgen_agent.core.context import AgentContext
from webgen_agent.core.state import AgentState
from webgen_agent.nodes.common import Update, node, workspace_dir
from webgen_agent.nodes.profile import rules_for
from webgen_agent.nodes.resources import get_resources
from webgen_agent.nodes.selection import best_step, code_steps, step_files


@node
async def finalize(state: AgentState, runtime: Runtime[AgentContext]) -> Update:
    resources = get_resources()
    if state.get("run_id"):
        await resources.drop_gui_session(state["run_id"])  # opened for a GUI test that did not come
    steps = state.get("steps", [])
    if runtime.context.select_best:
        chosen = best_step(steps, rules_for(runtime.context.profile).selection)
    else:
        edits = code_steps(steps)
        chosen = edits[-1] if edits else None
    out_dir = Path(state["out_dir"])
    site_dir = out_dir / "site"
    await resources.stop_site(workspace_dir(state))
    if chosen is not None:
        await resources.store.amaterialize(step_files(chosen, steps), site_dir)
    update: Update = {
        "status": "finished",
        "chosen_step": chosen["index"] if chosen else None,
        "site_dir": str(site_dir) if chosen else None,
        "events": [
            {
                "kind": "finalize",
                "after_step": state.get("current", -1),
                "target_step": chosen["index"] if chosen else None,
                "reason": "best step" if runtime.context.select_best else "last step",
            }
        ],
    }
    final = {**state, **update, "events": [*state.get("events", []), *update["events"]]}
    await asyncio.to_thread(write_run_outputs, out_dir, final, resources.store)
    update["_message"] = f"chose step {update['chosen_step']}"
    return update
