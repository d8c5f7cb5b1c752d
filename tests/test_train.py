"""The reference Step-GRPO trainer learns from exported advantages (CPU, nothing downloaded).

A rollout database is written the way runs store it (checkpointer + blob store + runs table), with
two instructions x four trajectories x two coder steps: a step that writes the site scores 9, a
refusal is malformed (-1), so after group normalisation the sites get positive advantages and the
refusals negative ones. The real exporter writes the step-grpo file; a tiny random Llama with a
tokenizer trained on the exported texts is trained on it through ``webgen-agent train``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="the [train] extra (torch, transformers, peft) is not installed")

import torch
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl.data_utils import is_conversational, maybe_apply_chat_template
from typer.testing import CliRunner

from tests.helpers import save_finished_run
from tests.tiny_lm import tiny_causal_lm
from webgen_agent.apps.cli.main import app
from webgen_agent.apps.train.chat import split_rendering
from webgen_agent.apps.train.data import TrainRecord, read_records
from webgen_agent.apps.train.encode import encode
from webgen_agent.apps.train.loss import completion_logprobs
from webgen_agent.checkpoints.export import export_trajectories
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.checkpoints.saver import open_checkpointer
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.checkpoints.views import ChatMessage, WebloopRecord

SYSTEM = "You build websites. Answer with whole files in a boltArtifact."
GROUPS = {"recipes": "Build a recipe list site.", "habits": "Build a habit tracker site."}
SAMPLES = 4
REFUSAL = "Sorry, I cannot build that."
FEEDBACK = "The page renders. Improve it."


def site(group: str) -> str:
    return (
        f'<boltArtifact id="{group}"><boltAction type="file" filePath="index.html">'
        f"<h1>{group}</h1><ul id=items></ul></boltAction></boltArtifact>"
    )


def is_site(sample: int, step: int) -> bool:
    return (sample + step) % 2 == 0


TEXTS = [SYSTEM, REFUSAL, FEEDBACK, *GROUPS.values(), *(site(g) for g in GROUPS)]


def sampled(tokenizer: Any, model: Any, prompt: list[dict[str, str]], content: str) -> dict[str, Any]:
    """What a vLLM endpoint serving ``model`` returns for ``return_token_ids`` and ``logprobs``."""
    prompt_text, _ = split_rendering(tokenizer, prompt, [{"role": "assistant", "content": content}])
    prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    ids = [*tokenizer(content, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]
    sequence = torch.tensor([prompt_ids + ids])
    with torch.no_grad():
        logprobs = completion_logprobs(model(input_ids=sequence).logits, sequence)[0, len(prompt_ids) - 1 :]
    entries = [{"token": tokenizer.decode([i]), "logprob": float(lp)} for i, lp in zip(ids, logprobs)]
    return {"token_ids": {"prompt": prompt_ids, "completion": ids}, "logprobs": entries}


async def write_rollout(db: Path, policy: tuple[Any, Any] | None = None) -> None:
    """The database a rollout of GROUPS x SAMPLES two-step trajectories leaves; with ``policy``
    (tokenizer, model) the steps also carry the ids and logprobs a vLLM endpoint would return."""
    store, runs = BlobStore(db), RunIndex(db)
    async with open_checkpointer(db, record_runs=False) as saver:
        for group, requirement in GROUPS.items():
            for sample in range(SAMPLES):
                run_id = f"{group}-s{sample}"
                refs = [
                    {"role": "system", "hash": store.put_text(SYSTEM)},
                    {"role": "user", "hash": store.put_text(requirement)},
                ]
                messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": requirement}]
                steps = []
                for index in range(2):
                    good = is_site(sample, index)
                    content = site(group) if good else REFUSAL
                    step = {
                        "index": index,
                        "role": "generator" if index == 0 else "refiner",
                        "action": "edit" if good else "malformed",
                        "parent": None if index == 0 else index - 1,
                        "tests_step": None,
                        "prompt_len": len(refs),
                        "prompt": store.put_json(refs),
                        "completion": store.put_text(content),
                        "summary": "wrote index.html" if good else "malformed",
                        "format_ok": good,
                        "problems": [],
                        "screenshot_score": 5 if good else 0,
                        "gui_score": 4 if good else 0,
                        "gui_passed": good,
                        "errored": not good,
                        "timings": {},
                        "tokens": {},
                        "model": "tiny",
                    }
                    if policy is not None:
                        extra = sampled(*policy, messages, content)
                        step["token_ids"] = store.put_json(extra["token_ids"])
                        step["logprobs"] = store.put_json(extra["logprobs"])
                    steps.append(step)
                    refs = [
                        *refs,
                        {"role": "assistant", "hash": step["completion"]},
                        {"role": "user", "hash": store.put_text(FEEDBACK)},
                    ]
                    messages = [
                        *messages,
                        {"role": "assistant", "content": content},
                        {"role": "user", "content": FEEDBACK},
                    ]
                values = {
                    "run_id": run_id,
                    "group_id": group,
                    "requirement": requirement,
                    "steps": steps,
                    "status": "finished",
                }
                await save_finished_run(saver, runs, values)
    store.close()


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("train")


@pytest.fixture(scope="module")
def model_dir(base: Path) -> Path:
    return tiny_causal_lm(base / "tiny", TEXTS * 10)


@pytest.fixture(scope="module")
def steps_file(base: Path) -> Path:
    """A step-grpo export of a rollout whose endpoint returned no token ids or logprobs."""
    db = base / "plain.db"
    asyncio.run(write_rollout(db))
    out = base / "steps.jsonl"
    asyncio.run(export_trajectories("step-grpo", out, db_path=db))
    return out


@pytest.fixture(scope="module")
def sampled_steps_file(base: Path, model_dir: Path) -> Path:
    """A step-grpo export of a rollout sampled from the tiny model itself, ids and logprobs included."""
    policy = AutoTokenizer.from_pretrained(model_dir), AutoModelForCausalLM.from_pretrained(model_dir).eval()
    db = base / "sampled.db"
    asyncio.run(write_rollout(db, policy))
    out = base / "sampled.jsonl"
    asyncio.run(export_trajectories("step-grpo", out, db_path=db))
    return out


def completion_means(model_path: Path, data: Path) -> list[tuple[TrainRecord, float]]:
    """Each record of ``data`` with its mean completion-token logprob under the saved model."""
    model = AutoModelForCausalLM.from_pretrained(model_path).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    means = []
    for record in read_records(data):
        example = encode(record, tokenizer, 1024)
        assert example is not None
        sequence = torch.tensor([example.input_ids])
        with torch.no_grad():
            logprobs = completion_logprobs(model(input_ids=sequence).logits, sequence)[0, example.start - 1 :]
        means.append((record, float(logprobs.mean())))
    return means


def average(values: list[float]) -> float:
    return sum(values) / len(values)


def mean_logprobs(model_path: Path, data: Path) -> tuple[float, float]:
    """Mean completion-token logprob of the positive-advantage records and of the negative ones."""
    means = completion_means(model_path, data)
    return average([m for r, m in means if r.advantage > 0]), average([m for r, m in means if r.advantage <= 0])


def run_cli(*args: str) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


def test_export_records_are_conformant_and_trl_accepts_them(base: Path, steps_file: Path, model_dir: Path) -> None:
    rows = load_dataset("json", data_files=str(steps_file), split="train")
    assert len(rows) == len(GROUPS) * SAMPLES * 2
    first = rows[0]
    assert first["completion"] == [{"role": "assistant", "content": first["completion"][0]["content"]}]
    assert first["prompt_token_ids"] is None and first["completion_token_ids"] is None
    assert first["completion_logprobs"] is None
    assert {r["advantage"] > 0 for r in rows} == {True, False}
    assert all((r["advantage"] > 0) == (r["completion"][0]["content"] != REFUSAL) for r in rows)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    text_file = base / "steps-text.jsonl"
    db = base / "plain.db"
    result = run_cli(
        "export", "--format", "step-grpo", "--text", "--chat-template", model_dir, "--out", text_file, "--db", db
    )
    assert result.exit_code == 0, result.output
    texts = [json.loads(line) for line in text_file.read_text().splitlines()]
    for row, text in zip(rows, texts, strict=True):
        assert is_conversational(row)
        rendered = maybe_apply_chat_template(row, tokenizer)  # TRL's own chat-template step, unchanged rows
        assert rendered["prompt"] == text["prompt"] and rendered["completion"] == text["completion"]
        assert text["prompt"].endswith("<|im_start|>assistant\n") and text["completion"].endswith("<|im_end|>\n")
        assert not is_conversational(text)


def test_trajectory_and_parquet_exports_load_with_datasets(base: Path, steps_file: Path) -> None:
    db = base / "plain.db"
    for export_format in ("trajectory", "step-grpo"):
        result = run_cli(
            "export", "--format", export_format, "--parquet", "--out", base / f"{export_format}.parquet", "--db", db
        )
        assert result.exit_code == 0, result.output
    trajectories = load_dataset("parquet", data_files=str(base / "trajectory.parquet"), split="train")
    steps = load_dataset("parquet", data_files=str(base / "step-grpo.parquet"), split="train")
    assert len(trajectories) == len(GROUPS) * SAMPLES and len(steps) == len(GROUPS) * SAMPLES * 2
    advantage = {(s["trajectory_id"], s["step"]): s["advantage"] for s in steps}
    for trajectory in trajectories:
        roles = [m["role"] for m in trajectory["messages"]]
        assert roles == ["system", "user", "assistant", "user", "assistant"]
        assert [t["message"] for t in trajectory["turns"]] == [2, 4]
        assert [t["step"] for t in trajectory["turns"]] == [0, 1] and all(t["train"] for t in trajectory["turns"])
        for turn in trajectory["turns"]:
            assert turn["advantage"] == advantage[(trajectory["trajectory_id"], turn["step"])]
            assert (turn["reward"] == 9.0) == (trajectory["messages"][turn["message"]]["content"] != REFUSAL)
    jsonl = [json.loads(line) for line in steps_file.read_text().splitlines()]
    assert sorted(jsonl, key=lambda r: (r["trajectory_id"], r["step"])) == sorted(
        steps.to_list(), key=lambda r: (r["trajectory_id"], r["step"])
    )


@pytest.mark.e2e
def test_advantage_weighted_training_learns_and_saves_a_loadable_model(
    base: Path, steps_file: Path, model_dir: Path
) -> None:
    before = mean_logprobs(model_dir, steps_file)
    out = base / "trained"
    result = run_cli(
        "train", "--data", steps_file, "--model", model_dir, "--out", out,
        "--epochs", "8", "--batch-size", "4", "--grad-accum", "2", "--lr", "3e-3", "--max-length", "512",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    after = mean_logprobs(out, steps_file)  # reloads the saved model and tokenizer
    assert after[0] > before[0] + 0.5, (before, after)  # positive completions became likelier
    assert after[1] < before[1] - 0.5, (before, after)  # negative ones less likely
    report = json.loads((out / "training.json").read_text())["report"]
    assert report["sources"] == {"chat template": 16} and report["with_old_logprobs"] == 0
    assert report["steps"] == 16 and all(step["mean_ratio"] == pytest.approx(1.0) for step in report["history"])


@pytest.mark.e2e
def test_clipped_ratio_against_exported_ids_and_logprobs(base: Path, sampled_steps_file: Path, model_dir: Path) -> None:
    rows = [json.loads(line) for line in sampled_steps_file.read_text().splitlines()]
    assert all(len(r["completion_token_ids"]) == len(r["completion_logprobs"]) for r in rows)
    before = mean_logprobs(model_dir, sampled_steps_file)
    out = base / "trained-lora"
    result = run_cli(
        "train", "--data", sampled_steps_file, "--model", model_dir, "--out", out, "--lora", "--lora-r", "8",
        "--epochs", "10", "--batch-size", "8", "--lr", "1e-2", "--clip-eps", "0.2", "--kl-coef", "0.01",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads((out / "training.json").read_text())["report"]
    assert report["sources"] == {"exported ids": 16} and report["with_old_logprobs"] == 16
    history = report["history"]
    assert history[0]["mean_ratio"] == pytest.approx(1.0, abs=1e-4)  # the sampling policy is the start
    assert max(step["clip_fraction"] for step in history) > 0  # ratios reached the clip range
    after = mean_logprobs(out, sampled_steps_file)  # LoRA merged: a plain model loads
    assert after[0] > before[0] and after[1] < before[1], (before, after)


def test_bad_input_is_one_clear_line(base: Path, steps_file: Path, model_dir: Path) -> None:
    mixed = base / "mixed.jsonl"
    mixed.write_text(
        json.dumps({"prompt": "hi", "completion": [{"role": "assistant", "content": "x"}], "advantage": 1}) + "\n"
    )
    cases = [
        (["--data", base / "missing.jsonl", "--model", model_dir], "missing.jsonl: no such file"),
        (
            ["--data", mixed, "--model", model_dir],
            "mixed.jsonl:1: record: Value error, prompt and completion must both",
        ),
        (["--data", steps_file, "--model", base / "nowhere"], "nowhere: no such directory"),
    ]
    for args, message in cases:
        result = run_cli("train", *args, "--out", base / "never")
        assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
    assert not (base / "never").exists()
    result = run_cli(
        "export",
        "--format",
        "sft",
        "--text",
        "--chat-template",
        model_dir,
        "--out",
        base / "x.jsonl",
        "--db",
        base / "plain.db",
    )
    assert result.exit_code == 2 and "--text is for the step-grpo, critic and webloop formats" in " ".join(
        result.output.split()
    )


PRAISE = "Every requirement is met."  # a Critic turn that judged well (D 1) but helped nothing (H -1)
BLAME = "The footer is missing: add it."  # judged badly (D 0), but its refinement helped (H 1)


def webloop_file(path: Path) -> Path:
    """Webloop records of Critic turns whose advantage changes sign at the reward switch."""
    records = []
    for group, requirement in GROUPS.items():
        prompt = [ChatMessage(role="system", content=SYSTEM), ChatMessage(role="user", content=requirement)]
        for sample, (text, d, h) in enumerate([(PRAISE, 1.0, -1.0), (BLAME, 0.0, 1.0)] * 2):
            records.append(
                WebloopRecord(
                    group_id=group,
                    trajectory_id=f"{group}-s{sample}",
                    step=0,
                    role="critic",
                    prompt=prompt,
                    completion=[ChatMessage(role="assistant", content=text)],
                    reward=d + h,
                    d=d,
                    h=h,
                    advantage=0.0 if text == PRAISE else 1.0,  # as exported with --critic-reward dh
                    group_mean=0.5,
                    group_std=0.5,
                    group_size=4,
                    check_score=0.5,
                    check_score_after=0.5 + h / 2,
                    checks=["YES", "NO"],
                    critic_verdicts=["met", "met"] if text == PRAISE else ["unmet", "unmet"],
                    critic_model="coder",
                    format_ok=True,
                    has_logprobs=False,
                    logprobs=[],
                    completion_logprobs=None,
                )
            )
    path.write_text("".join(r.model_dump_json() + "\n" for r in records))
    return path


def praise_minus_blame(model_path: Path, data: Path) -> float:
    """How much likelier the model finds PRAISE than BLAME (mean completion-token logprob)."""
    means = completion_means(model_path, data)
    return average([m for r, m in means if r.completion_content == PRAISE]) - average(
        [m for r, m in means if r.completion_content == BLAME]
    )


@pytest.mark.e2e
def test_the_critic_reward_switch_trains_on_d_first_then_on_d_plus_h(base: Path, model_dir: Path) -> None:
    data = webloop_file(base / "webloop.jsonl")
    start = praise_minus_blame(model_dir, data)
    reports, gaps = {}, {}
    for switch in (0, 100):  # D + H from the first step; D alone throughout
        out = base / f"switch-{switch}"
        result = run_cli(
            "train", "--data", data, "--model", model_dir, "--out", out, "--critic-reward-switch", switch,
            "--epochs", "6", "--batch-size", "4", "--lr", "3e-3", "--max-length", "256",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        reports[switch] = json.loads((out / "training.json").read_text())["report"]
        gaps[switch] = praise_minus_blame(out, data)
    assert gaps[100] > start + 0.5, (start, gaps)  # on D alone the good judge is reinforced
    assert gaps[0] < start - 0.5, (start, gaps)  # on D + H the helpful one is
    assert {s["critic_reward"] for s in reports[100]["history"]} == {"d"}
    assert {s["critic_reward"] for s in reports[0]["history"]} == {"dh"}

    out = base / "switch-2"
    result = run_cli(
        "train", "--data", data, "--model", model_dir, "--out", out, "--critic-reward-switch", "2", "--max-steps", "3",
        "--epochs", "2", "--batch-size", "4", "--max-length", "256",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    history = json.loads((out / "training.json").read_text())["report"]["history"]
    assert [s["critic_reward"] for s in history] == ["d", "d", "dh"]


def test_the_reward_switch_needs_critic_turns(base: Path, steps_file: Path, model_dir: Path) -> None:
    result = run_cli(
        "train", "--data", steps_file, "--model", model_dir, "--out", base / "no-switch", "--critic-reward-switch", "2"
    )
    assert result.exit_code != 0 and "needs a webloop export" in result.output
