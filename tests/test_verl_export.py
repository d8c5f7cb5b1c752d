"""The verl export: parquet in verl's dataset layout, read back by verl's own RL dataset class and
multi-turn SFT dataset class (when verl is installed), else checked against the columns those classes
read (verl/utils/dataset/rl_dataset.py and multiturn_sft_dataset.py, verl 0.9)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.helpers import synthetic
from tests.tiny_lm import train_tokenizer
from webgen_agent.checkpoints.export import trajectory_records, verl_records
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.checkpoints.trajectories import BlobTexts, Trajectory
from webgen_agent.checkpoints.writers import write_records

TEST_CASES = [{"task": "Click save.", "expected_result": "The count goes up."}]


def trajectories(store: BlobStore) -> list[Trajectory]:
    one = synthetic(store, "a", "g", [{"screenshot_score": 2}, {"screenshot_score": 5, "gui_score": 4}], chosen=1)
    two = synthetic(store, "b", "g", [{"screenshot_score": 3}], chosen=0)
    one.values["requirements"] = store.put_json(TEST_CASES)
    for trajectory in (one, two):
        for step in trajectory.steps:
            step["parent"] = step["index"] - 1 if step["index"] else None
    return [one, two]


@pytest.fixture
def exported(tmp_path) -> tuple[Path, list[Trajectory], BlobStore]:
    store = BlobStore(tmp_path / "blobs.db")
    found = trajectories(store)
    out = tmp_path / "verl.parquet"
    assert write_records(verl_records(found, BlobTexts(store)), out, parquet=True) == 2
    return out, found, store


def test_verl_columns_hold_the_trajectory(exported):
    out, found, store = exported
    rows = pq.read_table(out).to_pylist()
    expected = list(trajectory_records(found, BlobTexts(store)))
    assert [row["extra_info"]["index"] for row in rows] == [0, 1]
    for row, trajectory in zip(rows, expected, strict=True):
        assert list(row) == ["data_source", "prompt", "ability", "reward_model", "extra_info", "messages"]
        assert row["data_source"] == "webgen-agent" and row["ability"] == "web-generation"
        messages = [m.model_dump() for m in trajectory.messages]
        assert row["messages"] == messages
        assert row["prompt"] == messages[:2] and [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert row["extra_info"]["turns"] == [t.model_dump() for t in trajectory.turns]
        assert row["extra_info"]["trajectory_id"] == trajectory.trajectory_id
        assert row["reward_model"]["style"] == "model"
    assert json.loads(rows[0]["reward_model"]["ground_truth"]) == TEST_CASES
    assert json.loads(rows[1]["reward_model"]["ground_truth"]) == []
    assert [t["advantage"] > 0 for t in rows[0]["extra_info"]["turns"]] == [False, True]


def tokenizer_for(rows: list[dict[str, Any]], directory: Path) -> Any:
    tokenizer = train_tokenizer(m["content"] for row in rows for m in row["messages"])
    tokenizer.save_pretrained(directory)
    return tokenizer


def test_verl_rl_and_sft_datasets_read_the_export(exported, tmp_path):
    """verl's RLHFDataset (prompt) and MultiTurnSFTDataset (messages) load the file as it is."""
    pytest.importorskip("verl", reason="verl is not installed (pip install verl --no-deps, tensordict, omegaconf)")
    from omegaconf import OmegaConf
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset
    from verl.utils.dataset.rl_dataset import RLHFDataset

    out, _, _ = exported
    rows = pq.read_table(out).to_pylist()
    tokenizer = tokenizer_for(rows, tmp_path / "tokenizer")
    config = OmegaConf.create(
        {"max_prompt_length": 4096, "filter_overlong_prompts": True, "filter_overlong_prompts_workers": 1,
         "cache_dir": str(tmp_path / "verl-cache")}
    )  # fmt: skip
    rl = RLHFDataset(str(out), tokenizer, config)
    assert len(rl) == 2  # no prompt filtered out
    for n, row in enumerate(rows):
        item = rl[n]
        assert item["raw_prompt"] == row["prompt"]
        assert item["index"] == n and item["data_source"] == "webgen-agent"
        assert item["reward_model"] == row["reward_model"]
    sft = MultiTurnSFTDataset(str(out), tokenizer, OmegaConf.create({"max_length": 4096, "truncation": "error"}))
    assert len(sft) == 2
    for n, row in enumerate(rows):
        item = sft[n]
        ids, mask = item["input_ids"], item["loss_mask"]
        trained = tokenizer.decode(ids[mask.bool()].tolist())
        for message in row["messages"]:
            assert (message["content"] in trained) == (message["role"] == "assistant")
