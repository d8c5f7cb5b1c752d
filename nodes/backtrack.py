"""Backtrack: after too many errored steps, return to the best earlier step, or start over.

The loop governor (core/governor.py) sends a run here too, when it revisits a file tree or its
score stalls: the first time it goes back the same way, after that the run stops (a ``stop`` event
with the reason, then finalize).

The target step's files and conversation come back from the hashes its step record holds (the
same values its checkpoint holds); the abandoned steps stay in the run's log.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from webgen_agent.core.context import AgentContext
from webgen_agent.core.error_count import count_after, error_count
from webgen_agent.core.state import AgentState, ChatRef
from webgen_agent.core.steps import imported_start
from webgen_agent.nodes import prompts
from webgen_agent.nodes.common import NodeResult, Update, node, store
from webgen_agent.nodes.feedback import results_text, template_feedback, upstream_step_feedback
from webgen_agent.nodes.profile import context_prompts
from webgen_agent.nodes.selection import best_good_step, step_files


@node
async def backtrack(state: AgentState, runtime: Runtime[AgentContext]) -> NodeResult:
    blobs = store()
    count = error_count(state)
    after = state["current"]
    rules = runtime.context.rules.profile
    restarting = bool(state.get("restarts", 0)) and count < runtime.context.error_limit
    # Errors first (as the routers check them), then the restart flag; otherwise the loop governor
    # sent the run here, its verdict and reason carried from the critic node.
    governor = state.get("governor") if count < runtime.context.error_limit and not restarting else None
    if governor is not None and governor["action"] == "stop":
        stop: Update = {
            "events": [{"kind": "stop", "after_step": after, "target_step": None, "reason": governor["reason"]}],
            "governor": None,
        }
        return NodeResult(stop, "stopped by the loop governor")
    why = f"{count} consecutive errored steps"
    if restarting:
        why = "a step raised earlier: every step restarts from the best good step"
    if governor is not None:
        why = governor["reason"]
    # The governor's backtrack must move: a step with the files the run has now changes nothing.
    away_from = state.get("files") if governor is not None else None
    # A run from a folder never starts over from nothing: with no good step it goes back to the folder.
    target = best_good_step(state["steps"], rules.selection, away_from=away_from) or imported_start(state["steps"])
    if target is None:
        restart: Update = {
            "conversation": [],
            "files": None,
            "edit_step": None,
            "consecutive_errors": count_after(state, "backtrack"),
            "feedback": None,
            "governor": None,
            "events": [
                {
                    "kind": "restart",
                    "after_step": after,
                    "target_step": None,
                    "reason": f"{why}, and no good step to return to",
                }
            ],
        }
        return NodeResult(restart, "restart from the requirement")
    conversation: list[ChatRef] = [
        *await blobs.aget_json(target["prompt"]),
        {"role": "assistant", "hash": target["completion"]},
    ]
    if not rules.backtrack_note:
        # WebGen-Agent goes on from the step's own conversation, its feedback last, with no note.
        feedback = target.get("feedback") or await blobs.aput_text(
            await upstream_step_feedback(
                state,
                target,
                runtime.context.rules.environment,
                context_prompts(runtime.context).feedback,
                runtime.context.coder,
            )
        )
    else:
        note = (prompts.GOVERNOR_NOTE if governor is not None else prompts.BACKTRACK_NOTE).format(
            count=count,
            target=target["index"],
            screenshot=target["screenshot_score"],
            gui=target["gui_score"],
        )
        results, focus = results_text(target, None)
        feedback = await blobs.aput_text(f"{note}\n\n{template_feedback(state['requirement'], results, focus)}")
    update: Update = {
        "conversation": conversation,
        "files": step_files(target, state["steps"]),
        "edit_step": target["index"] if target["action"] == "edit" else target["tests_step"],
        "consecutive_errors": count_after(state, "backtrack"),
        "feedback": feedback,
        "governor": None,
        "events": [
            {
                "kind": "backtrack",
                "after_step": after,
                "target_step": target["index"],
                "reason": why,
            }
        ],
    }
    return NodeResult(update, f"back to step {target['index']}")
