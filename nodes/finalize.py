"""Finalize: choose the best step (or the last one), write its files as the site, record the run.

With ``finalize`` review the choice is put to the reviewer first (after the screenshots are written,
so the request can name the chosen step's PNG): approve, choose another step, or reject (no site).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from langgraph.runtime import Runtime

from webgen_agent.checkpoints.outputs import RunSummary, write_run_outputs
from webgen_agent.core.context import AgentContext
from webgen_agent.core.state import AgentState, Event, RunStatus, Step
from webgen_agent.core.views import ReviewDecision, ReviewRequest
from webgen_agent.nodes.common import NodeResult, Update, node, workspace_dir
from webgen_agent.nodes.resources import get_resources
from webgen_agent.nodes.review import ask_review, review_event, review_on
from webgen_agent.nodes.selection import best_step, code_steps, step_files


@node
async def finalize(state: AgentState, runtime: Runtime[AgentContext]) -> NodeResult:
    resources = get_resources()
    if state.get("run_id"):
        resources.drop_gui_session(state["run_id"])  # opened for a GUI test that did not come
    steps = state.get("steps", [])
    if runtime.context.select_best:
        chosen = best_step(steps, runtime.context.rules.profile.selection)
        reason = "best step"
    else:
        edits = code_steps(steps)
        chosen = edits[-1] if edits else None
        reason = "last step"
    out_dir = Path(state["out_dir"])
    events: list[Event] = []
    status: RunStatus = "finished"
    if review_on(runtime.context, "finalize"):
        chosen, decision = await _reviewed_choice(state, chosen, out_dir)
        events.append(review_event("finalize", chosen["index"] if chosen else None, decision))
        if decision.action == "edit" and decision.text is not None:
            reason = "chosen by the reviewer"
        if decision.action == "reject":
            chosen, status, reason = None, "rejected", "rejected by the reviewer"
    site_dir = out_dir / "site"
    await resources.stop_site(workspace_dir(state))
    if chosen is not None:
        await resources.store.amaterialize(step_files(chosen, steps), site_dir)
    update: Update = {
        "status": status,
        "chosen_step": chosen["index"] if chosen else None,
        "site_dir": str(site_dir) if chosen else None,
        "events": [
            *events,
            {
                "kind": "finalize",
                "after_step": state.get("current", -1),
                "target_step": chosen["index"] if chosen else None,
                "reason": reason,
            },
        ],
    }
    final = {**state, **update, "events": [*state.get("events", []), *update["events"]]}
    await asyncio.to_thread(write_run_outputs, out_dir, final, resources.store)
    return NodeResult(update, f"chose step {update['chosen_step']}" if status == "finished" else status)


async def _reviewed_choice(state: AgentState, chosen: Step | None, out_dir: Path) -> tuple[Step | None, ReviewDecision]:
    """The step the reviewer settles on (edit: a step number) and the decision."""
    steps = state.get("steps", [])
    # Idempotent: the screenshots (steps/N.png) and run.json so far, for the reviewer to look at.
    written = await asyncio.to_thread(write_run_outputs, out_dir, dict(state), get_resources().store)
    choosable = {s["index"]: s for s in code_steps(steps)}

    def check(decision: ReviewDecision) -> str:
        if decision.action != "edit" or decision.text is None:
            return ""
        number = decision.text.strip()
        if not number.isdigit() or int(number) not in choosable:
            listed = ", ".join(map(str, choosable)) or "none"
            return f"an edit's text names the step to finish with; {number!r} is not one of the code steps ({listed})"
        return ""

    shot = chosen.get("screenshot") if chosen else None
    text = (
        f"step {chosen['index']}: {chosen['summary']} (screenshot {chosen['screenshot_score']}/5, "
        f"GUI {chosen['gui_score']}/5)"
        if chosen
        else "no step produced a website"
    )
    decision = ask_review(
        ReviewRequest(
            point="finalize",
            run_id=state.get("run_id", ""),
            step=chosen["index"] if chosen else None,
            about_to="The run is about to end with this step's files as the site.",
            text=text,
            screenshot=shot,
            screenshot_path=_screenshot_file(written, out_dir, chosen["index"]) if shot and chosen else None,
            edit_means="text is the number of another code step to finish with; a note is kept in run.json.",
            reject_means="the run ends without a site (status rejected); "
            "`webgen-agent fork RUN_ID --step N --note ...` continues from any step.",
        ),
        check,
    )
    if decision.action == "edit" and decision.text is not None:
        chosen = choosable[int(decision.text.strip())]
    return chosen, decision


def _screenshot_file(written: RunSummary, out_dir: Path, index: int) -> str | None:
    """The PNG of step ``index`` in the output folder (written once, perhaps under an earlier step's name)."""
    view = next((s for s in written.steps if s.index == index), None)
    return str(out_dir / view.screenshot) if view is not None and view.screenshot else None
