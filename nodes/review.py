"""Human review: the run stops with LangGraph's ``interrupt()`` at the points the context names.

Every point asks from a place whose work before the question is idempotent or cached, because a
resumed node runs again from its start: the Refiner and the executor ask first thing, finalize after
a pure choice, and the Generator's model calls are LangGraph tasks whose results the checkpoint
keeps (docs/review.md).
"""

from __future__ import annotations

from collections.abc import Callable

from langgraph.types import interrupt

from webgen_agent.core.context import AgentContext
from webgen_agent.core.state import AgentState, Event
from webgen_agent.core.views import ReviewDecision, ReviewPoint, ReviewRequest, review_decision
from webgen_agent.nodes import prompts
from webgen_agent.nodes.common import store

Check = Callable[[ReviewDecision], str]  # "" when the decision can be carried out, else why not


def review_on(context: AgentContext, point: ReviewPoint) -> bool:
    return point in context.review


def ask_review(request: ReviewRequest, check: Check | None = None) -> ReviewDecision:
    """Stop the run with ``request`` until it is resumed with a usable decision.

    A malformed resume value (or one ``check`` refuses) is not an error of the run: the same
    request is asked again, its ``error`` saying what was wrong. Each ask is one ``interrupt()``
    call, so a node that resumes replays the earlier answers in order and asks only the new one.
    """
    asked = request
    while True:
        value = interrupt(asked.model_dump())
        try:
            decision = review_decision(value)
        except ValueError as exc:
            asked = request.model_copy(update={"error": str(exc)})
            continue
        problem = check(decision) if check is not None else ""
        if not problem:
            return decision
        asked = request.model_copy(update={"error": problem})


def review_event(point: ReviewPoint, step: int | None, decision: ReviewDecision) -> Event:
    """The decision as a run event (run.json, history)."""
    reason = f"{point}: {decision.action}" + (" with a replacement" if decision.text is not None else "")
    if decision.note.strip():
        reason += f"; note: {decision.note.strip()[:500]}"
    event: Event = {"kind": "review", "after_step": -1 if step is None else step, "reason": reason}
    return event


async def review_feedback(state: AgentState, feedback: str) -> tuple[str, list[Event]]:
    """critique: the feedback (blob hash) the Refiner is about to get, as the reviewer leaves it."""
    blobs = store()
    step = state.get("current")
    request = ReviewRequest(
        point="critique",
        run_id=state.get("run_id", ""),
        step=step,
        about_to="The refiner is about to get this feedback and write the next version.",
        text=await blobs.aget_text(feedback),
        edit_means="text replaces the feedback; a note is added after it.",
        reject_means="the refiner does not get this feedback, only a short request to keep improving (and the note).",
    )
    decision = ask_review(request)
    if decision.action == "reject":
        text = prompts.with_review_note(prompts.FEEDBACK_SET_ASIDE, decision.note)
    elif decision.action == "edit":
        text = prompts.with_review_note(request.text if decision.text is None else decision.text, decision.note)
    else:
        text = request.text
    if text != request.text:
        feedback = await blobs.aput_text(text)
    return feedback, [review_event("critique", step, decision)]


async def review_commands(state: AgentState, commands: list[str]) -> tuple[list[str | None], list[str], list[Event]]:
    """shell: each command put to the reviewer, all before any runs (a resumed executor runs none twice).

    Returns the commands to run (None: refused), the notes for the coder, and the events.
    """
    step = state.get("current")
    to_run: list[str | None] = []
    notes: list[str] = []
    events: list[Event] = []
    for number, command in enumerate(commands, 1):
        decision = ask_review(
            ReviewRequest(
                point="shell",
                run_id=state.get("run_id", ""),
                step=step,
                about_to="This shell command is about to run in the workspace (sandboxed unless the sandbox is off).",
                text=command,
                command=number,
                commands=len(commands),
                edit_means="text is the command to run instead; a note is passed to the coder.",
                reject_means="the command does not run; the coder is told so (with the note).",
            )
        )
        events.append(review_event("shell", step, decision))
        if decision.action == "reject":
            to_run.append(None)
            notes.append(prompts.with_review_note(prompts.SHELL_REFUSED.format(command=command[:200]), decision.note))
            continue
        replacement = decision.text.strip() if decision.action == "edit" and decision.text else ""
        to_run.append(replacement or command)
        if replacement and replacement != command:
            notes.append(prompts.SHELL_REPLACED.format(command=command[:200], replacement=replacement[:200]))
        if decision.action == "edit" and decision.note.strip():
            notes.append(prompts.review_note(decision.note))
    return to_run, notes, events
