"""Screenshot-Judge: the VLM grades the landing page.

Default profile: one call sees the requirement, the page's visible text and the screenshot and
answers description, score 1-5 and suggestions. Upstream profile (WebGen-Agent): two calls that see
the screenshot alone, one for visible errors, description and suggestions, one for a 0-5 grade.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from langgraph.runtime import Runtime

from webgen_agent.core.context import AgentContext
from webgen_agent.core.costs import Usage
from webgen_agent.core.error_count import count_after, verdict_of
from webgen_agent.core.profiles import ERRORED_SCORE
from webgen_agent.core.state import AgentState, Step, StepUpdate
from webgen_agent.core.views import ScreenshotDescription, ScreenshotGrade, ScreenshotJudgement
from webgen_agent.nodes import prompts
from webgen_agent.nodes.common import NodeResult, Update, current_step, node, sampled_turns, store, usage_record
from webgen_agent.nodes.profile import context_prompts
from webgen_agent.nodes.resources import get_resources
from webgen_agent.tools.models import Message, StructuredAnswer, ask_structured

# A grade still pending after this long: the GUI test's browser session is opened meanwhile. Opening
# takes 0.3-0.5 s, so a model answering in 1 s finds it open; one answering within 0.3 s (a local
# model, the scripted one in tests) leaves little to hide, and no session is opened for nothing.
PREPARE_GUI_AFTER_S = 0.3


def _image(png: bytes) -> dict:
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode("ascii")}}


def judge_messages(
    requirement: str, png: bytes, visible_text: str, other_pages: list[tuple[str, bytes]] | None = None
) -> list[dict]:
    """The grading request: the landing page's screenshot, then one per other page of the site, captioned."""
    content: list[dict] = [{"type": "text", "text": prompts.judge_user(requirement, visible_text[:3000])}, _image(png)]
    for path, other in other_pages or []:
        content += [{"type": "text", "text": prompts.judge_page_caption(path)}, _image(other)]
    return [{"role": "system", "content": prompts.JUDGE_SYSTEM}, {"role": "user", "content": content}]


async def other_page_shots(step: Step) -> list[tuple[str, bytes]]:
    """(path, PNG) of the step's pages after the landing page (multi-page capture)."""
    if not step.get("pages"):
        return []
    blobs = store()
    pages = [p for p in (await blobs.aget_json(step["pages"] or ""))[1:] if p.get("screenshot")]
    shots = await blobs.aget_many(p["screenshot"] for p in pages)
    return [(p["path"], shots[p["screenshot"]]) for p in pages]


async def _prepare_gui_test_while_waiting(
    state: AgentState, step: Step, context: AgentContext, grading: asyncio.Task
) -> None:
    """Open the GUI test's browser session for this page if the grade is slow to come.

    A good grade leads to the GUI test of this very page; opening its session (0.3-0.5 s) beside
    the grading call hides that cost (``PREPARE_GUI_AFTER_S``). A session opened for a page graded
    too low is closed in the background.
    """
    execution = step.get("execution")
    url = execution["url"] if execution else None
    run_id = state.get("run_id")
    if not url or not run_id:
        return
    done, _ = await asyncio.wait({grading}, timeout=PREPARE_GUI_AFTER_S)
    if done:
        return
    resources = get_resources()
    resources.prepare_gui_session(run_id, step["index"], url, context)
    await asyncio.wait({grading})
    answer = grading.result() if not grading.cancelled() and grading.exception() is None else None
    if answer is None or answer.value is None or answer.value.score < context.appearance_threshold:
        resources.drop_gui_session(run_id)


def screenshot_only_messages(text: str, png: bytes) -> list[dict]:
    """The upstream profile's VLM request: one instruction and the screenshot, nothing else."""
    image = base64.b64encode(png).decode("ascii")
    return [
        {"role": "system", "content": "You are a helpful assistant."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": text},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}},
            ],
        },
    ]


def judge_failure(*errors: str | None) -> str:
    """Why the judge's call(s) gave no usable answer, kept in the step: a grade of 0 from a failed
    call must not pass for a bad page (history, the report and rollout's summary say which it was)."""
    return "; ".join(error for error in errors if error)


def exception_update(state: AgentState, step: Step, limit: int, why: str, usage: Usage) -> NodeResult:
    """A step that raised: never ranked; the run restarts before every later step, and ends once
    more steps raised than ``limit`` restarts allow (WebGen-Agent's ``run``)."""
    restarts = state.get("restarts", 0) + 1
    over = restarts > limit
    update: Update = {
        "steps": [
            {
                "index": step["index"],
                "screenshot_score": 0,
                "judge_error": why,
                "exception": why,
                "errored": True,
                "tokens": {"screenshot_judge": usage_record(usage)},
            }
        ],
        "restarts": restarts,
    }
    if over:
        reason = f"step {step['index']} raised ({why[:200]}) after {limit} restarts: the run ends"
        update["events"] = [{"kind": "error", "after_step": step["index"], "target_step": None, "reason": reason}]
    return NodeResult(update, f"exception: {why[:80]}")


async def upstream_judgement(state: AgentState, runtime: Runtime[AgentContext]) -> NodeResult:
    """Description (with any visible error) and a 0-5 grade, from the screenshot alone."""
    step = current_step(state)
    png = await store().aget(step["screenshot"] or "")  # the router sends only captured steps here
    context = runtime.context
    vlm, attempts = context.vlm, context.rules.profile.judge_attempts
    environment = context.rules.environment
    asked = context_prompts(context)
    describe = screenshot_only_messages(asked.describe_user, png)
    grade = screenshot_only_messages(asked.grade_user, png)
    described, graded = await asyncio.gather(
        ask_structured(vlm, "vlm", describe, ScreenshotDescription, attempts=attempts),
        ask_structured(vlm, "vlm", grade, ScreenshotGrade, attempts=attempts),
    )
    if environment.restart_limit is not None and (described.raised_upstream or graded.raised_upstream):
        which = [name for name, answer in (("description", described), ("grade", graded)) if answer.raised_upstream]
        why = f"no JSON object in the {' and '.join(which)} reply"
        return exception_update(state, step, environment.restart_limit, why, described.usage + graded.usage)
    score = graded.value.grade if graded.value is not None else 0
    reading = described.value
    # As written: upstream shows each text that is not "" (whitespace too) and counts it as a reading.
    visible_error = reading.error_message if reading is not None else ""
    description = reading.screenshot_description if reading is not None else ""
    suggestions = [reading.suggestions] if reading is not None and reading.suggestions else []
    execution = step.get("execution")
    errored = (
        bool(execution and (execution.get("install_error") or execution.get("start_error")))
        or bool(visible_error)
        or not (visible_error or description or suggestions)  # nothing came back
        or score <= ERRORED_SCORE
    )
    patch: StepUpdate = {
        "index": step["index"],
        "screenshot_score": score,
        "description": description,
        "suggestions": suggestions,
        "visible_error": visible_error,
        "judge_error": judge_failure(
            described.error and f"description: {described.error}", graded.error and f"grade: {graded.error}"
        ),
        "errored": errored,
        "tokens": {"screenshot_judge": usage_record(described.usage + graded.usage)},
    }
    turns: dict[str, tuple[StructuredAnswer[Any], list[Message]]] = {
        "screenshot_judge/description": (described, describe),
        "screenshot_judge/grade": (graded, grade),
    }
    if sampled := await sampled_turns(vlm, turns):
        patch["sampled"] = sampled
    update: Update = {"steps": [patch], "consecutive_errors": count_after(state, verdict_of(errored, final=True))}
    return NodeResult(update, f"screenshot {score}/5")


@node
async def screenshot_judge(state: AgentState, runtime: Runtime[AgentContext]) -> NodeResult:
    if runtime.context.rules.profile.screenshot_only_judge:
        return await upstream_judgement(state, runtime)
    step = current_step(state)
    blobs = store()
    page = await blobs.aget_json(step["page"] or "") if step.get("page") else {}
    png = await blobs.aget(step["screenshot"] or "")  # the router sends only captured steps here
    messages = judge_messages(state["requirement"], png, page.get("visible_text", ""), await other_page_shots(step))
    strict = runtime.context.rules.profile.strict_verdicts
    grading = asyncio.create_task(
        ask_structured(runtime.context.vlm, "vlm", messages, ScreenshotJudgement, strict=strict)
    )
    try:
        await _prepare_gui_test_while_waiting(state, step, runtime.context, grading)
        answer = await grading
    finally:
        grading.cancel()  # only has an effect when this node itself was cancelled
    if answer.value is not None:
        score, description, suggestions = answer.value.score, answer.value.description, answer.value.suggestions
    else:
        score, description, suggestions = 0, f"The screenshot could not be graded: {answer.error}", []
    errored = score <= ERRORED_SCORE
    patch: StepUpdate = {
        "index": step["index"],
        "screenshot_score": score,
        "description": description,
        "suggestions": suggestions,
        "judge_error": judge_failure(answer.error),
        "errored": errored,
        "tokens": {"screenshot_judge": usage_record(answer.usage)},
    }
    if sampled := await sampled_turns(runtime.context.vlm, {"screenshot_judge": (answer, messages)}):
        patch["sampled"] = sampled
    update: Update = {"steps": [patch], "consecutive_errors": count_after(state, verdict_of(errored, final=True))}
    return NodeResult(update, f"screenshot {score}/5")
