"""The upstream profile reads the judges' JSON answers as WebGen-Agent reads them.

Upstream takes the text from the first ``{`` to the last ``}``, parses it, and reads only the keys it
needs with ``dict.get``: the grade (``get("grade", 0)``; WebGen-RL's rollout environment takes the
first number of a grade written as text, ``extract_number``), and each of the description's three
texts when its key is there, shown as written. An answer with another key, a missing analysis, a
list of suggestions or a grade written "4/5" is therefore not unusable: in a rollout its grade is
the step's reward.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.test_node_judges import captured_state
from webgen_agent.apps.demo import scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.core.views import GuiSummary
from webgen_agent.nodes.gui_testing import upstream_gui_result
from webgen_agent.nodes.screenshot_judge import screenshot_judge
from webgen_agent.tools.gui_agent import GuiRun
from webgen_agent.tools.models import parse_json_answer


def reference_reading(text: str) -> dict[str, Any]:
    """WebGen-RL's `parse_json_output` (feedback/get_screenshot_description_new.py 11-26)."""
    match = re.search(r"\{.*\}", text, flags=re.DOTALL)
    assert match is not None  # no object at all raises upstream: another test's case
    try:
        return json.loads(match.group(0))
    except json.JSONDecodeError:
        return {}


def reference_number(value: object) -> int | float:
    """WebGen-RL's `extract_number` (feedback/execute_for_feedback.py 31-68)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        found = re.search(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?", value)
        if found:
            return int(found.group(0)) if re.fullmatch(r"[-+]?\d+", found.group(0)) else float(found.group(0))
    return 0


def reference_texts(reading: dict[str, Any]) -> dict[str, str]:
    """What WebGen-Agent shows of a description (A `agent/webgen_agent.py` 186-196): each text present and not ''."""
    keys = ("error_message", "screenshot_description", "suggestions")
    return {k: f"{reading[k]}" for k in keys if k in reading and reading[k] is not None and reading[k] != ""}


GRADES = [
    '{"analysis": "Clean layout.", "grade": 4}',
    '{"grade": 3}',  # no analysis
    '{"analysis": "Good.", "grade": 4, "confidence": "high"}',  # a key upstream does not read
    'Analysis: tidy.\n{"analysis": "Tidy.", "grade": "4/5"}',  # the grade as text, after prose
    '{"analysis": "Broken.", "grade": "0"}',
    '{"analysis": "Fine.", "grade": 3.5}',  # a fraction, kept as written (the rollout's reward reads it)
    '{"analysis": "Fine.", "grade": "4.5/5"}',
]
DESCRIPTIONS = [
    '{"is_error": false, "error_message": "", "screenshot_description": "A notes list.", "suggestions": "Add colour."}',
    '{"screenshot_description": "A notes list.", "suggestions": ["Add colour.", "Bigger title."]}',  # a list
    '{"is_error": true, "error_message": "404 Not Found"}',  # the other keys missing
    '{"error_message": "", "screenshot_description": "A notes list.", "suggestions": "", "layout": "grid"}',
    '{"error_message": "", "screenshot_description": " ", "suggestions": "  Add colour. "}',  # shown as written
]


@pytest.mark.parametrize(("grade_text", "description_text"), list(zip(GRADES, DESCRIPTIONS * 2, strict=False)))
async def test_the_upstream_judge_reads_an_answer_as_upstream_reads_it(node_harness, grade_text, description_text):
    rules = [
        {"model": "scripted-vlm", "schema": "ScreenshotDescription", "content": description_text},
        {"model": "scripted-vlm", "schema": "ScreenshotGrade", "content": grade_text},
    ]
    run = await node_harness.run(screenshot_judge, captured_state(node_harness), rules=rules, profile="upstream")
    (patch,) = run.update["steps"]
    assert patch["screenshot_score"] == reference_number(reference_reading(grade_text).get("grade", 0))
    shown = reference_texts(reference_reading(description_text))
    assert patch["description"] == shown.get("screenshot_description", "")
    assert patch["visible_error"] == shown.get("error_message", "")
    assert patch["suggestions"] == ([shown["suggestions"]] if "suggestions" in shown else [])
    assert not patch["judge_error"]


@pytest.mark.parametrize(
    ("text", "passed", "suggestions", "grade"),
    [
        # Upstream's own key names (its summary prompt, read with --prompts-from).
        ('{"test_passed": false, "improvement_suggestions": "Fix Save.", "grade": 2}', False, "Fix Save.", 2),
        ('Mostly works.\n{"test_passed": true, "improvement_suggestions": "", "grade": "5"}', True, "", 5),
        ('{"passed": false, "suggestions": "Fix Save.", "grade": 3, "notes": "x"}', False, "Fix Save.", 3),
        ('{"improvement_suggestions": "Fix Save."}', False, "Fix Save.", 0),  # no grade: 0, as get("grade", 0)
    ],
)
def test_a_gui_summary_is_read_with_upstreams_names_and_grade(text, passed, suggestions, grade):
    summary = parse_json_answer(text, GuiSummary)
    assert (summary.passed, summary.suggestions, summary.grade) == (passed, suggestions, grade)


def reference_gui_summary(summary_text: str, agent_message: str) -> dict[str, Any]:
    """WebGen-Agent's reading of a GUI test's summary, ported: get_webvoyager_feedback (A
    utils/get_webvoyager_feedback.py 16-30, 134-143; no "{...}" raises, and the exception is the GUI
    error) and get_feedback's GUI part (A agent/webgen_agent.py 155-172). This project's prompt names
    the suggestions ``suggestions`` where upstream's names them ``improvement_suggestions``."""
    match = re.search(r"\{.*\}", summary_text, flags=re.DOTALL)
    if match is None:
        return {"error": True, "grade": 0, "errored": True, "shown": None}
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError:
        data = {}
    if "suggestions" in data and "improvement_suggestions" not in data:
        data["improvement_suggestions"] = data.pop("suggestions")
    if "YES" in agent_message:
        data["test_passed"], data["improvement_suggestions"] = True, ""
    grade = reference_number(data.get("grade", 0))
    if "improvement_suggestions" not in data:
        return {"error": False, "grade": grade, "errored": True, "shown": None}
    shown = data["improvement_suggestions"]
    return {"error": False, "grade": grade, "errored": False, "shown": f"{shown}" if len(shown) > 0 else ""}


SUMMARIES = [
    '{"passed": false, "suggestions": "Fix Save.", "grade": 2}',
    '{"test_passed": false, "grade": 3}',  # no suggestions: could not be summarised, the grade kept
    '{"grade": 4, "improvement_suggestions": []}',  # an empty list: nothing to improve
    '{"grade": 2, "improvement_suggestions": ["Fix Save.", "Fix Undo."]}',  # shown as Python shows it
    '{"grade": 3, "suggestions": "  "}',  # spaces are suggestions upstream shows
    '{"grade": 3.5, "suggestions": "Fix Save."}',  # a fraction, kept as written
    'Summary: {"grade": 4, "suggestions": "x",}',  # braces that do not parse: an empty object
    "The agent clicked Save and the list updated. Grade 4.",  # no JSON object at all: an error
]


@pytest.mark.parametrize("agent_message", ["Action: done, the list is empty", "YES - the list updated"])
@pytest.mark.parametrize("summary_text", SUMMARIES)
async def test_a_gui_summary_is_read_once_as_upstream_reads_it(summary_text, agent_message):
    """Asked once, as upstream asks; whatever comes back gives upstream's grade (the rollout's GUI
    reward), its errored mark and the suggestions it shows."""
    scenario = Scenario.model_validate(
        {"name": "summary", "rules": [{"model": "scripted-feedback", "schema": "GuiSummary", "content": summary_text}]}
    )
    run = GuiRun(stopped_reason="done", messages=["Action: click Save", agent_message], final_answer=agent_message)
    with ScriptedServer(scenario) as server:
        result = await upstream_gui_result(scripted_context(server.base_url, profile="upstream"), "Click Save.", run)
        asked = len(server.requests)
    expected = reference_gui_summary(summary_text, agent_message)
    assert asked == 1
    assert result.score == expected["grade"]
    assert bool(result.error) == expected["error"]
    assert (bool(result.error) or result.passed is None) == expected["errored"]
    if expected["shown"] is not None:
        assert result.suggestions == expected["shown"]
