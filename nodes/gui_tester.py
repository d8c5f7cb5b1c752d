"""GUI-Tester: a browser-use agent clicks through the required functions; the feedback model judges.

The test instruction is written once per run, by the Generator while the coder writes the first
version (``early_test_instruction``), or here when that did not happen. The verdict is credited to the code-edit step under
test (for a ``screenshot_validated`` turn, the edit step before it).
"""

from __future__ import annotations

import asyncio
import base64
import sys

from langgraph.runtime import Runtime

from webgen_agent.graph.context import AgentContext, api_key_for, find_chromium
from webgen_agent.graph.resources import get_resources
from webgen_agent.graph.state import AgentState, Step
from webgen_agent.nodes import prompts
from webgen_agent.nodes.common import Update, current_step, edit_step, node, prepared_workspace, usage_record
from webgen_agent.nodes.views import GuiVerdict, TestInstruction
from webgen_agent.tools.gui_agent import BROWSER_USE_MODULES, GuiAction, GuiRun, import_browser_use, run_gui_agent
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

    Safe to import early: ``tools.gui_agent`` (imported above) has already switched browser-use's
    telemetry, version check and log handlers off.
    """
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
        state["requirement"], instruction, [describe_action(a) for a in run.actions], run.final_answer, run.stopped_reason
    )
    content: list[dict] = [{"type": "text", "text": text}]
    if run.final_screenshot_png:
        image = base64.b64encode(run.final_screenshot_png).decode("ascii")
        content.append({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}})
    return [{"role": "user", "content": content}]


@node("gui_tester")
async def gui_tester(state: AgentState, runtime: Runtime[AgentContext]) -> Update:
    context = runtime.context
    resources = get_resources()
    step = current_step(state)
    target = edit_step(state)
    if target is None:
        raise RuntimeError("gui_tester reached with no code-edit step to test")
    usage = Usage()
    instruction = state.get("test_instruction")
    update: Update = {}
    if not instruction:
        instruction, usage = await write_test_instruction(context, state["requirement"])
        update["test_instruction"] = instruction

    site = resources.site(prepared_workspace(state), context)
    served = await site.ensure_running(None)  # restarts a server that died since the edit step
    if not served.ok or not served.url:
        run = GuiRun(stopped_reason="error", errors=[f"the site is not running: {served.error}"])
    else:
        browser = await resources.browser(context)
        prepared = await resources.take_gui_session(state["run_id"], target["index"]) if state.get("run_id") else None
        run = await run_gui_agent(
            url=served.url,
            task=prompts.gui_task(served.url, instruction),
            model=context.vlm.model,
            base_url=context.vlm.base_url,
            api_key=api_key_for(context.vlm, "vlm"),
            max_actions=context.gui_max_actions,
            timeout_s=context.gui_timeout_s,
            chromium_path=find_chromium(context.chromium),
            # Concurrent runs share this Chromium; each agent sees only a browser context of its own.
            cdp_url=(await browser.start()).ws_url,
            viewport=(context.viewport_width, context.viewport_height),
            prepared=prepared,  # opened while the screenshot was graded (closed by the run either way)
        )
    usage = usage + Usage(input_tokens=run.input_tokens, output_tokens=run.output_tokens, calls=run.steps)
    answer = await ask_structured(context.feedback, "feedback", verdict_messages(state, instruction, run), GuiVerdict)
    usage = usage + answer.usage
    if answer.value is not None:
        passed, score, suggestions = answer.value.passed, answer.value.score, answer.value.suggestions
    else:
        passed, score, suggestions = False, 1, [f"The GUI test could not be judged: {answer.error}"]
    blobs = resources.store
    record = run.model_dump(mode="json", exclude={"final_screenshot_png"})
    if run.final_screenshot_png:
        record["final_screenshot"] = blobs.put(run.final_screenshot_png)
    results: Step = {
        "index": target["index"],
        "gui_score": score,
        "gui_passed": passed,
        "gui_suggestions": suggestions,
        "gui_run": blobs.put_json({"instruction": instruction, **record}),
    }
    patches: list[Step] = [results]
    own: Step = {"index": step["index"], "tokens": {"gui_tester": usage_record(usage)}}
    if step["index"] != target["index"]:
        # The control-word step reports what its test found.
        own.update({k: v for k, v in results.items() if k != "index"})  # type: ignore[misc]
        own["screenshot_score"] = target.get("screenshot_score", 0)
    patches.append(own)
    update.update(steps=patches, _message=f"GUI {'passed' if passed else 'failed'} {score}/5")
    return update
