"""Fidelity to WebGen-Agent: the upstream profile replays upstream-style transcripts step for step.

Three trajectories answer like a model trained on upstream's data (a site, then
``<boltAction type="screenshot_validated"/>``, then ``<boltAction type="finish"/>``), also with a
reply that holds no action, an over-long control reply and a repetitive edit. They run end to end
(scripted models over HTTP, real package.json + Vite sites, real Chromium, real browser-use GUI agent) and the
tests check each step's action, where the GUI test ran, what the coder was told, the screenshots'
size, and the exported reward pools and advantages against a reference computation of upstream's
rule written here, from its description, independently of the project's code.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import struct
from pathlib import Path
from typing import Any, cast

import pytest
from typer.testing import CliRunner

from tests.upstream_replies import (
    CLICKER,
    COUNTER,
    FINISH,
    QUOTES,
    RAISES,
    RAMBLING,
    REPETITIVE,
    REQUIREMENT,
    VALIDATED,
    page,
)
from webgen_agent.apps.cli.main import app
from webgen_agent.apps.demo import scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.export import export_trajectories, load_trajectories
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.rewards import advantages, upstream_pool
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.state import Step
from webgen_agent.graph.api import run_requirement


def coder(turn: int, reply: str, *contains: str, times: int | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"model": "scripted-coder", "turn": turn, "contains": list(contains), "content": reply}
    if times is not None:
        rule["times"] = times
    return rule


def grade(value: int) -> dict[str, Any]:
    # Upstream grades the screenshot alone: a request that carried the requirement would match no rule.
    return {
        "model": "scripted-vlm",
        "schema": "ScreenshotGrade",
        "not_contains": ["counter page", "famous quotes", "clicker page"],
        "times": 1,
        "json": {"analysis": f"Graded {value}.", "grade": value},
    }


RULES: list[dict[str, Any]] = [
    # Trajectory A: edit (grade 2), edit (grade 4), validated (GUI 3), finish.
    coder(0, page("Counter (draft one)"), REQUIREMENT, times=1),
    # Trajectory B: edit (3), a reply with no action (runs again: 3), edit (5), an over-long
    # validated reply (GUI 2), finish with single quotes.
    coder(0, page("Counter (draft two)"), REQUIREMENT, times=1),
    coder(1, page("Counter", COUNTER, RAISES), "draft one"),
    coder(2, VALIDATED, "draft one"),
    coder(3, FINISH, "draft one"),
    coder(1, "Let me run the project once more before changing anything.", "draft two"),
    coder(2, page("Counter", COUNTER), "draft two"),
    coder(3, VALIDATED + "\n\n" + RAMBLING, "draft two"),
    coder(4, "<boltAction type='finish'/>", "draft two"),
    # Trajectory C (another group): a repetitive edit, then finish.
    coder(0, page("Quotes", REPETITIVE), QUOTES),
    coder(1, FINISH, QUOTES),
    # Trajectory D (through the CLI): a site, then validated, then finish: three steps.
    coder(0, page("Clicker", COUNTER, RAISES), CLICKER),
    coder(1, VALIDATED, CLICKER),
    coder(2, FINISH, CLICKER),
    # The VLM: the grades in the order the edits are captured (A, B, C, D run one after the other).
    grade(2),
    grade(4),
    grade(3),
    grade(3),
    grade(5),
    grade(3),
    grade(4),
    {
        "model": "scripted-vlm",
        "schema": "ScreenshotDescription",
        "not_contains": ["counter page", "famous quotes", "clicker page"],
        "json": {
            "is_error": False,
            "error_message": "",
            "screenshot_description": "A white page with a heading, a count and an Add button.",
            "suggestions": "Give the button more contrast.",
        },
    },
    # The GUI agent (browser-use), from what the page shows.
    {
        "model": "scripted-vlm",
        "contains": ["You reached max_steps"],
        "agent": {"actions": [{"done": {"text": "NO - out of steps.", "success": False}}]},
    },
    {
        "model": "scripted-vlm",
        "page_contains": ["Count: 1"],
        "agent": {"actions": [{"done": {"text": "YES - the count shows 1 after Add.", "success": True}}]},
    },
    {
        "model": "scripted-vlm",
        "turn": 0,
        "page_contains": ["Add"],
        "agent": {"actions": [{"click": {"target": "Add"}}]},
    },
    {
        "model": "scripted-vlm",
        "agent": {"actions": [{"done": {"text": "NO - the count stayed at 0.", "success": False}}]},
    },
    # The feedback model: the GUI test instruction, then a summary of each GUI run.
    {
        "model": "scripted-feedback",
        "schema": "TestInstruction",
        "json": {"instruction": "Click Add and check that the count shows 1."},
    },
    {
        "model": "scripted-feedback",
        "schema": "GuiSummary",
        # The summary reads the agent's own messages (its answer is its last), a marker for each page.
        "contains": ["[webpage screenshot]", "YES - the count shows 1 after Add."],
        "json": {"passed": True, "suggestions": "", "grade": 3},
    },
    {
        "model": "scripted-feedback",
        "schema": "GuiSummary",
        "contains": ["[webpage screenshot]", "NO - the count stayed at 0."],
        "json": {"passed": False, "suggestions": "Give the Add button a click handler.", "grade": 2},
    },
]


@pytest.fixture(scope="module")
async def upstream_runs(tmp_path_factory, chromium_path, vite_template):
    # vite_template: its one npm install fills the shared dependency cache these sites install from.
    base = tmp_path_factory.mktemp("fidelity")
    db = base / "webgen.db"
    scenario = Scenario.model_validate({"name": "upstream-fidelity", "rules": RULES})
    with ScriptedServer(scenario) as server:
        results = {}
        for run_id, requirement, group, steps in (
            ("a", REQUIREMENT, "counter", 5),
            ("b", REQUIREMENT, "counter", 5),
            ("c", QUOTES, "quotes", 2),
        ):
            context = scripted_context(server.base_url, profile="upstream", max_steps=steps, chromium=chromium_path)
            results[run_id] = await run_requirement(
                requirement, context=context, run_id=run_id, group_id=group, out_dir=base / run_id, db_path=db
            )
        # The same kind of model through the command line: `run --profile upstream`.
        os.environ.setdefault("WEBGEN_CHROMIUM", chromium_path)
        cli = await asyncio.to_thread(
            CliRunner().invoke,
            app,
            ["run", CLICKER, "--profile", "upstream", "--run-id", "d", "--out", str(base / "d"), "--db", str(db)]
            + ["--base-url", server.base_url, "--max-steps", "5", "--coder-model", "scripted-coder"]
            + ["--vlm-model", "scripted-vlm", "--feedback-model", "scripted-feedback"],
            catch_exceptions=False,
        )
        assert cli.exit_code == 0, cli.output
        results["d"] = cli
        requests = list(server.requests)
    states = {run_id: await final_state(db, run_id) for run_id in results}
    exports = {}
    for name in ("step-grpo", "rewards"):
        await export_trajectories(name, base / f"{name}.jsonl", db_path=db)  # type: ignore[arg-type]
        exports[name] = [json.loads(line) for line in (base / f"{name}.jsonl").read_text().splitlines()]
    return {
        "results": results,
        "states": states,
        "store": BlobStore(db),
        "db": db,
        "requests": requests,
        "exports": exports,
    }


def prompt_of(store: BlobStore, step: dict) -> list[str]:
    return [store.get_text(ref["hash"]) for ref in store.get_json(step["prompt"])]


def feedback_before(store: BlobStore, state: dict, index: int) -> str:
    """The last user message the coder was sent at step ``index``: the feedback on the step before."""
    return prompt_of(store, state["steps"][index])[-1]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


# ---- the transcripts, step by step -------------------------------------------------------------


@pytest.mark.e2e
async def test_an_upstream_trained_reply_sequence_is_three_steps(upstream_runs):
    """`run --profile upstream`: site, then validated, then finish -> edit / GUI test / finish."""
    state, store = upstream_runs["states"]["d"], upstream_runs["store"]
    steps = state["steps"]
    assert [s["action"] for s in steps] == ["edit", "screenshot_validated", "finish"]
    assert all(s["format_ok"] and s["action"] != "malformed" for s in steps)
    assert [bool(s.get("gui_run")) for s in steps] == [True, True, False]  # run on step 1, credited to step 0
    assert steps[1]["gui_score"] == 3 and png_size(store.get(steps[0]["screenshot"])) == (1024, 768)
    assert state["profile"] == "upstream" and state["status"] == "finished"


@pytest.mark.e2e
async def test_tag_replies_run_as_edit_validated_finish(upstream_runs):
    state, store = upstream_runs["states"]["a"], upstream_runs["store"]
    steps = state["steps"]
    assert [s["action"] for s in steps] == ["edit", "edit", "screenshot_validated", "finish"]
    assert all(s["format_ok"] for s in steps) and state["status"] == "finished"
    # The GUI test ran on the validated step only (credited to the edit it tested), never after a grade.
    assert [bool(s.get("gui_run")) for s in steps] == [False, True, True, False]
    assert steps[2]["tests_step"] == 1 and steps[2]["gui_score"] == 3 and steps[2]["gui_passed"] is True
    # Every capture at 1024x768, every capture graded (grade 2 included), with upstream's 0-5 grades.
    for step, expected in zip(steps[:2], (2, 4), strict=True):
        assert png_size(store.get(step["screenshot"])) == (1024, 768)
        assert step["screenshot_score"] == expected
    assert steps[0]["errored"] and not steps[1]["errored"]  # a grade of 2 or less is an errored step
    # Upstream ranks every step: the finish step (GUI 3, screenshot 4, latest) stands for step 1's files.
    assert state["chosen_step"] == 3
    assert (Path(state["site_dir"]) / "index.html").read_text().count("Count: ") >= 1


@pytest.mark.e2e
async def test_no_action_over_long_and_single_quoted_replies(upstream_runs):
    state = upstream_runs["states"]["b"]
    steps = state["steps"]
    assert [s["action"] for s in steps] == ["edit", "edit", "edit", "screenshot_validated", "finish"]
    # A reply with no action is a good-format edit: nothing written, the code simply ran again (the
    # lockfile npm wrote at step 0 is all that changed).
    assert steps[1]["format_ok"] and set(steps[1]["changed"]) <= {"package-lock.json"}
    assert steps[1]["screenshot_score"] == 3
    # An over-long validated reply still runs the GUI test, but is badly formatted.
    assert not steps[3]["format_ok"] and steps[3]["gui_run"] and steps[3]["gui_score"] == 2
    assert steps[4]["format_ok"]  # <boltAction type='finish'/> with single quotes
    assert [bool(s.get("gui_run")) for s in steps] == [False, False, True, True, False]
    assert state["chosen_step"] is not None


@pytest.mark.e2e
async def test_the_coder_is_told_what_upstream_tells_it_and_no_grade(upstream_runs):
    state, store = upstream_runs["states"]["a"], upstream_runs["store"]
    system, first = prompt_of(store, state["steps"][0])
    assert 'username "admin"' in system and '"admin123456"' in system
    assert first == REQUIREMENT  # the instruction itself is the first user turn
    after_edit = feedback_before(store, state, 1)
    order = [
        "The dependencies installed without errors.",
        "The service started without errors.",
        "A white page with a heading, a count and an Add button.",
        "Give the button more contrast.",
        VALIDATED,
        REQUIREMENT,
        "FULL, updated content",
    ]
    positions = [after_edit.find(text) for text in order]
    assert -1 not in positions and positions == sorted(positions), positions
    after_gui = feedback_before(store, state, 3)
    assert "The GUI-agent test succeeded" in after_gui and FINISH in after_gui and VALIDATED not in after_gui
    b_state = upstream_runs["states"]["b"]
    assert "Give the Add button a click handler." in feedback_before(store, b_state, 4)
    for text in (after_edit, after_gui):
        assert "/5" not in text and "grade" not in text.lower()
    # The GUI agent logged in (had it needed to) with the login the coder was told to predefine.
    gui = store.get_json(state["steps"][2]["gui_run"])
    assert '"admin123456"' in gui["instruction"] and "Click Add" in gui["instruction"]


@pytest.mark.e2e
async def test_the_judge_and_gui_agent_ran_where_upstream_runs_them(upstream_runs):
    requests = upstream_runs["requests"]
    assert all(r.status == 200 for r in requests), [r for r in requests if r.status != 200]
    grades = [
        r for r in requests if r.rule_index is not None and RULES[r.rule_index].get("schema") == "ScreenshotGrade"
    ]
    assert len(grades) == 7  # one per edit turn (the no-action reply included), none on a control turn
    summaries = [r for r in requests if r.rule_index is not None and RULES[r.rule_index].get("schema") == "GuiSummary"]
    assert len(summaries) == 3  # one per screenshot_validated reply


@pytest.mark.e2e
async def test_repetitive_edit_runs_but_scores_minus_one(upstream_runs):
    state = upstream_runs["states"]["c"]
    edit = state["steps"][0]
    assert edit["action"] == "edit" and not edit["format_ok"] and edit["screenshot_score"] == 3
    (record,) = [r for r in upstream_runs["exports"]["rewards"] if r["trajectory_id"] == "c"]
    assert record["pool_rewards"] == [-1.0] and record["pool_steps"] == [[0, 1]]


# ---- reward pools: upstream's code, ported here ---------------------------------------------------
# A port of WebGen-RL's own code (not the project's): the score list its rollout builds
# (verl/workers/agentic/webgen_agent/generation.py, execute_predictions lines 432-446, and the
# "position" update of run_llm_loop lines 341-344), the reward its reward manager gives each entry
# (verl/workers/reward_manager/webgen.py lines 25-30) and the step-level GRPO advantage
# (verl/trainer/ppo/core_algos.py compute_step_level_grpo_advantage, lines 152-206).

Turn = tuple[str, int, int, bool]  # (kind: edit / validated / finish, screenshot grade, GUI grade, good format)


def upstream_scores(turns: list[Turn]) -> list[dict[str, Any]]:
    """generation.py's ``scores[i]`` for one trajectory; ``position`` is the last turn an entry covers."""
    scores: list[dict[str, Any]] = []
    for turn, (kind, shot, gui, good) in enumerate(turns):
        if kind == "validated":  # result["is_webvoyager"]
            scores[-1]["webvoyager_score"] = gui
            if not good:
                scores.append({**scores[-1], "is_good_format": False})
        elif kind == "edit":  # not is_finished: an edit turn's GUI grade is 0
            scores.append({"webvoyager_score": 0, "screenshot_score": shot, "position": -1, "is_good_format": good})
        elif not good:  # a finish turn
            scores.append({**scores[-1], "is_good_format": False})
        if scores:  # run_llm_loop: the last entry's segment now ends after this turn
            scores[-1]["position"] = turn
    for score in scores:  # reward_manager/webgen.py
        score["reward"] = (
            -1 if not score.get("is_good_format", True) else score["screenshot_score"] + score["webvoyager_score"]
        )
    return scores


def upstream_pool_turns(scores: list[dict[str, Any]], turns: int) -> list[list[int]]:
    """The turns whose tokens each entry's advantage multiplies (core_algos: from the previous entry's
    position, or the start, to its own)."""
    covered, pre = [], 0
    for score in scores:
        covered.append(list(range(pre, score["position"] + 1)))
        pre = score["position"] + 1
    assert pre == turns
    return covered


def upstream_advantages(group: list[list[dict[str, Any]]]) -> list[float]:
    """compute_step_level_grpo_advantage over one prompt's trajectories, entry by entry."""
    rewards = [score["reward"] for trajectory in group for score in trajectory]
    if len(rewards) == 1:
        mean, std = 0.0, 1.0
    else:
        mean, std = statistics.mean(rewards), statistics.stdev(rewards)  # torch.std is the sample std
    return [(reward - mean) / (std + 1e-6) for reward in rewards]


def project_steps(turns: list[Turn]) -> list[Step]:
    """The same turns as the project's step records (what ``upstream_pool`` reads)."""
    action = {"edit": "edit", "validated": "screenshot_validated", "finish": "finish"}
    return [
        cast(Step, {"index": n, "action": action[kind], "screenshot_score": shot, "gui_score": gui, "format_ok": good})
        for n, (kind, shot, gui, good) in enumerate(turns)
    ]


TRAJECTORY_A: list[Turn] = [
    ("edit", 2, 0, True),
    ("edit", 4, 0, True),
    ("validated", 4, 3, True),
    ("finish", 4, 3, True),
]
TRAJECTORY_B: list[Turn] = [
    ("edit", 3, 0, True),
    ("edit", 3, 0, True),
    ("edit", 5, 0, True),
    ("validated", 5, 2, False),
    ("finish", 5, 2, True),
]


def random_trajectory(rng: random.Random) -> list[Turn]:
    """Starts with an edit (upstream's trainer fails on a control turn before any entry)."""
    turns: list[Turn] = []
    for n in range(rng.randint(1, 8)):
        kind = "edit" if n == 0 else rng.choice(["edit", "edit", "validated", "finish"])
        turns.append((kind, rng.randint(0, 5), rng.randint(0, 5) if kind == "validated" else 0, rng.random() > 0.2))
    return turns


def test_project_pools_and_advantages_equal_upstreams_code_on_random_groups():
    rng = random.Random(7)
    for _ in range(300):
        group = [random_trajectory(rng) for _ in range(rng.randint(1, 5))]
        ported = [upstream_scores(turns) for turns in group]
        pools = [upstream_pool(project_steps(turns)) for turns in group]
        assert [[e.reward for e in pool] for pool in pools] == [[s["reward"] for s in t] for t in ported]
        assert [[e.steps for e in pool] for pool in pools] == [
            upstream_pool_turns(t, len(turns)) for t, turns in zip(ported, group, strict=True)
        ]
        project = advantages([e.reward for pool in pools for e in pool])
        assert project == pytest.approx(upstream_advantages(ported))


def test_the_two_trajectory_example_pools_as_upstreams_code_does():
    """The example of docs/exports.md (this project's, run through both): A and B in one group."""
    ported = [upstream_scores(TRAJECTORY_A), upstream_scores(TRAJECTORY_B)]
    pools = [upstream_pool(project_steps(TRAJECTORY_A)), upstream_pool(project_steps(TRAJECTORY_B))]
    assert [e.reward for pool in pools for e in pool] == [s["reward"] for t in ported for s in t] == [2, 7, 3, 3, 7, -1]
    # B's finish turn joins the badly formatted copy its validated turn added.
    assert pools[1][-1].steps == upstream_pool_turns(ported[1], 5)[-1] == [3, 4]
    assert advantages([e.reward for pool in pools for e in pool]) == pytest.approx(upstream_advantages(ported))


@pytest.mark.e2e
async def test_exported_pools_and_advantages_equal_the_reference(upstream_runs):
    records = [r for r in upstream_runs["exports"]["step-grpo"] if r["group_id"] == "counter"]
    ported = {"a": upstream_scores(TRAJECTORY_A), "b": upstream_scores(TRAJECTORY_B)}
    pools = {
        run: [(s["reward"], covered) for s, covered in zip(t, upstream_pool_turns(t, len(turns)), strict=True)]
        for run, t, turns in (("a", ported["a"], TRAJECTORY_A), ("b", ported["b"], TRAJECTORY_B))
    }
    advantage = dict(
        zip(
            [(run, n) for run in ("a", "b") for n in range(len(pools[run]))],
            upstream_advantages([ported["a"], ported["b"]]),
            strict=True,
        )
    )
    assert len(records) == 9  # every coder turn, each under the entry that covers its tokens
    for record in records:
        run = record["trajectory_id"]
        n = next(n for n, (_, turns) in enumerate(pools[run]) if record["step"] in turns)
        assert record["pool_entry"] == n and record["profile"] == "upstream"
        assert record["reward"] == pools[run][n][0]
        assert record["advantage"] == pytest.approx(advantage[(run, n)])
        assert (record["group_size"], record["group_trajectories"]) == (6, 2)
    by_run = {r["trajectory_id"]: r for r in upstream_runs["exports"]["rewards"]}
    assert by_run["a"]["pool_rewards"] == [2.0, 7.0] and by_run["b"]["pool_rewards"] == [3.0, 3.0, 7.0, -1.0]
    assert by_run["a"]["pool_steps"] == [[0], [1, 2, 3]] and by_run["b"]["pool_steps"] == [[0], [1], [2], [3, 4]]
    # One entry per code-edit turn, plus the copy the over-long control reply added.
    assert len({(r["trajectory_id"], r["pool_entry"]) for r in records}) == 6


@pytest.mark.e2e
async def test_loaded_trajectories_know_their_profile(upstream_runs):
    trajectories = await load_trajectories(upstream_runs["db"])
    assert {t.trajectory_id: t.profile for t in trajectories} == dict.fromkeys("abcd", "upstream")
    # Recorded with the run, so that `resume` and `fork` go on under the same rules and window.
    recorded = RunIndex(upstream_runs["db"]).settings("d")
    assert (recorded["profile"], recorded["viewport_width"], recorded["viewport_height"]) == ("upstream", 1024, 768)
