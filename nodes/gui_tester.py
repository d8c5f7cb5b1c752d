"""GUI-Tester: a browser-use agent clicks through the required functions; the feedback model judges.

The test instruction is written once per run, by the Generator while the coder writes the first
version (``early_test_instruction``), or here when that did not happen. The verdict is credited to the code-edit step under
test (for a ``screenshot_validated`` turn, the edit step before it).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from webgen_agent.core.context import AgentContext, ModelSettings, api_key_for, find_chromium
from webgen_agent.core.costs import Usage
from webgen_agent.core.error_count import count_after, verdict_of
from webgen_agent.core.profiles import ERRORED_SCORE
from webgen_agent.core.state import AgentState, Execution, SampledTurn, Step, StepUpdate
from webgen_agent.core.views import GuiVerdict
from webgen_agent.nodes.common import (
    WORKSPACE_MARKER,
    NodeResult,
    Update,
    current_step,
    edit_step,
    node,
    prepared_workspace,
    sampled_turns,
    usage_record,
)
from webgen_agent.nodes.gui_testing import (
    UpstreamGuiResult,
    upstream_gui_result,
    verdict_messages,
    write_test_instruction,
)
from webgen_agent.nodes.profile import context_prompts
from webgen_agent.nodes.replay import (
    REGRESSION_SCORE,
    GuiPlan,
    covered_score,
    gui_plan,
    record_passing,
    start_recording,
)
from webgen_agent.nodes.resources import get_resources
from webgen_agent.nodes.site_results import execution_record, log_error_words
from webgen_agent.tools.bolt import parse_reply
from webgen_agent.tools.endpoints import wait_out
from webgen_agent.tools.gui_agent import GuiAgentSettings, GuiRun, run_gui_agent
from webgen_agent.tools.models import ModelCallError, ask_structured
from webgen_agent.tools.site import ExecutionResult, ServedModule, SiteRunner
from webgen_agent.tools.site.project import write_default_vite_config
from webgen_agent.tools.workspace import apply_files


async def page_paths(step: Step) -> list[str]:
    """The site's captured pages (the GUI agent may move between them)."""
    pages = step.get("pages")
    return [p["path"] for p in await get_resources().store.aget_json(pages)] if pages else []


@node
async def gui_tester(state: AgentState, runtime: Runtime[AgentContext]) -> NodeResult:
    context = runtime.context
    resources = get_resources()
    step = current_step(state)
    target = edit_step(state)
    if target is None:
        raise RuntimeError("gui_tester reached with no code-edit step to test")
    rules = context.rules.profile
    usage = Usage()
    instruction = state.get("test_instruction")
    update: Update = {}
    sampled: dict[str, SampledTurn] = {}
    if not instruction:
        asked_for = await write_test_instruction(context, state["requirement"])
        instruction, usage, sampled = asked_for.text, asked_for.usage, asked_for.sampled
        update["test_instruction"] = instruction

    workspace = await prepared_workspace(state)
    site = resources.site(workspace, context)
    written = await write_control_files(state, context, site, workspace)
    if written is not None:
        update["files"], update["steps"] = written.files, [written.patch]
    changed = written.paths if written is not None else None
    served_before = written.served_before if written is not None else None
    # Restarts a server that died since the edit step; a kept one serves the written files first (the
    # upstream profile installs and starts anew: the step reads its own install output and log).
    served = await site.ensure_running(changed, served_before=served_before)
    # The recorded tests' replay on this edit is the verdict (no agent, no model) unless the files
    # differ from those the replay ran on (a control reply's written since, in rollouts).
    replayed_files = written is None or written.files == target.get("files")
    plan = (
        gui_plan(target, state.get("replay_tests") or []) if context.rules.replay_tests and replayed_files else "agent"
    )
    if plan != "agent":
        if state.get("run_id"):
            resources.drop_gui_session(state["run_id"])
        replayed = replayed_update(state, step, target, plan, usage)
        return NodeResult({**update, **replayed.update}, replayed.message)
    run = await run_agent(context, state, target, served, instruction)
    usage = usage + run.usage
    if rules.gui_grade_on_signal_step:
        upstream = await upstream_gui_result(context, instruction, run)
        execution = None
        if rules.fresh_run_each_step:
            # Read after the agent navigated: what the server printed meanwhile counts, as upstream's log does.
            execution = execution_record(served)
            await log_error_words(execution, served, site, None, context.rules.environment)
        record = await asyncio.to_thread(_run_record, instruction, run)
        result = upstream_update(state, step, target, upstream, record, usage, execution)
        steps = [*update.get("steps", []), *result.update.get("steps", [])]
        return NodeResult({**update, **result.update, "steps": steps}, result.message)
    judged = await judged_update(context, state, step, target, served, instruction, run, usage, sampled)
    steps = [*update.get("steps", []), *judged.update.get("steps", [])]
    return NodeResult({**update, **judged.update, "steps": steps}, judged.message)


@dataclass
class ControlFiles:
    """The files a control reply held, written before its GUI test (WebGen-RL's rollout environment)."""

    files: str  # the workspace's snapshot after the write
    patch: StepUpdate  # the control step's files, what changed and any refused path
    paths: set[str]  # the written paths, for the kept dev server's freshness check
    served_before: dict[str, ServedModule]


async def write_control_files(
    state: AgentState, context: AgentContext, site: SiteRunner, workspace: Path
) -> ControlFiles | None:
    """Write the files of an artifact inside the control reply, when the reply format keeps them.

    WebGen-RL rebuilds the workspace from every assistant turn before each observation, a control
    turn's files included (RL feedback/file_management.py ``create_workspace``); the agent loop
    never writes them. None when there is nothing to write.
    """
    step = current_step(state)
    if step["action"] == "edit":  # an edit's own files: the executor wrote and recorded them
        return None
    blobs = get_resources().store
    reply = await blobs.aget_text(step["completion"])
    files = parse_reply(reply, context.rules.environment.replies).files
    if not files:
        return None
    paths = {f.path.strip().lstrip("./") for f in files}
    served_before = await site.served_modules(paths)
    base = state.get("files")
    before = await blobs.amanifest(base) if base else {}
    applied = await asyncio.to_thread(apply_files, workspace, files)
    if context.rules.profile.default_vite_config:
        await asyncio.to_thread(write_default_vite_config, workspace)
    snapshot = await asyncio.to_thread(blobs.snapshot, workspace)
    await asyncio.to_thread((workspace / WORKSPACE_MARKER).write_text, snapshot)
    after = await blobs.amanifest(snapshot)
    patch: StepUpdate = {
        "index": step["index"],
        "files": snapshot,
        "base_files": base,
        "changed": sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p)),
        "problems": [*step["problems"], *(f"{path}: {why}" for path, why in applied.refused.items())],
    }
    return ControlFiles(files=snapshot, patch=patch, paths=paths, served_before=served_before)


def replayed_update(state: AgentState, step: Step, target: Step, plan: GuiPlan, usage: Usage) -> NodeResult:
    """The GUI test's record when the recorded tests' replay decided it: a regression fails it with
    the replay's concrete failures; full coverage passes it with the grade the tests were recorded at."""
    replay = target.get("replay")
    regressions = list(replay["regressions"]) if replay else []
    regression = plan == "regression"
    found: StepUpdate = {
        "index": target["index"],
        "gui_score": REGRESSION_SCORE if regression else covered_score(state.get("replay_tests") or []),
        "gui_passed": not regression,
        "gui_suggestions": regressions,
        "gui_run": None,
    }
    own: StepUpdate = {"index": step["index"], "tokens": {"gui_tester": usage_record(usage)}}
    if step["index"] != target["index"]:
        own.update({**found, "index": step["index"], "screenshot_score": target["screenshot_score"]})
    verdict = f"{len(regressions)} recorded test(s) regressed" if regression else "recorded tests passed"
    return NodeResult({"steps": [found, own]}, f"GUI {'failed' if regression else 'passed'} (replay: {verdict})")


def _run_record(instruction: str, run: GuiRun) -> str:
    """Blob hash of the GUI run (actions, answer, the page before each agent step and at the end) and
    its instruction; images are blobs of their own."""
    blobs = get_resources().store
    record = run.model_dump(mode="json", exclude={"final_screenshot_png", "frames"})
    if run.final_screenshot_png:
        record["final_screenshot"] = blobs.put(run.final_screenshot_png)
    record["frames"] = [{"step": f.step, "url": f.url, "screenshot": blobs.put(f.thumbnail())} for f in run.frames]
    return blobs.put_json({"instruction": instruction, **record})


def upstream_update(
    state: AgentState,
    step: Step,
    target: Step,
    result: UpstreamGuiResult,
    run_record: str,
    usage: Usage,
    own_run: Execution | None = None,
) -> NodeResult:
    """The upstream profile's record of a GUI test: the grade on the signal step (and its edit), errored
    when the test could not run or be summarised, its install output or server log holds the word
    "error" (``own_run``: the GUI step's own run; else the edit's), or the edit's screenshot grade
    is 2 or less."""
    suggestions = [result.suggestions] if result.suggestions else []
    found: StepUpdate = {
        "index": target["index"],
        "gui_score": result.score,
        "gui_passed": result.passed,
        "gui_suggestions": suggestions,
        "gui_run": run_record,
    }
    execution = own_run if own_run is not None else target.get("execution")
    errored = (
        bool(result.error)
        or result.passed is None
        or bool(execution and (execution.get("install_error") or execution.get("start_error")))
        or target["screenshot_score"] <= ERRORED_SCORE
    )
    own: StepUpdate = {
        **found,
        "index": step["index"],
        "gui_error": result.error,
        "screenshot_score": target["screenshot_score"],
        "errored": errored,
        "tokens": {"gui_tester": usage_record(usage + result.usage)},
    }
    if own_run is not None:
        own["execution"] = own_run
    verdict = f"GUI error: {result.error[:80]}" if result.error else f"GUI {result.score}/5"
    update: Update = {
        "steps": [found, own] if step["index"] != target["index"] else [own],
        "consecutive_errors": count_after(state, verdict_of(errored, final=True)),
    }
    return NodeResult(update, verdict)


async def run_agent(
    context: AgentContext, state: AgentState, target: Step, served: ExecutionResult, instruction: str
) -> GuiRun:
    """The browser-use agent's run against the served site (a run that could not start when it is not served)."""
    resources = get_resources()
    rules = context.rules.profile
    prompt_set = context_prompts(context)
    if not served.url or not (served.ok or rules.grade_every_capture):
        return GuiRun(stopped_reason="error", errors=[f"the site is not running: {served.error}"])
    # A session opened ahead is dropped if its Chromium died since; ws_url is read once it runs again.
    prepared = await resources.take_gui_session(state["run_id"], target["index"]) if state.get("run_id") else None
    browser = await resources.browser(context)
    cdp_url = browser.ws_url  # runs share this Chromium; each agent sees a context of its own
    url = served.url
    chromium = await asyncio.to_thread(find_chromium, context.chromium)

    async def gui_run(vlm: ModelSettings) -> GuiRun:
        nonlocal prepared
        ahead, prepared = prepared, None  # opened while the screenshot was graded: good for one run
        settings = GuiAgentSettings(
            model=vlm.model,
            base_url=vlm.base_url,
            api_key=api_key_for(vlm, "vlm"),
            max_tokens=vlm.max_tokens,
            max_actions=context.gui_max_actions,
            **rules.gui_agent(),
            last_step_prompt=prompt_set.gui_limit(instruction),
            timeout_s=context.gui_timeout_s,
            chromium_path=chromium,
            cdp_url=cdp_url,
            viewport=(context.viewport_width, context.viewport_height),
            system_rule=prompt_set.gui_page_rule,
            offline_pages=context.offline_pages,
        )
        return await run_gui_agent(
            url=url,
            task=prompt_set.gui_task(url, instruction, await page_paths(target)),
            settings=settings,
            prepared=ahead,
        )

    async def tested() -> GuiRun:
        nonlocal cdp_url
        cdp_url = browser.ws_url  # read as it starts: a relaunched Chromium has a new one
        # A test the model endpoint broke off says nothing about the site: wait the endpoint out and
        # test again (then on the fallback); if it stays down, stop the run (resumable), unscored.
        return await wait_out(context.vlm, "vlm", gui_run, lambda r: r.errors[-1] if r.endpoint_down else None)

    # Chromium dying under the test (crashed, killed, out of memory) is not the site's fault, and a
    # test it cut short ends without an error: any test it died under is run once more from the start.
    run = await browser.once_more_if_died(tested, failed=lambda _: True, errors=(), what=f"testing {url}")
    if run.endpoint_down:
        raise ModelCallError(f"vlm model {context.vlm.model!r} (GUI agent): {run.errors[-1]}")
    return run


async def judged_update(
    context: AgentContext,
    state: AgentState,
    step: Step,
    target: Step,
    served: ExecutionResult,
    instruction: str,
    run: GuiRun,
    usage: Usage,
    sampled: dict[str, SampledTurn],
) -> NodeResult:
    """The default profile's record of a GUI test: the verdict model's pass/fail, grade and suggestions
    on the edit under test (and the control step that asked for it); a passing run is recorded for replay."""
    rules = context.rules.profile
    update: Update = {}
    # Where a passing run is recorded as a replayable test: the served site, when it records tests at all.
    record_url = served.url if context.rules.replay_tests and served.ok else None
    # The run is stored, and (when a verdict could keep it) recorded as a test, while the verdict
    # model reads it: neither depends on the verdict, and a 5 s verdict hides the 2-3 s they take.
    run_record = asyncio.create_task(asyncio.to_thread(_run_record, instruction, run))
    recording = (
        start_recording(context, record_url, run, target=target, instruction=instruction) if record_url else None
    )
    try:
        asked = verdict_messages(state, instruction, run)
        answer = await ask_structured(context.feedback, "feedback", asked, GuiVerdict, strict=rules.strict_verdicts)
        usage = usage + answer.usage
        if answer.value is not None:
            passed, score, suggestions = answer.value.passed, answer.value.score, answer.value.suggestions
        else:
            passed, score, suggestions = False, 1, [f"The GUI test could not be judged: {answer.error}"]
        if record_url and answer.value is not None:
            refs = await record_passing(
                state,
                context,
                record_url,
                run,
                target=target,
                instruction=instruction,
                passed=passed,
                score=score,
                recording=recording,
            )
            if refs is not None:
                update["replay_tests"] = refs
        results: StepUpdate = {
            "index": target["index"],
            "gui_score": score,
            "gui_passed": passed,
            "gui_suggestions": suggestions,
            "gui_run": await run_record,
        }
    finally:
        await _settled(recording)  # a recording the verdict did not keep (or an error) is stopped
        await _settled(run_record)
    patches: list[StepUpdate] = [results]
    own: StepUpdate = {"index": step["index"], "tokens": {"gui_tester": usage_record(usage)}}
    if step["index"] != target["index"]:
        # The control-word step reports what its test found.
        own.update(
            {
                "gui_score": score,
                "gui_passed": passed,
                "gui_suggestions": suggestions,
                "gui_run": results["gui_run"],
                "screenshot_score": target["screenshot_score"],
            }
        )
    sampled = {**sampled, **await sampled_turns(context.feedback, {"gui_tester/verdict": (answer, asked)})}
    if sampled:
        own["sampled"] = sampled
    patches.append(own)
    update["steps"] = patches
    return NodeResult(update, f"GUI {'passed' if passed else 'failed'} {score}/5")


async def _settled(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` if it still runs and wait until it has ended. Its error, if any, reached whoever
    awaited it; one nobody awaited (the verdict failed first) is dropped with it."""
    if task is None:
        return
    if not task.done():
        task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # marked retrieved
