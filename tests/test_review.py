"""Human review in process: runs stop at the review points, wait, and go on as the reviewer answered.

Real runs (scripted model server over HTTP, real Chromium, real sandboxed shell commands); the
reviewer's answers come through ``resume_run(answer=...)``, which resumes LangGraph with
``Command(resume=...)``. The scripted server's request log shows that no model call repeats when a
node runs again on resume.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest

from webgen_agent.apps.demo import DEMO_REQUIREMENT, scenario_path, scripted_context
from webgen_agent.apps.review import parse_answer, review_points
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.core.views import ReviewDecision, review_decision
from webgen_agent.graph.api import fork_run, resume_run, run_requirement

LANDING_REQUIREMENT = "A coffee-shop landing page with a button that shows the opening hours."


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ({"action": "maybe"}, "action: Input should be 'approve', 'edit' or 'reject'"),
        ({"action": "edit"}, "an edit needs a replacement 'text' or a 'note'"),
        ({"action": "approve", "text": "x"}, "'text' is for edits; approve takes only a 'note'"),
        ({"action": "reject", "comment": "x"}, "comment: Extra inputs are not permitted"),
        (["approve"], "Input should be a valid dictionary"),
        (None, "Input should be a valid dictionary"),
    ],
)
def test_malformed_answers_are_one_line_errors(value: object, why: str) -> None:
    with pytest.raises(ValueError) as caught:
        review_decision(value)
    message = str(caught.value)
    assert why in message and "\n" not in message and message.startswith("invalid review answer")


def test_answer_forms() -> None:
    assert review_decision("approve") == ReviewDecision(action="approve")
    assert parse_answer('{"action": "edit", "text": "npm run build"}').text == "npm run build"
    assert parse_answer("reject too risky") == ReviewDecision(action="reject", note="too risky")
    assert parse_answer("note Use cards.") == ReviewDecision(action="edit", note="Use cards.")
    assert parse_answer("edit line one\\nline two").text == "line one\nline two"
    with pytest.raises(ValueError, match="cannot read the answer 'ok'"):
        parse_answer("ok")
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_answer("{action: approve}")
    assert review_points(["plan,critique", "shell", "plan"]) == ["plan", "critique", "shell"]
    assert review_points(["none"]) == [] and review_points(None) is None
    with pytest.raises(ValueError, match="unknown review point 'deploy'"):
        review_points(["deploy"])


def _coder_prompts(server: ScriptedServer) -> list[str]:
    return [r.last_user_text for r in server.requests if r.model == "scripted-coder"]


@pytest.mark.e2e
async def test_critique_waits_and_a_note_reaches_the_refiner(tmp_path: Path, chromium_path: str, vite_template) -> None:
    db = tmp_path / "db" / "webgen.db"
    async with ScriptedServer(Scenario.load(scenario_path("demo"))) as server:
        context = scripted_context(
            server.base_url, max_steps=2, runs_dir=str(tmp_path / "runs"), review=["critique"], chromium=chromium_path
        )
        waiting = await run_requirement(DEMO_REQUIREMENT, context=context, run_id="c", db_path=db)
        # No reviewer: the run stops before the refiner, and says so in the runs table.
        assert waiting.status == "review" and waiting.review is not None
        assert (waiting.review.point, waiting.review.step) == ("critique", 0)
        assert "Fix the render error first" in waiting.review.text
        assert RunIndex(db).get("c").status == "review"
        assert json.loads((tmp_path / "runs" / "c" / "run.json").read_text())["status"] == "review"
        calls_before = len(server.requests)

        again = await resume_run("c", context=context, db_path=db)  # asked again, nothing re-run
        assert again.status == "review" and again.review == waiting.review
        assert len(server.requests) == calls_before

        done = await resume_run(
            "c",
            context=context,
            db_path=db,
            answer=review_decision({"action": "edit", "note": "Use a green Add button."}),
        )
        prompts = _coder_prompts(server)
        turns = Counter(r.turn for r in server.requests if r.model == "scripted-coder")
        with pytest.raises(ValueError, match="already finished"):
            await resume_run("c", context=context, db_path=db, answer=ReviewDecision(action="approve"))

    assert done.status == "finished" and RunIndex(db).get("c").status == "finished"
    assert turns == {0: 1, 1: 1}, "no coder call repeated on resume"
    # The refiner got the critic's feedback with the note after it.
    assert "Fix the render error first" in prompts[1]
    assert prompts[1].rstrip().endswith("Note from the reviewer: Use a green Add button.")
    events = json.loads((tmp_path / "runs" / "c" / "run.json").read_text())["events"]
    assert events[0] == {"kind": "review", "after_step": 0, "reason": "critique: edit; note: Use a green Add button."}


@pytest.mark.e2e
async def test_reject_critique_withholds_the_feedback(tmp_path: Path, chromium_path: str, vite_template) -> None:
    db = tmp_path / "webgen.db"
    async with ScriptedServer(Scenario.load(scenario_path("demo"))) as server:
        context = scripted_context(
            server.base_url, max_steps=2, runs_dir=str(tmp_path / "runs"), review=["critique"], chromium=chromium_path
        )
        await run_requirement(DEMO_REQUIREMENT, context=context, run_id="j", db_path=db)
        done = await resume_run(
            "j", context=context, db_path=db, answer=ReviewDecision(action="reject", note="Keep the layout.")
        )
        refiner_prompt = _coder_prompts(server)[1]
        # A fork keeps the review points: its first Refiner turn is asked about too (feedback and fork note).
        fork = await fork_run("j", step=0, context=context, db_path=db, note="Make the title bigger.")
        assert fork.status == "review" and fork.review is not None and fork.review.point == "critique"
        assert "Note from the user: Make the title bigger." in fork.review.text
        forked = await resume_run(fork.run_id, context=context, db_path=db, answer=ReviewDecision(action="approve"))
    assert forked.status == "finished"
    assert done.status == "finished"
    assert "Fix the render error" not in refiner_prompt
    assert "set aside the automatic feedback" in refiner_prompt and "Keep the layout." in refiner_prompt


@pytest.mark.e2e
async def test_plan_shell_and_finalize_reviews(tmp_path: Path, chromium_path: str) -> None:
    """One run through every other point, each answered a different way, with a refused answer too."""
    db = tmp_path / "webgen.db"
    runs = tmp_path / "runs"
    async with ScriptedServer(Scenario.load(scenario_path("review"))) as server:
        context = scripted_context(
            server.base_url,
            max_steps=4,
            runs_dir=str(runs),
            review=["plan", "shell", "finalize"],
            chromium=chromium_path,
        )
        result = await run_requirement(LANDING_REQUIREMENT, context=context, run_id="p", db_path=db)
        asked = [result.review]
        answers = [
            ReviewDecision(action="reject", note="Add a build note."),  # plan: asked again from the requirement
            ReviewDecision(action="edit", note="Mention that we are open every day."),  # plan: revise
            ReviewDecision(action="approve"),  # plan
            ReviewDecision(action="edit", text="echo edited > build-note.txt"),  # shell 1 of 2
            ReviewDecision(action="reject", note="No stray files."),  # shell 2 of 2
            ReviewDecision(action="edit", text="7"),  # finalize: no such step, refused and asked again
            ReviewDecision(action="edit", text="0", note="Step 0 has the footer."),  # finalize: another step
        ]
        for answer in answers:
            assert result.status == "review"
            result = await resume_run("p", context=context, db_path=db, answer=answer)
            asked.append(result.review)
        coder = Counter(_coder_prompts(server))
        prompts = _coder_prompts(server)
        feedback_calls = Counter(r.rule_index for r in server.requests if r.model == "scripted-feedback")

    points = [(r.point, r.step, r.command) for r in asked[:-1] if r is not None]
    assert points == [
        ("plan", 0, None),
        ("plan", 0, None),
        ("plan", 0, None),
        ("shell", 0, 1),
        ("shell", 0, 2),
        ("finalize", 1, None),
        ("finalize", 1, None),
    ]
    assert "Add a build note" not in asked[0].text and "echo planned" in asked[1].text
    assert "Open every day" in asked[2].text and asked[2].files == ["index.html"]
    assert asked[3].text == "echo planned > build-note.txt" and asked[4].text == "touch refused.txt"
    assert asked[5].screenshot and await asyncio.to_thread(Path(asked[5].screenshot_path).is_file)
    assert "not one of the code steps (0, 1)" in asked[6].error
    assert result.status == "finished" and result.chosen_step == 0

    # Every model call happened once, though nodes ran again on each resume.
    assert len(prompts) == 4 and all(count == 1 for count in coder.values())
    assert all(count == 1 for count in feedback_calls.values())
    assert "Note from the reviewer: Add a build note." in prompts[1]
    assert prompts[2].startswith("A reviewer read your reply") and "open every day" in prompts[2]
    # The refiner's feedback tells the coder what became of its shell commands.
    assert "Shell action not run (the reviewer refused it): touch refused.txt" in prompts[3]
    assert "Note from the reviewer: No stray files." in prompts[3]
    assert "replaced the shell action `echo planned > build-note.txt` by `echo edited > build-note.txt`" in prompts[3]

    site = Path(result.site_dir)
    assert (site / "build-note.txt").read_text() == "edited\n"
    assert not (site / "refused.txt").exists()
    assert "Open every day" in (site / "index.html").read_text()
    summary = json.loads((runs / "p" / "run.json").read_text())
    reviews = [e["reason"] for e in summary["events"] if e["kind"] == "review"]
    assert reviews == [
        "plan: reject; note: Add a build note.",
        "plan: edit; note: Mention that we are open every day.",
        "plan: approve",
        "shell: edit with a replacement",
        "shell: reject; note: No stray files.",
        "finalize: edit with a replacement; note: Step 0 has the footer.",
    ]
    assert summary["events"][-1]["reason"] == "chosen by the reviewer"


@pytest.mark.e2e
async def test_reject_finalize_ends_without_a_site(tmp_path: Path, chromium_path: str) -> None:
    db = tmp_path / "webgen.db"
    async with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        context = scripted_context(
            server.base_url, max_steps=4, runs_dir=str(tmp_path / "runs"), review=["finalize"], chromium=chromium_path
        )
        waiting = await run_requirement(LANDING_REQUIREMENT, context=context, run_id="f", db_path=db)
        assert waiting.review is not None and waiting.review.point == "finalize"
        done = await resume_run("f", context=context, db_path=db, answer=ReviewDecision(action="reject"))
    assert done.status == "rejected" and done.site_dir is None
    assert not (tmp_path / "runs" / "f" / "site").exists()
    assert RunIndex(db).get("f").status == "rejected"
    with pytest.raises(ValueError, match="already rejected"):
        await resume_run("f", context=context, db_path=db)
