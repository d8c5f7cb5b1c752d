"""What the GUI test needs besides the node itself: its instruction, the verdict request, warming browser-use.

The Generator writes the instruction early (while the coder writes the first version); the GUI-Tester
writes it when that did not happen; the benchmark describes agent actions the same way.
"""

from __future__ import annotations

import asyncio
import base64
import sys
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from webgen_agent.checkpoints.pregel import kept_task
from webgen_agent.core.context import AgentContext, ModelSettings, Role
from webgen_agent.core.costs import Usage
from webgen_agent.core.state import AgentState, SampledTurn
from webgen_agent.core.views import Grade, GuiSummary, TestInstruction
from webgen_agent.nodes import prompts
from webgen_agent.nodes.common import sampled_turns
from webgen_agent.nodes.profile import context_prompts
from webgen_agent.tools.gui_agent import (
    BROWSER_USE_MODULES,
    GuiAction,
    GuiRun,
    UnsupportedBrowserUse,
    check_browser_use_version,
    import_browser_use,
)
from webgen_agent.tools.models import ModelCallError, ask_structured


@dataclass(frozen=True)
class WrittenInstruction:
    """The GUI test instruction, what writing it cost, and its turn as sampled (a step's ``sampled``)."""

    text: str
    usage: Usage
    sampled: dict[str, SampledTurn]


def gui_notes_writer(context: AgentContext) -> tuple[ModelSettings, Role]:
    """The model that writes the GUI test's instruction and summarises its run: the feedback model,
    or the VLM where the run's environment says so (WebGen-RL's rollouts)."""
    if context.rules.environment.gui_notes_by_vlm:
        return context.vlm, "vlm"
    return context.feedback, "feedback"


async def write_test_instruction(context: AgentContext, requirement: str) -> WrittenInstruction:
    rules = context_prompts(context)
    messages = [{"role": "user", "content": rules.test_instruction_user(requirement)}]
    writer, role = gui_notes_writer(context)
    answer = await ask_structured(writer, role, messages, TestInstruction)
    sampled = await sampled_turns(writer, {"test_instruction": (answer, messages)})
    if answer.value is None:
        # Still test something useful: the requirement itself is a usable instruction.
        return WrittenInstruction(
            f"Check that the website does what this asks: {requirement}{rules.test_suffix}", answer.usage, sampled
        )
    return WrittenInstruction(answer.value.instruction.strip() + rules.test_suffix, answer.usage, sampled)


def warm_gui_agent() -> None:
    """Import browser-use in a worker thread now, not at the first GUI test (about 3 s, once per process).

    Safe to import early: ``import_browser_use`` switches browser-use's telemetry, version check and
    log handlers off before the import, and applies this project's patches after it. Nothing is
    warmed for an unsupported browser-use: the GUI test reports that itself.
    """
    try:
        check_browser_use_version()
    except UnsupportedBrowserUse:
        return
    if not all(name in sys.modules for name in BROWSER_USE_MODULES):
        asyncio.get_running_loop().run_in_executor(None, import_browser_use)


async def early_test_instruction(
    context: AgentContext, requirement: str, *, kept: bool = False
) -> WrittenInstruction | None:
    """The instruction written ahead of need, or None when the feedback model failed.

    A failure is not the Generator's to report: the GUI-Tester asks again when it needs the
    instruction and reports the failure there, as it would have without the early call. ``kept``
    (inside a graph run): the call is a kept task, ``test_instruction_reply``.
    """
    try:
        if not kept:
            return await write_test_instruction(context, requirement)
        answer = await test_instruction_reply(context, requirement)
    except ModelCallError:
        return None
    return WrittenInstruction(answer["text"], Usage.model_validate(answer["usage"]), answer["sampled"])


@kept_task
async def test_instruction_reply(context: AgentContext, requirement: str) -> dict[str, Any]:
    """The early instruction as a kept task (as the coder's reply is, nodes/coding.py): a Generator run
    again after its process died gets it back instead of paying the feedback model again. Called
    before the node's coder call, so that both tasks keep their places in the node's call order."""
    written = await write_test_instruction(context, requirement)
    return {"text": written.text, "usage": written.usage.model_dump(), "sampled": dict(written.sampled)}


def describe_action(action: GuiAction) -> str:
    params = ", ".join(f"{k}={v!r}" for k, v in action.params.items())
    outcome = f" -> error: {action.error}" if action.error else (f" -> {action.result}" if action.result else "")
    return f"{action.name}({params}){outcome}"


def verdict_messages(state: AgentState, instruction: str, run: GuiRun) -> list[dict]:
    text = prompts.gui_verdict_user(
        state["requirement"],
        instruction,
        [describe_action(a) for a in run.actions],
        run.final_answer,
        run.stopped_reason,
    )
    content: list[dict] = [{"type": "text", "text": text}]
    if run.final_screenshot_png:
        image = base64.b64encode(run.final_screenshot_png).decode("ascii")
        content.append({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}})
    return [{"role": "user", "content": content}]


class UpstreamGuiResult(BaseModel):
    """A GUI run summarised as WebGen-Agent does (upstream profile)."""

    error: str = Field(default="", description="Why the GUI test could not run; empty when it ran.")
    passed: bool | None = Field(default=None, description="None when the run could not be summarised.")
    score: Grade = Field(default=0, description="The summary's grade 1-5; 0 when it ran into an error or no summary.")
    suggestions: str = ""
    usage: Usage = Field(default_factory=Usage)


# What stands for each page the agent was shown, in the trajectory the summary reads (WebGen-Agent's
# convert_to_string replaces every user turn by this marker).
SCREENSHOT_MARKER = "[webpage screenshot]"


def upstream_trajectory(run: GuiRun) -> list[str]:
    """The run as WebGen-Agent's summary reads it: each page the agent was shown (a marker), then the
    agent's own message at that step; its forced or chosen answer is the last message."""
    trajectory: list[str] = []
    for message in run.messages:
        trajectory += [SCREENSHOT_MARKER, message]
    return trajectory


async def upstream_gui_result(context: AgentContext, instruction: str, run: GuiRun) -> UpstreamGuiResult:
    """Summary by the feedback model from the instruction and what the agent did, read as WebGen-Agent
    reads it (A `utils/get_webvoyager_feedback.py` 16-30, 134-143; `agent/webgen_agent.py` 155-172):
    asked as often as the profile's judges (once upstream); a reply with no JSON object is an error,
    grade 0; an object that does not parse is an empty one; an agent whose last message holds "YES"
    passed, its suggestions cleared; an object without suggestions otherwise could not be summarised
    (errored) and keeps its grade. A harness error grades 0."""
    if run.stopped_reason == "error":
        return UpstreamGuiResult(error="; ".join(run.errors) or "the GUI agent failed")
    trajectory = upstream_trajectory(run)
    messages = [
        {"role": "system", "content": "You are a helpful agent."},
        {"role": "user", "content": context_prompts(context).gui_summary_user(instruction, trajectory)},
    ]
    writer, role = gui_notes_writer(context)
    answer = await ask_structured(writer, role, messages, GuiSummary, attempts=context.rules.profile.judge_attempts)
    if answer.raised_upstream:
        return UpstreamGuiResult(error="no JSON object in the GUI summary reply", usage=answer.usage)
    summary = answer.value or GuiSummary.model_validate({})  # an object that does not parse: upstream's {}
    # WebGen-Agent reads the agent's last message whole (its reasoning and its answer), case-sensitive.
    if "YES" in run.last_message:
        return UpstreamGuiResult(passed=True, score=summary.grade, suggestions="", usage=answer.usage)
    return UpstreamGuiResult(
        passed=None if summary.suggestions is None else summary.passed,
        score=summary.grade,
        suggestions=summary.suggestions or "",
        usage=answer.usage,
    )
