"""Training records without a rollout: rewards, advantages and group warnings of synthetic
trajectories, JSON lines and ``datasets`` loading; and the rollout's plan and skip rules."""

import json
import statistics

import pytest

from tests.helpers import synthetic
from webgen_agent.apps.cli.base import split_values
from webgen_agent.apps.demo import scripted_context
from webgen_agent.apps.rollout.service import plan_rollout, rollout_context, run_rollout
from webgen_agent.checkpoints.export import sft_records, step_grpo_records
from webgen_agent.checkpoints.flat_groups import lone_groups, mixed_rule_groups
from webgen_agent.checkpoints.runs import RunIndex, RunRecord
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.checkpoints.trajectories import BlobTexts
from webgen_agent.checkpoints.writers import JsonLines, write_records
from webgen_agent.tools.webgen_bench import BenchRecord


def test_rewards_of_malformed_and_control_word_steps(tmp_path):
    store = BlobStore(tmp_path / "blobs.db")
    one = synthetic(
        store,
        "a",
        "g",
        [
            {"screenshot_score": 4, "gui_score": 2},
            {"action": "malformed", "format_ok": False},
            {"action": "screenshot_validated", "tests_step": 0},
        ],
        chosen=0,
    )
    two = synthetic(store, "b", "g", [{"screenshot_score": 5, "gui_score": 5}], chosen=0)
    records = list(step_grpo_records([one, two], BlobTexts(store)))
    assert [(r.trajectory_id, r.step, r.reward, r.scored_step) for r in records] == [
        ("a", 0, 6.0, 0),
        ("a", 1, -1.0, 1),
        ("a", 2, 6.0, 0),
        ("b", 0, 10.0, 0),
    ]
    rewards = [6.0, -1.0, 6.0, 10.0]
    mean, std = statistics.mean(rewards), statistics.stdev(rewards)
    for record, reward in zip(records, rewards):
        assert record.advantage == pytest.approx((reward - mean) / (std + 1e-6))
        assert (record.group_size, record.group_trajectories) == (4, 2)
    assert records[2].screenshot_score == 4 and records[2].gui_score == 2  # credited with step 0's scores
    assert [r.final_site for r in records] == [True, False, False, True]
    assert records[2].prompt[-2] == records[1].completion[0]


def test_a_one_step_group_uses_mean_0_and_std_1(tmp_path):
    store = BlobStore(tmp_path / "blobs.db")
    (record,) = step_grpo_records(
        [synthetic(store, "a", "g", [{"screenshot_score": 3, "gui_score": 4}])], BlobTexts(store)
    )
    assert (record.group_mean, record.group_std) == (0.0, 1.0)
    assert record.advantage == pytest.approx(7 / (1 + 1e-6))


def test_a_one_entry_group_is_warned_about_beside_normalised_ones(tmp_path):
    store = BlobStore(tmp_path / "blobs.db")
    lone = synthetic(store, "a", "alone", [{"screenshot_score": 3, "gui_score": 4}])
    pair = [synthetic(store, run, "pair", [{"screenshot_score": score}]) for run, score in (("b", 2), ("c", 5))]
    (line,) = lone_groups([lone, *pair])
    assert line.startswith("alone: one pool entry") and "raw reward 7 (mean 0, std 1)" in line


def test_a_group_mixing_pool_rules_is_named(tmp_path):
    store = BlobStore(tmp_path / "blobs.db")
    default = synthetic(store, "a", "g", [{"screenshot_score": 3}])
    upstream = synthetic(store, "b", "g", [{"screenshot_score": 4}])
    upstream.values["profile"] = "upstream"
    assert mixed_rule_groups([default]) == []
    assert mixed_rule_groups([default, upstream]) == [
        "g: pools built by different rules, normalised together: 1 trajectories one-per-step, 1 trajectories webgen-rl"
    ]


def test_json_lines_match_pydantic_json(tmp_path):
    store = BlobStore(tmp_path / "blobs.db")
    trajectory = synthetic(store, "a", "g", [{"screenshot_score": 3}, {"screenshot_score": 5}], logprobs=True)
    encoder = JsonLines()
    for record in [*step_grpo_records([trajectory], BlobTexts(store)), *sft_records([trajectory], BlobTexts(store))]:
        assert json.loads(encoder.line(record)) == record.model_dump(mode="json")


def test_a_big_file_whose_first_records_lack_logprobs_still_loads(tmp_path, monkeypatch):
    """datasets infers the schema from the first ~10 MB: the record with logprobs must come first."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from datasets import load_dataset

    store = BlobStore(tmp_path / "blobs.db")
    plain = [synthetic(store, f"p{n}", f"g{n}", [{"size": 8000}]) for n in range(1600)]  # ~13 MB
    with_logprobs = synthetic(store, "last", "g-last", [{"screenshot_score": 5}], logprobs=True)
    out = tmp_path / "mixed.jsonl"
    assert write_records(step_grpo_records([*plain, with_logprobs], BlobTexts(store)), out) == 1601
    assert out.stat().st_size > 11 << 20
    assert json.loads(out.open().readline())["trajectory_id"] == "last"
    dataset = load_dataset("json", data_files=str(out), split="train", cache_dir=str(tmp_path / "hf"))
    assert len(dataset) == 1601 and dataset[0]["logprobs"][0]["logprob"] == -0.5
    assert dataset[1]["logprobs"] == [] and dataset[1]["has_logprobs"] is False


def test_rollout_plan_ids_order_and_upstream_settings():
    records = [BenchRecord(id="000 1", instruction="a"), BenchRecord(id="b/2", instruction="b")]
    specs = plan_rollout(records, samples=2, name="run")
    assert [s.run_id for s in specs] == ["run-000-1-s0", "run-b-2-s0", "run-000-1-s1", "run-b-2-s1"]
    assert [s.group_id for s in specs] == ["000 1", "b/2", "000 1", "b/2"]
    base = scripted_context("http://127.0.0.1:1/v1")
    context = rollout_context(base, logprobs=True)
    assert (context.backtrack, context.select_best, context.max_steps) == (False, False, 5)
    assert (context.coder.temperature, context.coder.top_p, context.coder.logprobs) == (1.0, 0.95, True)
    assert context.vlm == base.vlm and base.coder.temperature is None


async def test_rollout_skips_finished_and_leaves_a_live_run_alone(tmp_path):
    db = tmp_path / "webgen.db"
    runs = RunIndex(db)
    specs = plan_rollout([BenchRecord(id="x", instruction="a page")], samples=2, name="r")
    runs.start(RunRecord(run_id=specs[0].run_id, group_id="x", requirement="a page", out_dir=str(tmp_path)))
    runs.update(specs[0].run_id, status="finished", steps=3)
    runs.start(RunRecord(run_id=specs[1].run_id, group_id="x", requirement="a page", out_dir=str(tmp_path)))  # live
    outcomes = await run_rollout(
        specs, context=scripted_context("http://127.0.0.1:1/v1"), db_path=db, out_dir=tmp_path / "runs"
    )
    assert [(o.status, o.steps) for o in outcomes] == [("skipped", 3), ("busy", 0)]


def test_split_accepts_repeats_and_commas():
    assert split_values(["a,b", " c ", ""]) == ["a", "b", "c"] and split_values(None) == []


def test_grades_written_as_fractions_are_exported_and_rewarded_as_written(tmp_path):
    """WebGen-RL keeps a judge's "3.5" (``extract_number``) and rewards it as written; so does the
    export, in both pools (it used to refuse a grade that is not an integer)."""
    store = BlobStore(tmp_path / "blobs.db")
    steps = [
        {"screenshot_score": 3.5, "gui_score": 4.5},
        {"action": "screenshot_validated", "tests_step": 0, "gui_score": 4.5, "screenshot_score": 3.5},
    ]
    default = synthetic(store, "a", "g", [dict(s) for s in steps], chosen=0)
    upstream = synthetic(store, "b", "h", [dict(s) for s in steps], chosen=0)
    upstream.values["profile"] = "upstream"
    records = list(step_grpo_records([default, upstream], BlobTexts(store)))
    assert [(r.trajectory_id, r.reward, r.screenshot_score, r.gui_score) for r in records] == [
        ("a", 8.0, 3.5, 4.5),
        ("a", 8.0, 3.5, 4.5),
        ("b", 8.0, 3.5, 4.5),
        ("b", 8.0, 3.5, 4.5),
    ]
    lines = tmp_path / "grpo.jsonl"
    assert write_records(records, lines) == 4
    assert [json.loads(line)["screenshot_score"] for line in lines.read_text().splitlines()] == [3.5] * 4
