"""docs/training.md's TRL recipe, run as written (the data file, model and output folder swapped for
the test's) on step-grpo records whose prompts are longer than TRL's default max_length (1024
tokens), as the demo's are: every completion token must be trained, none cut."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.tiny_lm import tiny_causal_lm
from webgen_agent.apps.train.chat import split_rendering

TRAINING_DOC = Path(__file__).resolve().parents[1] / "docs" / "training.md"


def documented_recipe() -> str:
    """The python block of the doc's "With TRL" section."""
    text = TRAINING_DOC.read_text()
    section = text[text.index("## With TRL") :]
    start = section.index("```python") + len("```python")
    return section[start : section.index("```", start)]


def long_record(rng: random.Random, words: list[str], advantage: float) -> dict[str, Any]:
    feedback = " ".join(rng.choice(words) for _ in range(500))  # about 1.8k tokens of this tokenizer
    return {
        "prompt": [
            {"role": "system", "content": "You write websites."},
            {"role": "user", "content": f"Build a page. Feedback: {feedback}"},
        ],
        "completion": [{"role": "assistant", "content": " ".join(rng.choice(words) for _ in range(40))}],
        "advantage": advantage,
        "group_id": "g",
    }


def test_the_trl_recipe_trains_every_completion_token(tmp_path, monkeypatch, capsys):
    pytest.importorskip("trl", reason="TRL is in the test extra")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # the recipe's relative output folder lands here
    rng = random.Random(0)
    words = [f"w{n}{chr(97 + n % 26)}" for n in range(300)]
    records = [long_record(rng, words, advantage) for advantage in (1.0, 0.5, -1.0, 2.0)]
    data = tmp_path / "records.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    model = tiny_causal_lm(tmp_path / "tiny", [m["content"] for r in records for m in [*r["prompt"], *r["completion"]]])

    recipe = documented_recipe()
    assert '"steps.jsonl"' in recipe and '"MODEL_DIR"' in recipe and "SFTConfig(" in recipe
    recipe = recipe.replace('"steps.jsonl"', json.dumps(str(data))).replace('"MODEL_DIR"', json.dumps(str(model)))
    # TRL trains in bfloat16 by default, which needs a GPU: on this CPU in float32.
    recipe = recipe.replace("SFTConfig(", "SFTConfig(bf16=False, use_cpu=True, ")
    # Everything up to the training itself (minutes on a CPU even for the tiny model): the data path.
    assert recipe.rstrip().endswith("\ntrainer.train()")
    recipe = recipe.rstrip().removesuffix("trainer.train()")
    namespace: dict[str, Any] = {}
    exec(compile(recipe, str(TRAINING_DOC), "exec"), namespace)  # the documented recipe itself

    trainer = namespace["trainer"]
    kept = [r for r in records if r["advantage"] > 0]
    rows = trainer.train_dataset
    assert len(rows) == len(kept)
    tokenizer = trainer.processing_class
    for row, record in zip(rows, kept, strict=True):
        _, completion = split_rendering(tokenizer, record["prompt"], record["completion"])
        completion_tokens = len(tokenizer(completion, add_special_tokens=False)["input_ids"])
        assert len(row["input_ids"]) > 1024  # longer than TRL's default max_length
        assert sum(label != -100 for label in row["labels"]) == completion_tokens  # the whole completion is trained
    assert f"{len(kept)} examples, the longest {max(len(r['input_ids']) for r in rows)} tokens, none cut" in (
        capsys.readouterr().out
    )
