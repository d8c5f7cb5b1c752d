"""Upstream-profile rules pinned one by one, each against a port of WebGen-Agent's code or content
(src/agent/webgen_agent.py, src/utils/get_webvoyager_feedback.py, src/prompts/system.py at ba86ef1).

Each test here fails when its rule is reverted (docs/fidelity.md cites them as R).
"""

from __future__ import annotations

import random
from typing import Any

from webgen_agent.apps.demo import scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.core.state import Step
from webgen_agent.nodes.gui_testing import upstream_gui_result
from webgen_agent.nodes.profile import prompts_for
from webgen_agent.nodes.selection import best_good_step, best_step
from webgen_agent.tools.gui_agent import GuiRun

# ---- the best step: WebGen-Agent's choose_best_node, ported -------------------------------------


def upstream_choose_best(nodes: dict[str, dict[str, Any]]) -> tuple[str, bool]:
    """choose_best_node: good nodes (screenshot >= 3, no error) if any, else all; the highest
    (GUI grade, screenshot grade, step index). Returns the node's name and whether it was good."""
    good = [(k, v) for k, v in nodes.items() if v["screenshot_grade"] >= 3 and not v["has_error"]]
    pool = good or list(nodes.items())
    best = max(pool, key=lambda kv: (kv[1]["webvoyager_grade"], kv[1]["screenshot_grade"], int(kv[0][4:])))
    return best[0], bool(good)


def edit(index: int, screenshot: int, gui: int, errored: bool) -> Step:
    return Step(  # type: ignore[typeddict-item]
        index=index,
        action="edit",
        files=f"files-{index}",
        tests_step=index,
        screenshot_score=screenshot,
        gui_score=gui,
        errored=errored,
    )


def test_best_step_ranks_the_gui_grade_before_the_screenshot_grade():
    """A step with the better GUI grade wins over one with the better screenshot grade, as
    choose_best_node's key (webvoyager_grade, screenshot_grade, index) ranks them."""
    steps = [edit(0, 5, 2, False), edit(1, 3, 4, False), edit(2, 4, 4, False), edit(3, 5, 1, False)]
    chosen = best_step(steps, "every-step")
    assert chosen is not None and chosen["index"] == 2  # GUI 4 beats GUI 2 with screenshot 5; then screenshot 4 > 3
    target = best_good_step(steps, "every-step")
    assert target is not None and target["index"] == 2


def test_best_step_equals_upstreams_choice_on_random_histories():
    rng = random.Random(31)
    for _ in range(500):
        steps = [edit(i, rng.randint(0, 5), rng.randint(0, 5), rng.random() < 0.4) for i in range(rng.randint(1, 8))]
        nodes = {
            f"step{s['index']}": {
                "screenshot_grade": s["screenshot_score"],
                "webvoyager_grade": s["gui_score"],
                "has_error": s["errored"],
            }
            for s in steps
        }
        name, good = upstream_choose_best(nodes)
        chosen = best_step(steps, "every-step")
        assert chosen is not None and f"step{chosen['index']}" == name
        target = best_good_step(steps, "every-step")  # the backtrack target: a good step, or none
        assert (f"step{target['index']}" if target is not None else None) == (name if good else None)


# ---- the GUI verdict: "YES" in the agent's last message passes ------------------------------------

SUMMARY = {"passed": False, "suggestions": "Make the Add button update the count.", "grade": 2}


def summary_scenario() -> Scenario:
    return Scenario.model_validate(
        {"name": "gui-summary", "rules": [{"model": "scripted-feedback", "schema": "GuiSummary", "json": SUMMARY}]}
    )


def finished_run(*messages: str) -> GuiRun:
    return GuiRun(stopped_reason="done", messages=list(messages), final_answer=messages[-1] if messages else None)


async def test_yes_in_the_agents_last_message_passes_and_clears_the_suggestions():
    """get_webvoyager_feedback: "YES" anywhere in the agent's last message (case-sensitive) sets
    test_passed and empties the suggestions, whatever the summary says; the grade stays the summary's."""
    with ScriptedServer(summary_scenario()) as server:
        context = scripted_context(server.base_url, profile="upstream")
        said_yes = await upstream_gui_result(
            context,
            "Click Add.",
            finished_run("Action: click Add", 'Memory: the count shows 1.\nAction: {"done": {"text": "YES"}}'),
        )
        assert (said_yes.passed, said_yes.suggestions, said_yes.score) == (True, "", 2)
        # Upstream reads the whole message, the agent's reasoning included, not only its answer text.
        reasoned = finished_run("Evaluation of the previous goal: YES, the count went up.\nAction: done")
        reasoned.final_answer = "The count went up."
        assert (await upstream_gui_result(context, "Click Add.", reasoned)).passed is True
        # The answer in an earlier message, or in lower case, does not count.
        earlier = await upstream_gui_result(context, "Click Add.", finished_run("YES so far", "Action: done, no"))
        lower = await upstream_gui_result(context, "Click Add.", finished_run("Action: done, yes"))
        for result in (earlier, lower):
            assert (result.passed, result.suggestions) == (False, SUMMARY["suggestions"])


# ---- the coder's system prompt: plan first ---------------------------------------------------------


def test_the_upstream_coder_prompt_asks_for_a_short_plan_first_with_two_example_exchanges():
    """src/prompts/system.py: before any code the coder outlines its plan in 2-4 lines (steps,
    components, expected difficulties), shown by two example exchanges (a to-do list kept across
    reloads; failing API calls), placed before the rules for answering with code."""
    system = prompts_for("upstream").coder_system
    plan = system.index("Plan first.")
    code_rules = system.index("How to answer with code")
    assert plan < code_rules
    block = system[plan:code_rules]
    assert "two to four short lines" in block
    for part in ("steps", "components", "difficulties"):
        assert part in block
    assert block.count("and then the rest of the answer") == 2  # the two example exchanges
    assert "localStorage" in block and "to-do list" in block  # the first: a to-do list that survives a reload
    assert "API calls fail" in block and "network requests" in block  # the second: debugging failing calls
    assert "plan" not in prompts_for("default").coder_system.lower()  # the project's own prompt has none


# ---- who writes the GUI test's notes: the feedback model (agent loop), the VLM (rollouts) -----------


async def test_rollouts_have_the_vlm_write_the_gui_instruction_and_summary():
    """WebGen-RL passes its VLM where the agent loop passes the feedback model: the GUI test
    instruction (RL generation.py, generate_gui_agent_instruction with config.vlm_model) and the
    run's summary (RL feedback/execute_for_feedback.py get_feedback_single, model = vlm_model)."""
    from webgen_agent.nodes.gui_testing import write_test_instruction

    rules = [
        {"model": "scripted-vlm", "schema": "GuiSummary", "json": {**SUMMARY, "grade": 3}},
        {"model": "scripted-feedback", "schema": "GuiSummary", "json": SUMMARY},
        {"model": "scripted-vlm", "schema": "TestInstruction", "json": {"instruction": "Written by the VLM."}},
        {"model": "scripted-feedback", "schema": "TestInstruction", "json": {"instruction": "Written by feedback."}},
    ]
    with ScriptedServer(Scenario.model_validate({"name": "gui-notes", "rules": rules})) as server:
        run = finished_run("Action: done, no")
        for environment, grade, written in (
            ("rollout", 3, "Written by the VLM."),
            ("inference", 2, "Written by feedback."),
        ):
            context = scripted_context(server.base_url, profile="upstream", environment=environment)
            assert (await upstream_gui_result(context, "Click Add.", run)).score == grade
            assert (await write_test_instruction(context, "A counter.")).text.startswith(written)
