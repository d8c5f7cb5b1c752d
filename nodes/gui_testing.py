"""What the GUI test needs besides the node itself: its instruction, the verdict request, warming browser-use.

The Generator writes the instruction early (while the coder writes the first version); the GUI-Tester
writes it when that did not happen; the benchmark describes agent actions the same way.
"""

from __future__ import annotations

import asyncio
import base64
import sys

from webgen_agent.core.context import AgentContext
from webgen_agent.core.state import AgentState
from webgen_agent.core.views import TestInstruction
from webgen_agent.nodes import prompts
from webgen_agent.tools.gui_agent import (
    BROWSER_USE_MODULES,
    GuiAction,
    GuiRun,
    UnsupportedBrowserUse,
    check_browser_use_version,
    import_browser_use,
)
from webgen_agent.tools.models import ModelCallError, Usage, ask_structured


async def write_test_instruction(context: AgentContext, requirement: str) -> tuple[str, Usage]:
    messages = [{"role": "user", "content": prompts.test_instruction_user(requirement)}]
    answer = await ask_structured(context.feedback, "feedback", messages, TestInstruction)
    if answer.value is None:
        # Still test something useful: the requirement itself is a usable instruction.
        return f"Check that the website does what this asks: {requirement}", answer.usage
    return answer.value.instruction, answer.usage


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


async def early_test_instruction(context: AgentContext, requirement: str) -> tuple[str, Usage] | None:
    """The instruction written ahead of need, or None when the feedback model failed.

    A failure is not the Generator's to report: the GUI-Tester asks again when it needs the
    instruction and reports the failure there, as it would have without the early call.
    """
    try:
        return await write_test_instruction(context, requirement)
    except ModelCallError:
        return None


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
