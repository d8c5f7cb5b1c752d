"""The judging nodes on their own (tests/node_harness.py): Screenshot-Judge, GUI-Tester, Checker."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from webgen_agent.checkpoints.requirements import RequirementIndex
from webgen_agent.nodes.checker import checker, instruction_key
from webgen_agent.nodes.gui_tester import gui_tester
from webgen_agent.nodes.screenshot_judge import screenshot_judge


def png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 24), (200, 40, 40)).save(buffer, format="PNG")
    return buffer.getvalue()


def captured_state(harness, **fields):
    """A code edit whose page ran and was captured (no URL: no GUI session is opened ahead)."""
    store = harness.store
    step = harness.step(
        0,
        screenshot=store.put(png()),
        page=store.put_json({"title": "Notes", "visible_text": "My notes", "console_errors": [], "page_errors": []}),
    )
    return harness.state(steps=[step], current=0, edit_step=0, **fields)


def judgement(score: int) -> dict:
    return {
        "model": "scripted-vlm",
        "schema": "ScreenshotJudgement",
        "json": {"description": "A red page.", "score": score, "suggestions": ["Add the notes list."]},
    }


@pytest.mark.parametrize(("score", "errored", "count"), [(4, False, 0), (2, True, 4)])
async def test_the_judge_grades_the_screenshot_and_settles_the_error_count(node_harness, score, errored, count):
    run = await node_harness.run(
        screenshot_judge, captured_state(node_harness, consecutive_errors=3), rules=[judgement(score)]
    )
    (patch,) = run.update["steps"]
    assert patch["screenshot_score"] == score and patch["errored"] is errored
    assert patch["suggestions"] == ["Add the notes list."] and patch["judge_error"] == ""
    assert run.update["consecutive_errors"] == count
    assert run.message == f"screenshot {score}/5"
    (request,) = run.requests
    assert "My notes" in request.last_user_text  # the default judge reads the page's text too


async def test_a_judge_that_never_answers_validly_gives_0_and_says_why(node_harness):
    rules = [{"model": "scripted-vlm", "content": "I like it!"}]
    run = await node_harness.run(screenshot_judge, captured_state(node_harness), rules=rules)
    (patch,) = run.update["steps"]
    assert patch["screenshot_score"] == 0 and patch["errored"] and patch["judge_error"]
    assert run.update["consecutive_errors"] == 1


@pytest.mark.parametrize(("error", "errored", "count"), [("404 Not Found", True, 3), ("", False, 0)])
async def test_the_upstream_judge_reads_a_visible_error_off_the_screenshot(node_harness, error, errored, count):
    reading = {"is_error": bool(error), "error_message": error, "screenshot_description": "A list.", "suggestions": ""}
    rules = [
        {"model": "scripted-vlm", "schema": "ScreenshotDescription", "json": reading},
        {"model": "scripted-vlm", "schema": "ScreenshotGrade", "json": {"analysis": "Fine.", "grade": 4}},
    ]
    state = captured_state(node_harness, consecutive_errors=2)
    run = await node_harness.run(screenshot_judge, state, rules=rules, profile="upstream")
    (patch,) = run.update["steps"]
    assert patch["visible_error"] == error and patch["screenshot_score"] == 4
    assert patch["errored"] is errored  # a visible error errs the step whatever its grade
    assert run.update["consecutive_errors"] == count
    assert len(run.requests) == 2 and all("My notes" not in r.last_user_text for r in run.requests)


def joined_samples(harness, patch) -> dict[str, str]:
    """Each sampled turn's text, checked to be exactly what its token logprobs join to."""
    texts = {}
    for name, turn in patch["sampled"].items():
        text = harness.store.get_text(turn["completion"])
        assert "".join(t["token"] for t in harness.store.get_json(turn["logprobs"])) == text, name
        assert harness.store.get_json(turn["prompt"])[-1]["role"] == "user"
        texts[name] = text
    return texts


async def test_a_judge_asked_for_logprobs_keeps_its_answer_as_sampled(node_harness):
    """Over HTTP: the VLM's settings ask for logprobs, and the judge's turn is kept as sampled (the
    server's JSON text) with the logprobs of exactly that text; not asked, nothing is kept."""
    rule = judgement(4)
    run = await node_harness.run(screenshot_judge, captured_state(node_harness), rules=[rule], logprobs=("vlm",))
    (patch,) = run.update["steps"]
    assert joined_samples(node_harness, patch) == {"screenshot_judge": json.dumps(rule["json"])}
    plain = await node_harness.run(screenshot_judge, captured_state(node_harness), rules=[rule])
    assert "sampled" not in plain.update["steps"][0]


async def test_the_upstream_judge_keeps_both_answers_as_sampled(node_harness):
    reading = {"is_error": False, "error_message": "", "screenshot_description": "A list.", "suggestions": ""}
    grade = {"analysis": "Fine.", "grade": 4}
    rules = [
        {"model": "scripted-vlm", "schema": "ScreenshotDescription", "json": reading},
        {"model": "scripted-vlm", "schema": "ScreenshotGrade", "json": grade},
    ]
    state = captured_state(node_harness)
    run = await node_harness.run(screenshot_judge, state, rules=rules, profile="upstream", logprobs=("vlm",))
    (patch,) = run.update["steps"]
    assert joined_samples(node_harness, patch) == {
        "screenshot_judge/description": json.dumps(reading),
        "screenshot_judge/grade": json.dumps(grade),
    }


def verdict(passed: bool, score: int) -> dict:
    return {
        "model": "scripted-feedback",
        "schema": "GuiVerdict",
        "json": {"passed": passed, "score": score, "suggestions": ["Start the site."]},
    }


async def test_a_gui_test_of_a_site_that_does_not_run_fails_and_credits_the_edit(node_harness):
    """The control step's test: the site has nothing to run, so the agent never starts; the verdict
    goes to the edit under test and shows on the control step."""
    control = node_harness.step(1, action="screenshot_validated", tests_step=0, summary="screenshot_validated")
    state = {**captured_state(node_harness, test_instruction="Add a note."), "current": 1}
    state["steps"] = [*state["steps"], control]
    run = await node_harness.run(gui_tester, state, rules=[verdict(False, 1)])
    found, own = run.update["steps"]
    assert found["index"] == 0 and found["gui_passed"] is False and found["gui_score"] == 1
    assert own["index"] == 1 and own["gui_passed"] is False and own["gui_suggestions"] == ["Start the site."]
    record = node_harness.store.get_json(found["gui_run"])
    assert record["instruction"] == "Add a note." and "the site is not running" in record["errors"][0]
    assert [r.model for r in run.requests] == ["scripted-feedback"]  # the verdict; no agent step was asked
    assert "consecutive_errors" not in run.update  # the default profile's GUI test counts no errors
    assert run.message == "GUI failed 1/5"


async def test_the_upstream_gui_test_that_cannot_run_is_an_errored_step(node_harness):
    control = node_harness.step(1, action="screenshot_validated", tests_step=0, summary="screenshot_validated")
    state = {**captured_state(node_harness, test_instruction="Add a note.", consecutive_errors=2), "current": 1}
    state["steps"] = [*state["steps"], control]
    run = await node_harness.run(gui_tester, state, profile="upstream")
    found, own = run.update["steps"]
    assert own["index"] == 1 and own["errored"] and "the site is not running" in own["gui_error"]
    assert found["index"] == 0 and "errored" not in found  # the edit keeps its own verdict
    assert run.update["consecutive_errors"] == 3


async def test_checks_of_a_page_that_did_not_run_all_fail_without_an_agent(node_harness):
    listed = {"task": "Add a note", "expected_result": "The note is listed."}
    rules = [{"model": "scripted-feedback", "schema": "RequirementList", "json": {"requirements": [listed, listed]}}]
    failed = {"ok": False, "stage": "start", "error": "boom"}
    state = captured_state(node_harness)
    state["steps"][0]["execution"] = failed  # type: ignore[typeddict-item]
    run = await node_harness.run(checker, state, rules=rules)
    (patch,) = run.update["steps"]
    checks = node_harness.store.get_json(patch["checks"])
    assert [c["verdict"] for c in checks] == ["NO", "NO"] and {c["source"] for c in checks} == {"not_run"}
    assert patch["check_score"] == 0.0
    # The list is kept per instruction: every later sample is checked against the same one.
    index = RequirementIndex(node_harness.resources.database)
    assert run.update["requirements"] == [listed, listed]  # the state holds the list itself
    assert node_harness.store.get_json(index.get(instruction_key(state["requirement"])) or "") == [listed, listed]
    again = await node_harness.run(checker, state)  # no model is asked this time
    assert again.update["requirements"] == run.update["requirements"] and not again.requests
    assert run.message == "checks NO NO (score 0.00)"
