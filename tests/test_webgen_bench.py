"""The WebGen-Bench loader against the facts of the shipped samples."""

import json
from collections import Counter
from pathlib import Path

import pytest

from webgen_agent.tools.webgen_bench import BenchDataError, load_records

SAMPLE = Path(__file__).parent / "data" / "webgen-bench-sample.jsonl"
TRAIN = Path(__file__).parent / "data" / "webgen-bench-train-sample.jsonl"


def test_sample_counts_by_category():
    records = load_records(SAMPLE)
    assert [r.id for r in records] == [f"00000{n}" for n in range(1, 10)]
    counts = {
        "instructions": Counter(r.category.primary_category for r in records),
        "test_cases": Counter(c.task_category.primary_category for r in records for c in r.test_cases),
    }
    assert counts["instructions"] == {"Data Management": 3, "User Interaction": 3, "Content Presentation": 3}
    assert sum(len(r.test_cases) for r in records) == 58
    assert sum(counts["test_cases"].values()) == 58
    assert set(counts["test_cases"]) <= {"Functional Testing", "Data Display Testing", "Design Validation Testing"}


def test_training_records_have_no_test_cases():
    records = load_records(TRAIN)
    assert len(records) == 10 and records[0].id == "train_000054"
    assert all(r.test_cases == [] for r in records)


def test_a_full_size_file_is_read(tmp_path):
    # The full test set has 101 records and 647 cases in the same format.
    base = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    big = tmp_path / "test.jsonl"
    with big.open("w") as handle:
        for n in range(101):
            record = dict(base[n % len(base)], id=f"{n + 1:06d}")
            handle.write(json.dumps(record) + "\n")
    records = load_records(big)
    assert len(records) == 101
    assert len(load_records(big, ids=["000042", "000101"])) == 2
    assert len(load_records(big, limit=5)) == 5


def test_bad_files_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "instruction": "x"}\n{oops\n')
    with pytest.raises(BenchDataError, match="bad.jsonl:2"):
        load_records(bad)
    with pytest.raises(BenchDataError, match="no such file"):
        load_records(tmp_path / "missing.jsonl")
    with pytest.raises(BenchDataError, match="ids not found: 999"):
        load_records(SAMPLE, ids=["999"])
