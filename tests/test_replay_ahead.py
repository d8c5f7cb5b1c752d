"""A GUI run the agent itself passed is recorded while the verdict model reads it (nodes/replay.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_gui_agent import TASK, TODO_RULES, needs_chromium, scripted
from tests.test_replay import site  # noqa: F401  (the todo page, served)
from webgen_agent.apps.demo import scripted_context
from webgen_agent.nodes.replay import record_passing, start_recording
from webgen_agent.nodes.resources import bind_resources
from webgen_agent.tools.browser import SharedBrowser
from webgen_agent.tools.gui_agent import GuiAgentSettings, run_gui_agent
from webgen_agent.tools.replay.views import RecordedTest


@pytest.mark.e2e
@needs_chromium
async def test_a_run_the_agent_passed_is_recorded_ahead_and_graded_by_its_verdict(
    site: tuple[str, Path],  # noqa: F811
    shared_browser: SharedBrowser,
    browser_node_harness,
) -> None:
    url, _ = site
    async with scripted(TODO_RULES) as server:
        settings = GuiAgentSettings(model="vlm", base_url=server.base_url, api_key="k", cdp_url=shared_browser.ws_url)
        run = await run_gui_agent(url=url, task=TASK, settings=settings)
        context = scripted_context(server.base_url)
    assert run.final_answer is not None and run.final_answer.startswith("YES")
    target = {"index": 2}
    with bind_resources(browser_node_harness.resources):
        # Started before any verdict, in a task of its own: the verdict's call runs beside it.
        recording = start_recording(context, url, run, target=target, instruction=TASK)  # type: ignore[arg-type]
        assert recording is not None and not recording.done()
        refs = await record_passing(
            {"replay_tests": []},  # type: ignore[typeddict-item]
            context,
            url,
            run,
            target=target,  # type: ignore[arg-type]
            instruction=TASK,
            passed=True,
            score=4,
            recording=recording,
        )
        assert refs is not None
        (ref,) = refs
        # The test carries the verdict's grade, though it was recorded before the verdict came.
        assert ref["name"] == "step-2" and ref["covers_all"] is True and ref["score"] == 4
        test = RecordedTest.model_validate(await browser_node_harness.store.aget_json(ref["hash"]))
        assert test.covers_all is True and test.source_score == 4 and test.recorded_at_step == 2
        assert [s.kind for s in test.steps] == ["goto", "fill", "click", "expect_count", "expect_text", "expect_text"]

        # A verdict that fails the run keeps nothing of a recording made ahead.
        again = start_recording(context, url, run, target=target, instruction=TASK)  # type: ignore[arg-type]
        assert again is not None
        kept = await record_passing(
            {"replay_tests": refs},  # type: ignore[typeddict-item]
            context,
            url,
            run,
            target=target,  # type: ignore[arg-type]
            instruction=TASK,
            passed=False,
            score=2,
            recording=again,
        )
        assert kept is None
        again.cancel()

        # A run the agent itself failed is not recorded ahead (its verdict decides, afterwards).
        failed = run.model_copy(update={"final_answer": "NO - the item is missing"})
        assert start_recording(context, url, failed, target=target, instruction=TASK) is None  # type: ignore[arg-type]
