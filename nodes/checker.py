"""Checker: execution-grounded requirement checks of the latest page (WebLoop's scoring).

The instruction's requirements come from the run's input (WebGen-Bench test cases) or are written
once per instruction by the feedback model and kept in the ``requirements`` table, so every sample
of an instruction is checked against the same list. Each requirement gets one GUI-agent run on the
page (it may move between the site's pages); its final answer YES / PARTIAL / NO is the verdict
(credit 1 / 0.5 / 0). A page that did not run fails every check without starting an agent.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from langgraph.runtime import Runtime

from webgen_agent.checkpoints.credit import CREDIT, check_score
from webgen_agent.checkpoints.requirements import RequirementIndex, requirement_items
from webgen_agent.core.context import AgentContext, api_key_for, find_chromium
from webgen_agent.core.costs import Usage
from webgen_agent.core.state import AgentState, RequirementCheck, StepUpdate
from webgen_agent.core.views import RequirementItem, RequirementList
from webgen_agent.nodes import prompts
from webgen_agent.nodes.common import NodeResult, Update, edit_step, node, prepared_workspace, usage_record
from webgen_agent.nodes.profile import context_prompts
from webgen_agent.nodes.resources import get_resources
from webgen_agent.tools.gui_agent import GuiAgentSettings, GuiRun, leading_answer, run_gui_agent
from webgen_agent.tools.models import ask_structured

CHECKS_AT_ONCE = 2  # GUI agents of one page side by side (each ~1 renderer)


def instruction_key(requirement: str) -> str:
    return hashlib.sha256(requirement.strip().encode("utf-8")).hexdigest()


async def instruction_requirements(state: AgentState, context: AgentContext) -> tuple[list[RequirementCheck], Usage]:
    """The instruction's requirement list: the run's, the stored one, or a new one."""
    resources = get_resources()
    given = state.get("requirements")
    if given:
        return await asyncio.to_thread(requirement_items, given, resources.store), Usage()
    index = await asyncio.to_thread(RequirementIndex, resources.database)
    key = instruction_key(state["requirement"])
    stored = await asyncio.to_thread(index.get, key)
    if stored:
        return await resources.store.aget_json(stored), Usage()
    messages = [{"role": "user", "content": prompts.requirements_user(state["requirement"])}]
    answer = await ask_structured(context.feedback, "feedback", messages, RequirementList)
    items = answer.value.requirements if answer.value is not None and answer.value.requirements else []
    if not items:  # still check something: the instruction as one requirement
        items = [RequirementItem(task=state["requirement"], expected_result="The website does what this asks.")]
    digest = await resources.store.aput_json([item.model_dump() for item in items])
    winner = await asyncio.to_thread(index.put_once, key, digest)  # another sample may have stored its list first
    return await resources.store.aget_json(winner), answer.usage


async def _check(
    item: RequirementCheck, url: str, pages: list[str], context: AgentContext, slots: asyncio.Semaphore
) -> GuiRun:
    resources = get_resources()
    async with slots:
        browser = await resources.browser(context)
        settings = GuiAgentSettings(
            model=context.vlm.model,
            base_url=context.vlm.base_url,
            api_key=api_key_for(context.vlm, "vlm"),
            max_actions=context.gui_max_actions,
            timeout_s=context.gui_timeout_s,
            chromium_path=await asyncio.to_thread(find_chromium, context.chromium),
            cdp_url=(await browser.start()).ws_url,  # one Chromium; each agent sees a context of its own
            viewport=(context.viewport_width, context.viewport_height),
            system_rule=context_prompts(context).gui_page_rule,
            offline_pages=context.offline_pages,
        )
        task = prompts.check_task(url, item["task"], item["expected_result"], pages)
        return await run_gui_agent(url=url, task=task, settings=settings)


def check_record(position: int, item: RequirementCheck, run: GuiRun | None, why: str = "") -> dict[str, Any]:
    verdict = leading_answer(run.final_answer) if run is not None else None
    if run is None:
        source, reason = "not_run", why
    elif verdict is None:
        source, reason = ("error", "; ".join(run.errors)) if run.stopped_reason == "error" else ("agent", "no verdict")
    else:
        source, reason = "agent", run.final_answer or ""
    final = verdict or "NO"
    return {
        "id": position,
        "task": item["task"],
        "expected_result": item["expected_result"],
        "verdict": final,
        "credit": CREDIT[final],
        "source": source,
        "reason": reason[:600],
        "actions": len(run.actions) if run is not None else 0,
    }


@node
async def checker(state: AgentState, runtime: Runtime[AgentContext]) -> NodeResult:
    context = runtime.context
    resources = get_resources()
    target = edit_step(state)
    items, usage = await instruction_requirements(state, context)
    update: Update = {"requirements": items}
    if target is None:  # nothing was ever written: nothing to check
        return NodeResult(update, "no page to check")
    served = None
    execution = target.get("execution")
    if execution and execution["ok"]:
        served = await resources.site(await prepared_workspace(state), context).ensure_running(None)
    if served is None or not served.ok or not served.url:
        why = "the page did not run" if served is None else f"the site is not running: {served.error}"
        records = [check_record(n, item, None, why) for n, item in enumerate(items)]
    else:
        listed = target.get("pages")
        pages = [p["path"] for p in await resources.store.aget_json(listed)] if listed else ["/"]
        slots = asyncio.Semaphore(CHECKS_AT_ONCE)
        runs = await asyncio.gather(*(_check(item, served.url, pages, context, slots) for item in items))
        records = [check_record(n, item, run) for n, (item, run) in enumerate(zip(items, runs, strict=True))]
        usage = usage + sum((r.usage for r in runs), Usage())
    score = check_score([r["verdict"] for r in records])
    patch: StepUpdate = {
        "index": target["index"],
        "checks": await resources.store.aput_json(records),
        "check_score": score,
        "tokens": {"checker": usage_record(usage)},
    }
    update["steps"] = [patch]
    return NodeResult(update, f"checks {' '.join(r['verdict'] for r in records)} (score {score:.2f})")
