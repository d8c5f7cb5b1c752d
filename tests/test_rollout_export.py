"""Group rollouts and training exports, end to end: the rollout CLI as a real process against the
scripted model (scenario ``rollout``: two static sites, ``times`` rules that make trajectories of one
instruction differ, one coder turn failing with HTTP 500 beyond the client's retries), killed mid-way
and run again; then every export format, checked against the request log and recomputed rewards.
"""

from __future__ import annotations

import asyncio
import json
import statistics

import pytest

from tests.helpers import checkpoint_count, group_alive
from tests.postgres import fresh_db
from tests.rollout_story import FAILING, RECORDS, RUN_IDS, RolloutStory, read_jsonl, tell_story
from webgen_agent.checkpoints.export import export_trajectories
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.saver import final_values, open_checkpointer
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.checkpoints.trajectories import BlobTexts, load_trajectories

e2e = pytest.mark.e2e  # the tests that use the rollout story (real Chromium)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def story(request, tmp_path_factory, chromium_path) -> RolloutStory:
    """The whole story once per store: every test reading it runs on SQLite and on PostgreSQL."""
    base = tmp_path_factory.mktemp("rollout")
    return tell_story(base, fresh_db(request, base), chromium_path)


# ---- rollouts ----------------------------------------------------------------------------------


@e2e
def test_rollout_runs_trajectories_in_parallel_on_one_chromium(story):
    assert story.max_running == 2  # --workers 2
    assert story.max_browsers == 1


@e2e
def test_a_failing_trajectory_is_recorded_and_the_others_go_on(story):
    failed = story.before_kill[FAILING]
    assert failed.status == "failed"
    assert "HTTP 500" in failed.error and "GPU fell over" in failed.error
    assert failed.group_id == "habits" and failed.requirement.startswith("Build a habit tracking page")
    assert any(r.status == "finished" for r in story.before_kill.values())
    assert {r.status for r in story.before_kill.values()} <= {"finished", "failed", "interrupted"}
    assert any(r.status == "interrupted" for r in story.before_kill.values())  # kill -9 mid-way


@e2e
def test_rerun_finishes_the_rest_without_redoing_finished_trajectories(story):
    assert story.rerun_code == 0, story.rerun_output
    assert sorted(story.after) == sorted(RUN_IDS)
    assert all(r.status == "finished" for r in story.after.values()), story.rerun_output
    for run_id, (checkpoints, updated_at) in story.finished_before.items():
        assert checkpoint_count(story.db, run_id) == checkpoints, run_id
        assert story.after[run_id].updated_at == updated_at, run_id
    continued = [r for r in story.before_kill.values() if r.status in ("failed", "interrupted")]
    for record in continued:
        if story.checkpoints_before[record.run_id]:  # resumed from its checkpoint, not started over
            assert story.after[record.run_id].created_at == record.created_at
            assert checkpoint_count(story.db, record.run_id) > story.checkpoints_before[record.run_id]
    assert story.checkpoints_before[FAILING] > 0
    assert f"{len(story.finished_before)} finished before" in story.rerun_output
    assert {r.group_id for r in story.after.values()} == {"recipes", "habits"}


@e2e
def test_the_documented_example_gives_training_signal(story):
    """docs/exports.md's offline example, run as written, says every group has signal and its export
    has advantages of both signs (not the silent all-zero data of a judge that never answered)."""
    assert "0 of 2 groups with finished trajectories have zero reward variance" in story.rerun_output
    assert "zero reward variance" not in story.export_output, story.export_output
    advantages = [r["advantage"] for r in read_jsonl(story.exports["step-grpo"])]
    assert min(advantages) < 0 < max(advantages)
    assert sum(a != 0 for a in advantages) > len(advantages) // 2


@e2e
def test_nothing_the_killed_rollout_started_outlives_it(story):
    assert story.killed_groups  # it had servers and a browser running when it was killed
    # Its watchdog kills them once it is gone; the rerun would reap any left over.
    assert not [g for g in story.killed_groups if group_alive(g)]


@e2e
def test_fast_reader_gives_what_aget_state_gives(story):
    async def fast() -> dict[str, dict]:
        async with open_checkpointer(story.db) as saver:
            return await final_values(saver, RUN_IDS)

    values = asyncio.run(fast())
    for run_id in RUN_IDS:
        expected = asyncio.run(final_state(story.db, run_id))
        assert expected["steps"] and expected["status"] == "finished"
        assert {k: values[run_id][k] for k in expected} == expected


# ---- step-grpo -----------------------------------------------------------------------------------


@e2e
def test_step_grpo_rewards_and_advantages_recomputed_independently(story):
    records = read_jsonl(story.exports["step-grpo"])
    assert {(r["trajectory_id"], r["step"]) for r in records} == {
        (run_id, step) for run_id in RUN_IDS for step in range(story.after[run_id].steps)
    }
    by_group: dict[str, list[dict]] = {}
    for record in records:
        by_group.setdefault(record["group_id"], []).append(record)
        assert record["reward"] == (record["screenshot_score"] + record["gui_score"] if record["format_ok"] else -1)
    assert sorted(by_group) == ["habits", "recipes"]
    for group, members in by_group.items():
        rewards = [r["reward"] for r in members]
        mean, std = statistics.mean(rewards), statistics.stdev(rewards)
        assert std > 0, f"trajectories of {group} all scored the same: {rewards}"
        assert len({r["trajectory_id"] for r in members}) == 3
        for r in members:
            assert r["group_mean"] == pytest.approx(mean) and r["group_std"] == pytest.approx(std)
            assert r["group_size"] == len(members) and r["group_trajectories"] == 3
            assert r["advantage"] == pytest.approx((r["reward"] - mean) / (std + 1e-6))
        assert min(r["advantage"] for r in members) < 0 < max(r["advantage"] for r in members)
    recipes = {r["trajectory_id"]: r for r in by_group["recipes"] if r["step"] == 0}
    assert sorted(r["reward"] for r in recipes.values()) == [0, 3, 10]  # blank page, plain page, good page


@e2e
def test_step_grpo_prompt_is_exactly_what_the_coder_was_sent(story):
    sent = [json.dumps(messages, sort_keys=True) for messages in story.coder_requests]
    records = read_jsonl(story.exports["step-grpo"])
    for record in records:
        assert json.dumps(record["prompt"], sort_keys=True) in sent, (record["trajectory_id"], record["step"])
        assert record["prompt"][0]["role"] == "system"
    by_step = {(r["trajectory_id"], r["step"]): r for r in records}
    for (run_id, step), record in by_step.items():
        if step == 0:
            assert record["role"] == "generator" and len(record["prompt"]) == 2
            continue
        earlier = by_step[(run_id, step - 1)]
        assert record["role"] == "refiner"
        assert record["prompt"][: len(earlier["prompt"])] == earlier["prompt"]
        assert record["prompt"][len(earlier["prompt"])] == earlier["completion"][0]
        assert record["prompt"][-1]["role"] == "user"


@e2e
def test_step_grpo_carries_logprobs_token_ids_and_the_model(story):
    for record in read_jsonl(story.exports["step-grpo"]):
        assert record["model"] == "scripted-coder"
        assert record["has_logprobs"] is True
        (completion,) = record["completion"]
        assert completion["role"] == "assistant"
        assert "".join(t["token"] for t in record["logprobs"]) == completion["content"]
        assert all(t["logprob"] == 0.0 for t in record["logprobs"])
        # --token-ids: the server's ids, one per sampled token, aligned with the old logprobs
        assert len(record["completion_token_ids"]) == len(record["logprobs"]) == len(record["completion_logprobs"])
        assert record["completion_logprobs"] == [t["logprob"] for t in record["logprobs"]]
        assert len(record["prompt_token_ids"]) == len("\n".join(m["content"] for m in record["prompt"]).split())


@e2e
def test_chosen_step_is_marked_once_per_trajectory(story):
    records = read_jsonl(story.exports["step-grpo"])
    for run_id in RUN_IDS:
        chosen = [r["step"] for r in records if r["trajectory_id"] == run_id and r["final_site"]]
        assert chosen == [story.after[run_id].chosen_step]


# ---- sft, critic, rewards ----------------------------------------------------------------------


@e2e
def test_sft_conversation_ends_with_the_chosen_completion(story):
    grpo = {(r["trajectory_id"], r["step"]): r for r in read_jsonl(story.exports["step-grpo"])}
    records = read_jsonl(story.exports["sft"])
    assert sorted(r["trajectory_id"] for r in records) == sorted(RUN_IDS)
    for record in records:
        step = grpo[(record["trajectory_id"], record["step"])]
        assert step["final_site"]
        assert record["messages"] == [*step["prompt"], *step["completion"]]
        assert record["reward"] == step["reward"] == 10  # every trajectory ended on the good site


@e2e
def test_sft_min_score_keeps_only_good_trajectories(story, tmp_path):
    out = tmp_path / "sft.jsonl"
    report = asyncio.run(export_trajectories("sft", out, db_path=story.db, min_score=11))
    assert report.records == 0 and out.read_text() == ""
    report = asyncio.run(export_trajectories("sft", out, db_path=story.db, min_score=10, groups=["recipes"]))
    assert report.records == 3 and {r["group_id"] for r in read_jsonl(out)} == {"recipes"}


@e2e
def test_critic_credit_is_the_reward_gain_of_the_refinement(story):
    grpo = {(r["trajectory_id"], r["step"]): r for r in read_jsonl(story.exports["step-grpo"])}
    records = read_jsonl(story.exports["critic"])
    # Every trajectory whose first site was not good got one critique, answered by step 1.
    assert sorted(r["trajectory_id"] for r in records) == sorted(
        run_id for run_id in RUN_IDS if story.after[run_id].steps > 1
    )
    for record in records:
        before, after = (
            grpo[(record["trajectory_id"], record["step"])],
            grpo[(record["trajectory_id"], record["next_step"])],
        )
        assert record["next_step"] == record["step"] + 1
        assert (record["reward_before"], record["reward_after"]) == (before["reward"], after["reward"])
        assert record["credit"] == after["reward"] - before["reward"] > 0
        assert json.loads(record["completion"][0]["content"]) == record["critique"]
        assert record["critique"]["plan"] == ["Write the complete page with the missing parts."]
        assert record["prompt"][0]["role"] == "user" and "Results of the latest step" in record["prompt"][0]["content"]


@e2e
def test_critic_records_carry_the_sampled_text_and_its_logprobs(story):
    """rollout --logprobs --critic llm: the feedback model's critique is exported as sampled (the
    scripted server's JSON text, not re-serialised) with the logprobs of exactly that text."""
    records = read_jsonl(story.exports["critic"])
    assert records
    for record in records:
        (completion,) = record["completion"]
        assert completion["content"] == json.dumps(record["critique"])  # as the server wrote it, not re-serialised
        assert record["has_logprobs"] is True
        assert "".join(t["token"] for t in record["logprobs"]) == completion["content"]
        assert record["completion_logprobs"] == [t["logprob"] for t in record["logprobs"]]


@e2e
def test_every_sampled_turn_of_the_feedback_model_keeps_logprobs_of_its_text(story):
    """Its other turns (the GUI test's instruction and verdict) are kept on the step the same way:
    the messages, the text as sampled and the logprobs of exactly that text."""
    trajectories = asyncio.run(load_trajectories(story.db))
    store = BlobStore(story.db)
    try:
        texts = BlobTexts(store)
        turns = [(name, turn) for t in trajectories for s in t.steps for name, turn in s.get("sampled", {}).items()]
        answers = {"gui_tester/verdict": {"passed", "score", "suggestions"}, "test_instruction": {"instruction"}}
        assert {name for name, _ in turns} == set(answers)
        for name, turn in turns:
            tokens = texts.logprobs(turn["logprobs"])
            assert tokens and "".join(t.token for t in tokens) == texts.text(turn["completion"])
            assert set(json.loads(texts.text(turn["completion"]))) == answers[name]
            assert texts.json(turn["prompt"])[-1]["role"] == "user"
    finally:
        store.close()


@e2e
def test_rewards_lists_match_the_step_records(story):
    grpo = read_jsonl(story.exports["step-grpo"])
    for record in read_jsonl(story.exports["rewards"]):
        steps = sorted((r for r in grpo if r["trajectory_id"] == record["trajectory_id"]), key=lambda r: r["step"])
        assert record["rewards"] == [r["reward"] for r in steps]
        assert record["steps"] == [r["step"] for r in steps]
        assert record["status"] == "finished"


@e2e
def test_every_format_loads_with_datasets(story, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from datasets import load_dataset

    for export_format, path in story.exports.items():
        if path.suffix == ".parquet":  # the verl export
            dataset = load_dataset("parquet", data_files=str(path), split="train", cache_dir=str(tmp_path / "hf"))
            assert len(dataset) == len(RUN_IDS) and dataset[0]["extra_info"]["turns"], export_format
            continue
        dataset = load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "hf"))
        assert len(dataset) == len(read_jsonl(path)), export_format
    grpo = load_dataset(
        "json", data_files=str(story.exports["step-grpo"]), split="train", cache_dir=str(tmp_path / "hf")
    )
    assert grpo.features["prompt"].feature["content"].dtype == "string"
    assert grpo.features["logprobs"].feature["logprob"].dtype == "float64"


@e2e
def test_trajectory_turns_carry_the_credit_of_their_steps(story):
    grpo = {(r["trajectory_id"], r["step"]): r for r in read_jsonl(story.exports["step-grpo"])}
    records = read_jsonl(story.exports["trajectory"])
    assert sorted(r["trajectory_id"] for r in records) == sorted(RUN_IDS)
    for record in records:
        run_id = record["trajectory_id"]
        last = grpo[(run_id, story.after[run_id].steps - 1)]
        assert record["messages"] == [*last["prompt"], *last["completion"]]  # no backtracking in rollouts
        assert [t["step"] for t in record["turns"]] == list(range(story.after[run_id].steps))
        for turn in record["turns"]:
            step = grpo[(run_id, turn["step"])]
            assert record["messages"][turn["message"]] == step["completion"][0] and turn["train"]
            assert (turn["reward"], turn["advantage"]) == (step["reward"], step["advantage"])


@e2e
def test_a_scripted_rollout_trains_end_to_end(story, tmp_path, monkeypatch):
    """The step-grpo export as parquet, TRL's chat-template step on it, and ``webgen-agent train`` on a
    tiny model whose tokenizer is trained on the exported texts; the saved model loads."""
    pytest.importorskip("torch", reason="the [train] extra is not installed")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM
    from trl.data_utils import is_conversational, maybe_apply_chat_template
    from typer.testing import CliRunner

    from tests.tiny_lm import tiny_causal_lm
    from webgen_agent.apps.cli.main import app

    records = read_jsonl(story.exports["step-grpo"])
    model = tiny_causal_lm(tmp_path / "tiny", [m["content"] for r in records for m in [*r["prompt"], *r["completion"]]])
    steps = tmp_path / "steps.parquet"
    runner = CliRunner()
    result = runner.invoke(
        app, ["export", "--format", "step-grpo", "--parquet", "--out", str(steps), "--db", str(story.db)]
    )
    assert result.exit_code == 0, result.output
    rows = load_dataset("parquet", data_files=str(steps), split="train", cache_dir=str(tmp_path / "hf"))
    assert len(rows) == len(records)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    for row in rows.select(range(3)):
        assert is_conversational(row)
        rendered = maybe_apply_chat_template(row, tokenizer)
        assert rendered["completion"] == row["completion"][0]["content"] + "<|im_end|>\n"
    out = tmp_path / "trained"
    result = runner.invoke(
        app,
        ["train", "--data", str(steps), "--model", str(model), "--out", str(out), "--max-steps", "3",
         "--max-length", "512", "--lr", "1e-3"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads((out / "training.json").read_text())["report"]
    # the scripted server's ids are stand-ins that match no tokenizer: the chat template tokenises instead
    assert report["sources"] == {"chat template": len(records)} and report["with_old_logprobs"] == 0
    assert report["steps"] == 3 and report["truncated"] > 0
    assert AutoModelForCausalLM.from_pretrained(out).config.num_hidden_layers == 2


@e2e
def test_verl_rows_are_the_trajectories_with_their_test_cases(story):
    import pyarrow.parquet as pq

    rows = pq.read_table(story.exports["verl"]).to_pylist()
    trajectories = {r["trajectory_id"]: r for r in read_jsonl(story.exports["trajectory"])}
    cases = {
        record["id"]: [{"task": c["task"], "expected_result": c["expected_result"]} for c in record["ui_instruct"]]
        for record in read_jsonl(RECORDS)
    }
    assert sorted(row["extra_info"]["trajectory_id"] for row in rows) == sorted(RUN_IDS)
    for index, row in enumerate(rows):
        info = row["extra_info"]
        trajectory = trajectories[info["trajectory_id"]]
        assert info["index"] == index and info["turns"] == trajectory["turns"]
        assert row["messages"] == trajectory["messages"] and row["prompt"] == trajectory["messages"][:2]
        assert json.loads(row["reward_model"]["ground_truth"]) == cases[info["group_id"]]


@e2e
def test_export_reads_the_groups_asked_for(story):
    trajectories = asyncio.run(load_trajectories(story.db, groups=["habits"]))
    assert sorted(t.trajectory_id for t in trajectories) == [f"records-habits-s{k}" for k in range(3)]
    assert all(t.run.status == "finished" for t in trajectories)
