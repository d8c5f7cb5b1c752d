"""Fidelity to WebGen-Agent's rules, without a run: how a reply is read (actions, format, repetition),
the benchmark's verdict and appearance grade, a GUI harness error, and the feedback's parts, each
against a port of upstream's code written here from its sources."""

from __future__ import annotations

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
from webgen_agent.core.profiles import environment_rules
from webgen_agent.core.state import Step
from webgen_agent.nodes.feedback import upstream_feedback
from webgen_agent.nodes.gui_testing import upstream_gui_result
from webgen_agent.nodes.prompts import UPSTREAM_FEEDBACK
from webgen_agent.tools.bolt import has_repetition, parse_reply
from webgen_agent.tools.gui_agent import GuiRun

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
