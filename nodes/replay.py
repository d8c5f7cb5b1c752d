"""Recorded GUI tests in the loop (default profile, ``ProfileRules.replay_tests``).

The executor replays every recorded test after an edit that renders; the GUI-Tester decides from
those verdicts whether the GUI agent must run, and records a test from each passing agent run.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from webgen_agent.core.context import AgentContext
from webgen_agent.core.state import AgentState, ReplaySummary, ReplayTestRef, Step
from webgen_agent.nodes.resources import get_resources
from webgen_agent.tools.gui_agent import GuiRun, leading_answer
from webgen_agent.tools.replay.record import record_test
from webgen_agent.tools.replay.runner import replay_tests
from webgen_agent.tools.replay.views import RecordedTest, ReplayVerdict

MAX_RECORDED = 6  # tests kept per run (the oldest go first): replays stay a few seconds a step
REGRESSION_SCORE = 2  # the GUI grade of an edit whose recorded test fails (as a failed GUI test)

GuiPlan = Literal["regression", "covered", "agent"]


async def load_tests(refs: list[ReplayTestRef]) -> list[RecordedTest]:
    blobs = get_resources().store
    return [RecordedTest.model_validate(await blobs.aget_json(ref["hash"])) for ref in refs]


async def replay_recorded(state: AgentState, context: AgentContext, url: str) -> ReplaySummary | None:
    """Replay the run's recorded tests against the site at ``url`` (no model call); None when there are none."""
    refs = state.get("replay_tests") or []
    if not refs:
        return None
    resources = get_resources()
    browser = await resources.browser(context)
    verdicts = await replay_tests(
        browser,
        url,
        await load_tests(refs),
        viewport=(context.viewport_width, context.viewport_height),
        offline=context.offline_pages,
    )
    records = []
    for verdict in verdicts:
        record = verdict.model_dump(mode="json", exclude={"screenshot_png"})
        record["screenshot"] = await resources.store.aput(verdict.screenshot_png) if verdict.screenshot_png else None
        records.append(record)

    def count(status: str) -> int:
        return sum(v.status == status for v in verdicts)

    return {
        "verdicts": await resources.store.aput_json(records),
        "passed": count("passed"),
        "failed": count("failed"),
        "flaky": count("flaky"),
        "unmatched": count("unmatched"),
        "seconds": round(sum(v.seconds for v in verdicts), 3),
        "regressions": [v.for_coder() for v in verdicts if v.status == "failed"],
    }


def gui_plan(target: Step, refs: list[ReplayTestRef]) -> GuiPlan:
    """Whether the GUI agent must test ``target``: not for a regression the replay explains, nor when
    every recorded test passed and one of them covers the whole instruction."""
    replay = target.get("replay")
    if not replay:
        return "agent"
    if replay["failed"]:
        return "regression"
    if replay["flaky"] or replay["unmatched"] or not any(ref["covers_all"] for ref in refs):
        return "agent"
    return "covered"


async def unmatched_tests(target: Step) -> set[str]:
    """Names of the tests whose locators matched nothing on ``target``'s site (the agent re-checks them)."""
    replay = target.get("replay")
    if not replay or not replay["unmatched"]:
        return set()
    records = await get_resources().store.aget_json(replay["verdicts"])
    return {ReplayVerdict.model_validate(r).test for r in records if r["status"] == "unmatched"}


def may_record(run: GuiRun) -> bool:
    """Whether a verdict could make the run a recorded test: the agent itself answered YES or PARTIAL.

    Such a run is recorded while the verdict model reads it (``start_recording``); any other run is
    recorded, if its verdict passes it, after the verdict.
    """
    return leading_answer(run.final_answer) in ("YES", "PARTIAL")


async def recorded_run(
    context: AgentContext, url: str, run: GuiRun, *, target: Step, instruction: str
) -> RecordedTest | None:
    """The run reproduced on a fresh page and replayed once (``record_test``); None when nothing of it
    replays. Its grade (``covers_all``, ``source_score``) is the verdict's, set by ``record_passing``."""
    return await record_test(
        await get_resources().browser(context),
        url,
        run,
        name=f"step-{target['index']}",
        instruction=instruction,
        step=target["index"],
        covers_all=False,
        score=REGRESSION_SCORE,
        viewport=(context.viewport_width, context.viewport_height),
        offline=context.offline_pages,
    )


def start_recording(
    context: AgentContext, url: str, run: GuiRun, *, target: Step, instruction: str
) -> asyncio.Task[RecordedTest | None] | None:
    """Record the run in a task of its own while the verdict is asked for, when a verdict could keep it.

    The recording reads only the run and the site (never the verdict), so starting it before the
    verdict gives the same test; a verdict that keeps nothing cancels it (``record_passing`` or the
    caller's ``finally``). None when no verdict could keep this run.
    """
    if not may_record(run):
        return None
    return asyncio.create_task(recorded_run(context, url, run, target=target, instruction=instruction))


async def record_passing(
    state: AgentState,
    context: AgentContext,
    url: str,
    run: GuiRun,
    *,
    target: Step,
    instruction: str,
    passed: bool,
    score: int,
    recording: asyncio.Task[RecordedTest | None] | None = None,
) -> list[ReplayTestRef] | None:
    """The run's recorded tests after a GUI test that passed (or passed in part): None when nothing changes.

    ``recording``: the run's recording started ahead (``start_recording``); without it the run is
    recorded here. The new test replaces those the agent re-checked because their locators matched nothing.
    """
    covers_all = passed
    if not passed and leading_answer(run.final_answer) != "PARTIAL":
        return None
    resources = get_resources()
    if recording is not None:
        recorded = await recording
    else:
        recorded = await recorded_run(context, url, run, target=target, instruction=instruction)
    if recorded is None:
        return None
    test = recorded.model_copy(update={"covers_all": covers_all, "source_score": score})
    replaced = await unmatched_tests(target) | {test.name}
    kept = [ref for ref in state.get("replay_tests") or [] if ref["name"] not in replaced]
    ref: ReplayTestRef = {
        "name": test.name,
        "hash": await resources.store.aput_json(test.model_dump(mode="json")),
        "step": target["index"],
        "covers_all": covers_all,
        "score": score,
    }
    return [*kept, ref][-MAX_RECORDED:]


def covered_score(refs: list[ReplayTestRef]) -> int:
    """The grade of a GUI test the replays stand for: the best grade among the runs they were recorded from."""
    return max((ref["score"] for ref in refs if ref["covers_all"]), default=REGRESSION_SCORE)
