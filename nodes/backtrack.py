"""Backtrack: after too many errored steps, return to the best earlier step, or start over.

The target step's files and conversation come back from the hashes its step record holds (the
same values its checkpoint holds); the abandoned steps stay in the run's log.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from webgen_agent.core.context import AgentContext
from webgen_agent.core.error_count import count_after, error_count
from webgen_agent.core.profiles import environment_rules, profile_rules
from webgen_agent.core.state import AgentState, ChatRef
from webgen_agent.nodes import prompts
from webgen_agent.nodes.common import NodeResult, Update, node, store
from webgen_agent.nodes.feedback import results_text, template_feedback, upstream_step_feedback
from webgen_agent.nodes.selection import best_good_step, step_files


@node
async def backtrack(state: AgentState, runtime: Runtime[AgentContext]) -> NodeResult:
    blobs = store()
    count = error_count(state)
    after = state["current"]
    rules = profile_rules(runtime.context.profile)
    target = best_good_step(state["steps"], rules.selection)
    why = f"{count} consecutive errored steps"
    if state.get("restarts", 0) and count < runtime.context.error_limit:
        why = "a step raised earlier: every step restarts from the best good step"
    if target is None:
        restart: Update = {
            "conversation": [],
            "files": None,
            "edit_step": None,
            "consecutive_errors": count_after(state, "backtrack"),
            "feedback": None,
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
                state, target, environment_rules(runtime.context.profile, runtime.context.environment)
            )
        )
    else:
        note = prompts.BACKTRACK_NOTE.format(
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
