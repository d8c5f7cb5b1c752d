"""Upstream-profile rules pinned one by one, each against a port of WebGen-Agent's code or content
(src/agent/webgen_agent.py, src/utils/get_webvoyager_feedback.py, src/prompts/system.py at ba86ef1).

Also how a reply is read (actions, format, repetition), the benchmark's verdict and appearance
grade, a GUI harness error, and the feedback's parts. Each test here fails when its rule is reverted
(docs/fidelity.md cites them as R).
"""

from __future__ import annotations

import random
import re
from typing import Any, cast

import pytest

from tests.upstream_replies import (
    COUNTER,
    FINISH,
    RAISES,
    RAMBLING,
    REPETITIVE,
    REQUIREMENT,
    VALIDATED,
    page,
)
from webgen_agent.apps.bench.evaluate import appearance_messages, parse_answer, webgen_bench_verdict
from webgen_agent.apps.bench.prompts import appearance_grade
from webgen_agent.apps.demo import scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.core.profiles import environment_rules
from webgen_agent.core.state import Step
from webgen_agent.nodes.feedback import upstream_feedback
from webgen_agent.nodes.gui_testing import upstream_gui_result
from webgen_agent.nodes.profile import prompts_for
from webgen_agent.nodes.prompts import UPSTREAM_FEEDBACK
from webgen_agent.nodes.selection import best_good_step, best_step
from webgen_agent.tools.bolt import has_repetition, parse_reply
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


def validated(index: int, tested: Step, gui: int, errored: bool) -> Step:
    """A screenshot_validated step: its GUI test's grade, its edit's screenshot grade and files."""
    return Step(  # type: ignore[typeddict-item]
        index=index,
        action="screenshot_validated",
        tests_step=tested["index"],
        screenshot_score=tested["screenshot_score"],
        gui_score=gui,
        errored=errored,
    )


def test_best_step_ranks_the_gui_grade_before_the_screenshot_grade():
    """A step with the better GUI grade wins over one with the better screenshot grade, as
    choose_best_node's key (webvoyager_grade, screenshot_grade, index) ranks them."""
    steps = [edit(0, 5, 2, False), edit(1, 3, 4, False), edit(2, 4, 4, False), edit(3, 5, 1, False)]
    chosen = best_step(steps, "code-edits")  # the default profile credits a test's grade to its edit
    assert chosen is not None and chosen["index"] == 2  # GUI 4 beats GUI 2 with screenshot 5; then screenshot 4 > 3
    target = best_good_step(steps, "code-edits")
    assert target is not None and target["index"] == 2
    every = [edit(0, 5, 0, False), edit(1, 3, 0, False), validated(2, edit(1, 3, 0, False), 4, False)]
    assert (best_step(every, "every-step") or {})["index"] == 2  # GUI 4 beats screenshot 5 upstream too


def test_best_step_equals_upstreams_choice_on_random_histories():
    """Histories of edits and GUI tests. Upstream records an edit with GUI grade 0 (A 240, 256-261);
    this project's edit record carries its latest test's grade (for people and exports), which an
    errored test step must not lend to the edit in the ranking."""
    rng = random.Random(31)
    for _ in range(500):
        steps: list[Step] = []
        webvoyager: dict[int, int] = {}
        last_edit: Step | None = None
        for i in range(rng.randint(1, 8)):
            if last_edit is None or rng.random() < 0.5:
                last_edit = edit(i, rng.randint(0, 5), 0, rng.random() < 0.4)
                steps.append(last_edit)
                webvoyager[i] = 0
            else:
                gui = rng.randint(0, 5)
                steps.append(validated(i, last_edit, gui, rng.random() < 0.4))
                last_edit["gui_score"] = gui  # the GUI-Tester writes the grade on the edit's record too
                webvoyager[i] = gui
        nodes = {
            f"step{s['index']}": {
                "screenshot_grade": s["screenshot_score"],
                "webvoyager_grade": webvoyager[s["index"]],
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


# ---- the reply rules and the benchmark's verdict rule ------------------------------------------


@pytest.mark.parametrize(
    ("reply", "kind", "format_ok"),
    [
        (VALIDATED, "screenshot_validated", True),
        ("<boltAction type='screenshot_validated'/>", "screenshot_validated", True),
        (FINISH, "finish", True),
        ('<boltAction type="finish"></boltAction>', "finish", True),
        (FINISH + RAMBLING, "finish", False),  # over 400 characters
        (page("Done") + "\n" + FINISH, "finish", False),  # holds a boltArtifact
        (f"{VALIDATED} and {FINISH}", "finish", True),  # finish is checked first
        ("finish", "edit", True),  # upstream knows only the tag: a bare word is a reply with no action
        ("Nothing to change.", "edit", True),
        ("", "edit", True),
        (page("Quotes", REPETITIVE), "edit", False),  # repetitive
    ],
)
def test_upstream_reply_rules(reply, kind, format_ok):
    parsed = parse_reply(reply, "webgen-agent")
    assert (parsed.kind, parsed.format_ok) == (kind, format_ok)


@pytest.mark.parametrize("reply", [VALIDATED, "<boltAction type='finish'/>", "finish", "screenshot_validated"])
def test_default_profile_accepts_tags_and_words(reply):
    parsed = parse_reply(reply)
    assert parsed.kind in ("screenshot_validated", "finish") and parsed.format_ok


def test_repetition_rule_is_upstreams():
    assert has_repetition(REPETITIVE)  # numbers differ, so the canonical text repeats
    assert not has_repetition(page("Counter", COUNTER, RAISES))
    assert not has_repetition("ab" * 49)  # under 100 characters never counts


@pytest.mark.parametrize(
    ("answer", "webgen_bench", "strict"),
    [
        ("YES - the booking was confirmed.", "YES", "YES"),
        ("NO. The message 'YES, booked' never appeared", "YES", "NO"),
        ("Answer: PARTIAL", "PARTIAL", None),
        ("PARTIAL - only the list shows.", "PARTIAL", "PARTIAL"),
        ("The expected result was not achieved.", "NO", None),
        ("yes, it worked", "NO", "YES"),  # WebGen-Bench's rule is case-sensitive
        (None, "NO", None),
    ],
)
def test_bench_verdict_rules(answer, webgen_bench, strict):
    assert webgen_bench_verdict(answer) == webgen_bench
    assert parse_answer(answer) == strict


# ---- the benchmark's appearance grade and the GUI test's harness error --------------------------


def upstream_first_grade_int(text: str) -> int:
    """WebGen-Bench src/grade_appearance_bolt_diy/compute_grade.py first_grade_int (lines 52-72), ported."""
    match = re.search(r"Grade.*?(\d)", text, flags=re.IGNORECASE | re.DOTALL)
    return int(match.group(1)) if match else 0


@pytest.mark.parametrize(
    "answer",
    [
        "Analysis: clean and modern.\n\nGrade: 4",
        "Analysis: broken layout.\n\n**Grade:** 2/5",
        "The page is good. grade 5",
        "Analysis: mostly fine, 3 sections render.\nGRADE:\n3",
        "Analysis: no grade given.",
        "Grading this page: it deserves a 4",  # "Grading" does not hold "Grade": 0, as upstream reads it
    ],
)
def test_appearance_grade_is_read_as_webgen_bench_reads_it(answer):
    assert appearance_grade(answer) == upstream_first_grade_int(answer)


def test_appearance_request_is_webgen_benchs_free_text_form():
    messages = appearance_messages("Build a bakery site with a cream background.", b"\x89PNG")
    assert messages[0]["content"] == "You are a helpful assistant."  # WebGen-Bench's vlm_eval.py system prompt
    text = messages[1]["content"][0]["text"]
    assert "cream background" in text and text.rstrip().endswith("Grade: <1-5>")


async def test_a_gui_harness_error_grades_0_and_calls_no_model():
    """WebGen-Agent: an exception while the GUI agent runs is a webvoyager_error, grade 0, an errored
    step (src/agent/webgen_agent.py get_feedback lines 156-160; utils/execute_for_feedback.py 279-280)."""
    context = scripted_context("http://127.0.0.1:9/v1", profile="upstream")  # nothing listens there
    run = GuiRun(stopped_reason="error", errors=["Chromium did not start"])
    result = await upstream_gui_result(context, "Click Add.", run)
    assert (result.score, result.passed, result.error) == (0, None, "Chromium did not start")


# ---- the feedback's format: upstream's get_feedback, ported with this project's sentences ---------


def upstream_get_feedback(
    say: dict[str, str],
    instruction: str,
    run: dict[str, Any],
    description: dict[str, str] | None = None,
    is_webvoyager: bool = False,
) -> str:
    """WebGen-Agent src/agent/webgen_agent.py get_feedback (lines 128-214), ported: which parts, in which
    order, joined how; each fixed sentence taken from ``say`` (upstream's are paraphrased there)."""
    output: list[str] = []
    suffix: list[str] = []
    stages: list[str] = []
    if run["install_error"]:
        stages.append("dependency installation")
        output.append(
            say["install_failed"] + "\n\n" + "\n\n".join(f"> {cmd}\n{o}" for cmd, o in run["install_results"])
        )
        suffix.append(say["command_failed"].format(command=run["install_error"][0]))
    else:
        output.append(say["install_ok"])
    if run["start_error"]:
        stages.append("service starting")
        output.append(f"{say['start_failed']}\n\n{run['start_results']}")
        suffix.append(say["service_failed"])
    else:
        output.append(say["start_ok"])
    if is_webvoyager:
        if run["webvoyager_error"]:
            output.append(f"{say['gui_error']}\n\n{run['webvoyager_error']}")
            stages.append("GUI agent navigation")
        elif "improvement_suggestions" in run["webvoyager_feedback"]:
            suggestions = run["webvoyager_feedback"]["improvement_suggestions"]
            output.append(f"{say['gui_suggestions']}\n\n{suggestions}" if suggestions else say["gui_ok"])
        else:
            output.append(say["no_gui_summary"])
            stages.append("GUI agent trajectory collection")
    elif run["screenshot_error"]:
        output.append(f"{say['no_screenshot']}\n\n{run['screenshot_error']}")
        stages.append("screenshot collection")
    elif description is not None:
        described = False
        for key, heading in (("error_message", "visible_error"), ("screenshot_description", "description")):
            if description.get(key):
                output.append(f"{say[heading]}\n\n{description[key]}")
                described = True
                if key == "error_message":
                    stages.append("screenshot")
        if description.get("suggestions"):
            output.append(f"{say['suggestions']}\n\n{description['suggestions']}")
            described = True
        if not described:
            output.append(say["no_description"])
            stages.append("screenshot description")
    if stages:
        suffix.append(say["fix"].format(stages=", ".join(stages)))
    else:
        suffix.append(say["ask_finish"] if is_webvoyager else say["ask_validated"])
    return (
        "\n\n".join(output)
        + "\n\n"
        + "\n".join(suffix)
        + f"\n\n{say['instruction']}\n\n{instruction}\n\n"
        + say["reminder"]
    )


def run_result(**changes: Any) -> dict[str, Any]:
    """What upstream's execute_for_feedback returns for a step that went well, with ``changes``."""
    return {
        "install_results": [("npm install", "added 3 packages")],
        "install_error": [],
        "start_results": "VITE ready",
        "start_error": False,
        "screenshot_error": "",
        "webvoyager_error": "",
        "webvoyager_feedback": {},
        **changes,
    }


def edit_step(**changes: Any) -> Step:
    step = {
        "index": 0,
        "action": "edit",
        "tests_step": None,
        "execution": {"install_error": False, "start_error": False, "error": None},
        "screenshot": "shot",
        "visible_error": "",
        "description": "",
        "suggestions": [],
        **changes,
    }
    return cast(Step, step)


def gui_step(**changes: Any) -> Step:
    return cast(Step, {"index": 1, "action": "screenshot_validated", "tests_step": 0, "gui_error": "", **changes})


FEEDBACK_CASES = {
    "described": (
        edit_step(description="A cream page.", suggestions=["Widen the menu."]),
        None,
        {},
        dict(
            run=run_result(), description={"screenshot_description": "A cream page.", "suggestions": "Widen the menu."}
        ),
    ),
    "visible error, install failed": (
        edit_step(execution={"install_error": True, "start_error": False, "error": None}, visible_error="404"),
        None,
        {"install": "npm ERR! code ETARGET"},
        dict(
            run=run_result(install_error=["npm install"], install_results=[("npm install", "npm ERR! code ETARGET")]),
            description={"error_message": "404"},
        ),
    ),
    "nothing described": (edit_step(), None, {}, dict(run=run_result(), description={})),
    "GUI suggestions": (
        gui_step(gui_passed=False, gui_suggestions=["Make Add count."]),
        edit_step(),
        {},
        dict(run=run_result(webvoyager_feedback={"improvement_suggestions": "Make Add count."}), is_webvoyager=True),
    ),
    "GUI passed": (
        gui_step(gui_passed=True, gui_suggestions=[]),
        edit_step(),
        {},
        dict(run=run_result(webvoyager_feedback={"improvement_suggestions": ""}), is_webvoyager=True),
    ),
    "GUI error, start failed": (
        gui_step(gui_passed=None, gui_error="Chromium did not start"),
        edit_step(execution={"install_error": False, "start_error": True, "error": None}),
        {"server": "Error: port busy"},
        dict(
            run=run_result(
                start_error=True, start_results="Error: port busy", webvoyager_error="Error: Chromium did not start"
            ),
            is_webvoyager=True,
        ),
    ),
}


@pytest.mark.parametrize("case", list(FEEDBACK_CASES))
def test_feedback_has_upstreams_parts_order_and_joins(case):
    step, tested, logs, upstream = FEEDBACK_CASES[case]
    say = UPSTREAM_FEEDBACK
    agent_loop = environment_rules("upstream", "inference")  # the inference loop's feedback (A get_feedback)
    assert upstream_feedback(REQUIREMENT, step, tested, logs, agent_loop) == upstream_get_feedback(
        say, REQUIREMENT, **upstream
    )


def test_feedback_asks_for_upstreams_exact_signal_tags():
    # Upstream fixes the tags the coder must send (get_feedback lines 206 and 208).
    assert '<boltAction type="screenshot_validated"/>' in UPSTREAM_FEEDBACK["ask_validated"]
    assert '<boltAction type="finish"/>' in UPSTREAM_FEEDBACK["ask_finish"]
