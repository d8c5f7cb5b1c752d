"""Group rollouts and training exports, end to end: the rollout CLI as a real process against the
scripted model (scenario ``rollout``: two static sites, ``times`` rules that make trajectories of one
instruction differ, one coder turn failing with HTTP 500 beyond the client's retries), killed mid-way
and run again; then every export format, checked against the request log and recomputed rewards.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.helpers import checkpoint_count, group_alive, owned_groups, synthetic
from tests.postgres import fresh_db
from webgen_agent.apps.cli.base import split_values
from webgen_agent.apps.demo import scenario_path, scripted_context
from webgen_agent.apps.rollout.service import plan_rollout, rollout_context, run_rollout
from webgen_agent.apps.scripted import server as scripted_server
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.export import export_trajectories, sft_records, step_grpo_records
from webgen_agent.checkpoints.flat_groups import lone_groups, mixed_rule_groups
from webgen_agent.checkpoints.formats import FORMATS
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.runs import RunIndex, RunRecord
from webgen_agent.checkpoints.saver import final_values, open_checkpointer
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.checkpoints.trajectories import BlobTexts, load_trajectories
from webgen_agent.checkpoints.writers import JsonLines, write_records
from webgen_agent.nodes.resources import Resources
from webgen_agent.tools.webgen_bench import BenchRecord

e2e = pytest.mark.e2e  # the tests that use the rollout story (real Chromium)

RECORDS = Path(scenario_path("rollout")).parent / "rollout" / "records.jsonl"
# docs/exports.md's offline example names no --name: run ids are <data file's name>-<record id>-s<k>.
RUN_IDS = [f"records-{group}-s{k}" for k in range(3) for group in ("recipes", "habits")]
FAILING = "records-habits-s0"  # its Refiner turn meets the scripted HTTP 500s (see the scenario)
CLI = str(Path(sys.executable).parent / "webgen-agent")
ROOT = Path(__file__).resolve().parents[1]  # the documented commands name files relative to it
EXPORTS_DOC = ROOT / "docs" / "exports.md"
DOC_DIR, DOC_PORT = "/tmp/", "8011"  # what the documented commands use, replaced by the test's own


def documented_example() -> list[list[str]]:
    """The commands of docs/exports.md's offline example, each as its argv (comments, line
    continuations and a trailing ``&`` removed): what the story below runs, so the doc cannot drift."""
    text = EXPORTS_DOC.read_text()
    section = text[text.index("## Offline example") :]
    block = section[section.index("```bash") + len("```bash") : section.index("```", section.index("```bash") + 7)]
    commands: list[list[str]] = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words and words[-1] == "&":
            words.pop()
        if words:
            commands.append(words)
    return commands


def as_run_here(words: list[str], base: Path, db: str, base_url: str) -> list[str]:
    """A documented command with only its places swapped for the test's: the CLI of this checkout,
    the test's folder for /tmp, its database and the scripted server's address."""
    assert words[0] == "webgen-agent", words
    swapped = [CLI]
    for word in words[1:]:
        if word == f"{DOC_DIR}rollout.db":
            word = db
        elif word == f"http://127.0.0.1:{DOC_PORT}/v1":
            word = base_url
        elif word.startswith(DOC_DIR):
            word = str(base / word[len(DOC_DIR) :])
        swapped.append(word)
    return swapped


@dataclass
class RolloutStory:
    """What the tests look at: the database, the request log and what was seen during the run."""

    base: Path
    db: str
    coder_requests: list[list[dict[str, Any]]]
    max_running: int = 0
    max_browsers: int = 0
    killed_groups: list[int] = field(default_factory=list)  # process groups the killed rollout left
    before_kill: dict[str, RunRecord] = field(default_factory=dict)
    finished_before: dict[str, tuple[int, float]] = field(default_factory=dict)  # run -> (checkpoints, updated)
    checkpoints_before: dict[str, int] = field(default_factory=dict)
    after: dict[str, RunRecord] = field(default_factory=dict)
    rerun_output: str = ""
    rerun_code: int = 0
    export_output: str = ""
    exports: dict[str, Path] = field(default_factory=dict)


def shared_browsers(pid: int) -> int:
    """Chromium browsers (not their helpers) under the rollout process, told apart by profile.

    A helper Chromium is forking carries the browser's command line until it execs, so counting
    processes would now and then see two; distinct ``--user-data-dir`` values are distinct browsers.
    """
    profiles: set[str] = set()
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return 0
    for child in children:
        try:
            argv = child.cmdline()
        except psutil.Error:
            continue
        if any(a == "--remote-debugging-pipe" for a in argv) and not any(a.startswith("--type=") for a in argv):
            profiles.update(a for a in argv if a.startswith("--user-data-dir="))
    return len(profiles)


def run_until_mid_way(story: RolloutStory, command: list[str], env: dict[str, str]) -> None:
    """Run the rollout until one trajectory failed, one finished and others run; then kill -9 it."""
    log = (story.base / "first-run.log").open("w")
    proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 240
    try:
        while True:
            assert proc.poll() is None, (story.base / "first-run.log").read_text()
            assert time.monotonic() < deadline, "the rollout never reached the kill point"
            records = RunIndex(story.db).list() if Database.of(story.db).exists() else []
            statuses = [r.status for r in records]
            story.max_running = max(story.max_running, statuses.count("running"))
            story.max_browsers = max(story.max_browsers, shared_browsers(proc.pid))
            if "failed" in statuses and "finished" in statuses and "running" in statuses:
                break
            time.sleep(0.1)
    finally:
        # What the rollout had running when it was killed (its servers and browser).
        story.killed_groups = [g for g in owned_groups(story.db, proc.pid) if group_alive(g)]
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def story(request, tmp_path_factory, chromium_path) -> RolloutStory:
    """The whole story once per store: every test reading it runs on SQLite and on PostgreSQL."""
    base = tmp_path_factory.mktemp("rollout")
    coder_requests: list[list[dict[str, Any]]] = []
    lock = threading.Lock()
    original = scripted_server.request_facts

    def recording(body: dict[str, Any]):  # the server's request log holds no messages: keep them here
        if body.get("model") == "scripted-coder":
            with lock:
                coder_requests.append(body["messages"])
        return original(body)

    patch = pytest.MonkeyPatch()
    patch.setattr(scripted_server, "request_facts", recording)
    story = RolloutStory(base=base, db=fresh_db(request, base), coder_requests=coder_requests)
    env = {**os.environ, "WEBGEN_CHROMIUM": chromium_path, "COLUMNS": "200"}
    server_words, rollout_words, export_words = documented_example()
    assert server_words == [
        "webgen-agent", "scripted-server", "--scenario", "apps/scripted/scenarios/rollout.json", "--port", DOC_PORT
    ]  # fmt: skip
    try:
        # The documented server, in this process so that its requests can be recorded.
        with ScriptedServer(Scenario.load(scenario_path("rollout"))) as server:
            command = as_run_here(rollout_words, base, story.db, server.base_url)
            # The first run gives up on the coder's scripted HTTP 500s at once (no patience) and is
            # killed mid-way; the documented command, run as written, continues and finishes it.
            run_until_mid_way(story, [*command, "--patience", "0"], env)
            story.before_kill = {r.run_id: r for r in RunIndex(story.db).list()}
            story.checkpoints_before = {run_id: checkpoint_count(story.db, run_id) for run_id in story.before_kill}
            story.finished_before = {
                r.run_id: (checkpoint_count(story.db, r.run_id), r.updated_at)
                for r in story.before_kill.values()
                if r.status == "finished"
            }
            rerun = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
            story.rerun_output, story.rerun_code = rerun.stdout + rerun.stderr, rerun.returncode
        story.after = {r.run_id: r for r in RunIndex(story.db).list()}
        for export_format in FORMATS:  # every registered format (step-grpo: through the CLI, below)
            if export_format == "step-grpo":
                continue
            parquet = export_format == "verl"
            out = base / f"{export_format}.{'parquet' if parquet else 'jsonl'}"
            asyncio.run(export_trajectories(export_format, out, db_path=story.db, parquet=parquet))
            story.exports[export_format] = out
        exported = subprocess.run(  # the documented export, through the CLI
            as_run_here(export_words, base, story.db, base_url=""),
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
        story.export_output = exported.stdout + exported.stderr
        assert exported.returncode == 0, story.export_output
        story.exports["step-grpo"] = base / "steps.jsonl"
    finally:
        patch.undo()
        Resources.reap_orphans(story.db)  # whatever a failed rerun left behind
    return story


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


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


# ---- without a rollout: synthetic trajectories -------------------------------------------------


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
