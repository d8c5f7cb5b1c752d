"""The coder nodes on their own (tests/node_harness.py): Generator and Refiner."""

from __future__ import annotations

import pytest

from tests.node_harness import REQUIREMENT
from webgen_agent.nodes.generator import generator
from webgen_agent.nodes.refiner import refiner

EDIT = (
    '<boltArtifact id="notes" title="Notes">\n'
    '<boltAction type="file" filePath="index.html"><h1>Notes</h1></boltAction>\n'
    '<boltAction type="file" filePath="app.js">console.log("notes")</boltAction>\n'
    "</boltArtifact>"
)
INSTRUCTION = {"model": "scripted-feedback", "schema": "TestInstruction", "json": {"instruction": "Add a note."}}


async def test_generator_records_the_first_step_and_writes_the_test_instruction(node_harness):
    run = await node_harness.run(
        generator, node_harness.state(), rules=[{"model": "scripted-coder", "content": EDIT}, INSTRUCTION]
    )
    (step,) = run.update["steps"]
    assert step["index"] == 0 and step["role"] == "generator" and step["action"] == "edit"
    assert step["parent"] is None and not step["errored"] and step["format_ok"]
    assert step["summary"] == "2 file(s): index.html, app.js"
    assert set(step["tokens"]) == {"generator", "test_instruction"}  # the instruction's cost is the step's
    assert run.update["test_instruction"].startswith("Add a note.")
    assert [m["role"] for m in run.update["conversation"]] == ["system", "user", "assistant"]
    store = node_harness.store
    assert REQUIREMENT in store.get_text(run.update["conversation"][1]["hash"])
    assert store.get_text(step["completion"]) == EDIT
    assert run.update["current"] == 0 and run.update["edit_step"] is None and run.update["profile"] == "default"
    assert run.update["consecutive_errors"] == 0
    assert run.message == "step 0: 2 file(s): index.html, app.js"  # the end event's line
    assert "generator" in run.state["steps"][0]["timings"]


async def test_a_reply_without_code_is_a_malformed_errored_step_that_counts(node_harness):
    state = node_harness.state(consecutive_errors=2, test_instruction="kept")
    run = await node_harness.run(generator, state, rules=[{"model": "scripted-coder", "content": "Sure, I will."}])
    (step,) = run.update["steps"]
    assert step["action"] == "malformed" and step["errored"] and not step["format_ok"]
    assert step["problems"], "the coder is told why the reply was refused"
    assert run.update["consecutive_errors"] == 3
    assert "test_instruction" not in run.update  # a restart keeps the run's instruction
    assert not [r for r in run.requests if r.model == "scripted-feedback"]


@pytest.mark.parametrize(
    ("profile", "reply", "action"),
    [
        ("default", "screenshot_validated", "malformed"),
        ("upstream", '<boltAction type="screenshot_validated"/>', "screenshot_validated"),
    ],
)
async def test_a_test_signal_before_any_website_is_an_errored_step(node_harness, profile, reply, action):
    rules = [{"model": "scripted-coder", "content": reply}, INSTRUCTION]
    run = await node_harness.run(generator, node_harness.state(), rules=rules, profile=profile)
    (step,) = run.update["steps"]
    assert step["action"] == action and step["tests_step"] is None and step["errored"]
    assert run.update["consecutive_errors"] == 1


async def test_refiner_answers_the_feedback_on_the_conversation_so_far(node_harness):
    store = node_harness.store
    messages = [
        {"role": "system", "hash": store.put_text("system")},
        {"role": "user", "hash": store.put_text("first request")},
        {"role": "assistant", "hash": store.put_text(EDIT)},
    ]
    feedback = store.put_text("FEEDBACK: the button does nothing")
    state = node_harness.state(
        steps=[node_harness.step(0)], current=0, edit_step=0, conversation=messages, feedback=feedback
    )
    run = await node_harness.run(refiner, state, rules=[{"model": "scripted-coder", "content": EDIT}])
    (step,) = run.update["steps"]
    assert step["index"] == 1 and step["role"] == "refiner" and step["parent"] == 0
    assert run.requests[0].last_user_text == "FEEDBACK: the button does nothing"
    assert run.update["conversation"][:4] == [*messages, {"role": "user", "hash": feedback}]
    assert run.update["feedback"] is None  # used up
    assert step["prompt_len"] == 4 and run.update["current"] == 1


async def test_refiner_without_feedback_is_a_bug_not_a_step(node_harness):
    state = node_harness.state(steps=[node_harness.step(0)], current=0, conversation=[])
    with pytest.raises(RuntimeError, match="without feedback"):
        await node_harness.run(refiner, state)
