"""The nodes that write the coder's next message, on their own (tests/node_harness.py): Critic,
Code-Critic, Backtrack, and Budget."""

from __future__ import annotations

import json

from webgen_agent.graph.routers import route_after_critic
from webgen_agent.nodes.backtrack import backtrack
from webgen_agent.nodes.budget import budget
from webgen_agent.nodes.code_critic import code_critic
from webgen_agent.nodes.critic import critic

RAN = {
    "ok": True,
    "stage": "ok",
    "error": None,
    "install_ran": False,
    "install_cached": False,
    "server_restarted": False,
    "url": "http://127.0.0.1:1/",
    "install_s": 0.0,
    "start_s": 0.0,
    "fresh_s": 0.0,
}


def judged_state(harness, **fields):
    step = harness.step(
        0,
        execution=RAN,
        screenshot=harness.store.put(b"a PNG"),
        screenshot_score=3,
        description="A plain list.",
        suggestions=["Use a card per note."],
    )
    return harness.state(steps=[step], current=0, edit_step=0, **fields)


async def test_the_template_critic_tells_the_coder_its_results_and_what_to_fix_first(node_harness):
    run = await node_harness.run(critic, judged_state(node_harness))
    text = node_harness.store.get_text(run.update["feedback"])
    assert "graded 3/5" in text and "Use a card per note." in text
    assert "Improve the appearance following the screenshot suggestions." in text
    assert "A page that lists the user's notes" in text  # the requirement, for reference
    (patch,) = run.update["steps"]
    assert patch["feedback"] == run.update["feedback"] and not run.requests
    assert run.message == "Improve the appearance following the screenshot suggestions."


async def test_the_upstream_critic_shows_no_grade(node_harness):
    run = await node_harness.run(critic, judged_state(node_harness), profile="upstream")
    text = node_harness.store.get_text(run.update["feedback"])
    assert "A plain list." in text and "Use a card per note." in text
    assert "3/5" not in text and "graded" not in text


async def test_the_llm_critic_adds_a_repair_plan(node_harness):
    critique = {
        "checks": [{"requirement": "Add a note", "status": "unmet", "evidence": "No button."}],
        "diagnosis": "The button is missing.",
        "plan": ["Add an Add button that appends a note."],
    }
    rules = [{"model": "scripted-feedback", "schema": "Critique", "json": critique}]
    run = await node_harness.run(critic, judged_state(node_harness), rules=rules, critic="llm")
    text = node_harness.store.get_text(run.update["feedback"])
    assert "[unmet] Add a note: No button." in text and "1. Add an Add button that appends a note." in text
    (patch,) = run.update["steps"]
    assert node_harness.store.get_json(patch["critique"]) == critique
    (sent,) = node_harness.store.get_json(patch["critic_prompt"])  # kept as training data
    assert "graded 3/5" in sent["content"]
    assert run.message == "Follow the repair plan."


async def test_the_llm_critic_keeps_its_answer_as_sampled_with_logprobs(node_harness):
    """Over HTTP, the feedback model asked for logprobs: the critique's text as the server wrote it,
    and logprobs that join back to exactly that text (what the critic export carries)."""
    critique = {"checks": [], "diagnosis": "Fine.", "plan": ["Keep it."]}
    rules = [{"model": "scripted-feedback", "schema": "Critique", "json": critique}]
    run = await node_harness.run(critic, judged_state(node_harness), rules=rules, critic="llm", logprobs=("feedback",))
    (patch,) = run.update["steps"]
    text = node_harness.store.get_text(patch["critic_completion"])
    assert text == json.dumps(critique)
    assert "".join(t["token"] for t in node_harness.store.get_json(patch["critic_logprobs"])) == text


async def test_the_code_critic_reads_the_files_not_the_page(node_harness):
    (node_harness.root / "project").mkdir()
    (node_harness.root / "project" / "index.html").write_text("<button id='add'>Add</button>")
    files = node_harness.store.snapshot(node_harness.root / "project")
    requirements = [{"task": "Add a note", "expected_result": "It is listed."}]
    review = {
        "verdicts": [{"id": 0, "status": "partly", "evidence": "A button, no handler."}],
        "diagnosis": "Nothing handles the click.",
        "plan": ["Handle the click."],
    }
    rules = [{"model": "scripted-feedback", "schema": "CodeCritique", "json": review}]
    state = judged_state(node_harness, files=files, requirements=requirements)
    run = await node_harness.run(code_critic, state, rules=rules)
    (request,) = run.requests
    assert "<button id='add'>Add</button>" in request.last_user_text and "=== index.html ===" in request.last_user_text
    assert "A plain list." not in request.last_user_text  # never the page's judgement
    text = node_harness.store.get_text(run.update["feedback"])
    assert "[partly] Add a note: A button, no handler." in text and "1. Handle the click." in text
    (patch,) = run.update["steps"]
    assert patch["critic_model"] == "feedback" and patch["critic_target"] == 0
    shared = await node_harness.run(
        code_critic,
        state,
        rules=[{"model": "scripted-coder", "schema": "CodeCritique", "json": review}],
        shared_policy=True,
    )
    assert shared.update["steps"][0]["critic_model"] == "coder" and shared.message == "critique"


def failed_run(harness, good_score: int):
    """Step 0 sound (or not), steps 1-5 errored; the count reached the limit."""
    store = harness.store
    prompt = store.put_json(
        [{"role": "system", "hash": store.put_text("sys")}, {"role": "user", "hash": store.put_text("req")}]
    )
    good = harness.step(
        0,
        screenshot_score=good_score,
        files=store.put_json({}),
        prompt=prompt,
        feedback=store.put_text("kept feedback"),
    )
    bad = [harness.step(n, errored=True, screenshot_score=1, files=store.put_json({"n": str(n)})) for n in range(1, 6)]
    return harness.state(steps=[good, *bad], current=5, edit_step=5, consecutive_errors=5, files=bad[-1]["files"])


async def test_backtrack_returns_to_the_best_good_step_and_resets_the_count(node_harness):
    state = failed_run(node_harness, good_score=4)
    run = await node_harness.run(backtrack, state)
    good = state["steps"][0]
    assert run.update["files"] == good["files"] and run.update["edit_step"] == 0
    assert run.update["conversation"][-1] == {"role": "assistant", "hash": good["completion"]}
    assert len(run.update["conversation"]) == 3 and run.update["consecutive_errors"] == 0
    note = node_harness.store.get_text(run.update["feedback"])
    assert note.startswith("The last 5 steps all failed, so the project was rolled back to step 0")
    (event,) = run.update["events"]
    assert event == {"kind": "backtrack", "after_step": 5, "target_step": 0, "reason": "5 consecutive errored steps"}
    assert run.message == "back to step 0"


async def test_upstream_backtrack_goes_on_from_the_steps_own_feedback(node_harness):
    state = failed_run(node_harness, good_score=4)
    run = await node_harness.run(backtrack, state, profile="upstream")
    assert node_harness.store.get_text(run.update["feedback"]) == "kept feedback"


async def test_the_critic_records_the_governors_call_and_backtrack_acts_on_its_reason(node_harness):
    """The route's reason travels with it: the critic node asks the loop governor once and carries its
    verdict in the state; the router follows it and the backtrack node records it as it was decided."""
    state = failed_run(node_harness, good_score=4)  # five steps without a better score than step 0
    criticised = await node_harness.run(critic, state, error_limit=10)
    call = criticised.update["governor"]
    assert call == {"action": "backtrack", "reason": "loop governor: no better score in the 5 steps since step 0"}
    assert (
        route_after_critic(criticised.state, node_harness.context("http://127.0.0.1:9/v1", error_limit=10))
        == "backtrack"
    )
    # The backtrack node takes the carried call (here one the governor would not make on this
    # state: it is not asked again), records its reason, and clears it.
    carried = {**state, "governor": {"action": "backtrack", "reason": "loop governor: as the critic decided"}}
    run = await node_harness.run(backtrack, carried, error_limit=10)
    (event,) = run.update["events"]
    assert event["kind"] == "backtrack" and event["reason"] == "loop governor: as the critic decided"
    assert run.update["governor"] is None
    stop = {**state, "governor": {"action": "stop", "reason": "loop governor: stop as decided"}}
    stopped = await node_harness.run(backtrack, stop, error_limit=10)
    assert stopped.update["events"] == [
        {"kind": "stop", "after_step": 5, "target_step": None, "reason": "loop governor: stop as decided"}
    ]
    assert stopped.message == "stopped by the loop governor"


async def test_with_no_good_step_backtrack_restarts_from_the_requirement(node_harness):
    run = await node_harness.run(backtrack, failed_run(node_harness, good_score=2))
    assert run.update["conversation"] == [] and run.update["files"] is None and run.update["edit_step"] is None
    assert run.update["consecutive_errors"] == 0 and run.update["feedback"] is None
    assert run.update["events"][0]["kind"] == "restart" and run.message == "restart from the requirement"


async def test_a_run_from_a_folder_goes_back_to_the_folder_instead_of_starting_over(node_harness):
    """run --from: with no good step, step 0 (the user's folder) is where the run goes back to."""
    state = failed_run(node_harness, good_score=2)
    state["steps"][0]["imported"] = state["steps"][0]["files"]
    run = await node_harness.run(backtrack, state)
    assert run.update["files"] == state["steps"][0]["files"] and run.update["edit_step"] == 0
    assert run.update["conversation"][-1] == {"role": "assistant", "hash": state["steps"][0]["completion"]}
    assert run.update["events"][0]["kind"] == "backtrack" and run.message == "back to step 0"


async def test_the_budget_node_changes_nothing(node_harness):
    """A run resumed past its budget goes on from exactly where it paused (the router decides)."""
    state = failed_run(node_harness, good_score=4)
    assert await budget(state, None) == {}  # type: ignore[arg-type]
