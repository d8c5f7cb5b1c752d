"""The storage core on its own: the step-log reducer, the content-addressed serializer and the
all-or-none pending writes, without running the graph."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from webgen_agent.checkpoints.saver import AtomicWritesSaver, ContentAddressedSerde, open_checkpointer
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.state import merge_steps


def coder_step(index: int, **fields: Any) -> dict[str, Any]:
    """A step as the coder turn writes it (every required field)."""
    step: dict[str, Any] = {
        "index": index,
        "role": "generator" if index == 0 else "refiner",
        "action": "edit",
        "parent": index - 1 if index else None,
        "tests_step": None,
        "prompt_len": 2,
        "prompt": "p" * 64,
        "completion": "c" * 64,
        "summary": f"step {index}",
        "format_ok": True,
        "problems": [],
        "screenshot_score": 0,
        "gui_score": 0,
        "gui_passed": None,
        "errored": False,
        "timings": {"generator": 1.0},
        "tokens": {"generator": {"input": 10, "output": 5, "calls": 1}},
        "model": "m",
    }
    step.update(fields)
    return step


# -- merge_steps -------------------------------------------------------------------------------


def test_merge_steps_adds_new_steps_in_index_order() -> None:
    merged = merge_steps([coder_step(1)], [coder_step(0)])
    assert [s["index"] for s in merged] == [0, 1]


def test_merge_steps_updates_only_the_fields_a_node_returns() -> None:
    current = [coder_step(0), coder_step(1)]
    merged = merge_steps(current, [{"index": 1, "screenshot_score": 4, "errored": True}])
    assert merged[1]["screenshot_score"] == 4 and merged[1]["errored"] is True
    assert merged[1]["summary"] == "step 1" and merged[0] == coder_step(0)


def test_merge_steps_merges_timings_and_tokens_per_node() -> None:
    merged = merge_steps(
        [coder_step(0)],
        [{"index": 0, "timings": {"executor": 2.5}, "tokens": {"screenshot_judge": {"input": 7}}}],
    )
    assert merged[0]["timings"] == {"generator": 1.0, "executor": 2.5}
    assert set(merged[0]["tokens"]) == {"generator", "screenshot_judge"}


def test_merge_steps_never_mutates_the_previous_state() -> None:
    current = [coder_step(0)]
    merge_steps(current, [{"index": 0, "screenshot_score": 5, "timings": {"executor": 1.0}}])
    assert current == [coder_step(0)]


def test_merge_steps_without_updates_keeps_the_log() -> None:
    assert merge_steps([coder_step(0)], None) == [coder_step(0)]
    assert merge_steps(None, None) == []


# -- ContentAddressedSerde ---------------------------------------------------------------------


def blob_count(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM blobs").fetchone()[0])


def checkpoint_with(steps: list[dict[str, Any]]) -> dict[str, Any]:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"steps": steps, "current": len(steps) - 1, "run_id": "r"}
    checkpoint["channel_versions"] = {"steps": 1}
    return dict(checkpoint)


def test_serde_round_trips_a_checkpoint_and_small_values(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "db.sqlite")
    serde = ContentAddressedSerde(store)
    steps = [coder_step(i) for i in range(3)]
    typed = serde.dumps_typed(checkpoint_with(steps))
    fresh = ContentAddressedSerde(store)  # no cache: everything is read back from the store
    loaded = fresh.loads_typed(typed)
    assert loaded["channel_values"]["steps"] == steps
    assert loaded["channel_values"]["current"] == 2
    for value in (3, "short", [1, 2], {"a": 1}, None):
        assert fresh.loads_typed(serde.dumps_typed(value)) == value


def test_serde_stores_an_unchanged_step_log_once(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    store = BlobStore(db)
    serde = ContentAddressedSerde(store)
    steps = [coder_step(i) for i in range(5)]
    serde.dumps_typed(checkpoint_with(steps))
    stored = blob_count(db)
    again = ContentAddressedSerde(store).dumps_typed(checkpoint_with(steps))  # a new process: no cache
    assert blob_count(db) == stored  # nothing new for the same values
    assert ContentAddressedSerde(store).loads_typed(again)["channel_values"]["steps"] == steps


def test_serde_stores_a_changed_step_as_one_record_and_its_links(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    store = BlobStore(db)
    serde = ContentAddressedSerde(store)
    steps = [coder_step(i) for i in range(10)]
    serde.dumps_typed(checkpoint_with(steps))
    before = blob_count(db)
    steps[-1] = {**steps[-1], "screenshot_score": 4}
    typed = serde.dumps_typed(checkpoint_with(steps))
    # The last record changed: its new blob and the one link that points at it; earlier links stay.
    assert blob_count(db) - before == 2
    assert ContentAddressedSerde(store).loads_typed(typed)["channel_values"]["steps"] == steps


def test_serde_keeps_rows_small_whatever_the_log_size(tmp_path: Path) -> None:
    serde = ContentAddressedSerde(BlobStore(tmp_path / "db.sqlite"))
    small = serde.dumps_typed(checkpoint_with([coder_step(0)]))
    large = serde.dumps_typed(checkpoint_with([coder_step(i) for i in range(200)]))
    assert len(large[1]) < 2 * len(small[1]) + 200


# -- AtomicWritesSaver -------------------------------------------------------------------------


async def save_and_write(saver: AsyncSqliteSaver, writes: list[tuple[str, Any]]) -> None:
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saved = await saver.aput(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    await saver.aput_writes(saved, writes, task_id="task-1")


def fail_third_write(db: Path) -> None:
    """A trigger that aborts the insert of a task's third write (index 2), as a crash would stop it."""
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TRIGGER IF NOT EXISTS fail_third BEFORE INSERT ON writes WHEN NEW.idx = 2 "
            "BEGIN SELECT RAISE(ABORT, 'interrupted'); END"
        )


def stored_writes(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM writes WHERE task_id = 'task-1'").fetchone()[0])


WRITES = [("messages", ["a"]), ("files", "h"), ("current", 1)]


async def test_a_tasks_writes_are_stored_all_or_none(tmp_path: Path) -> None:
    db = tmp_path / "run.db"
    async with open_checkpointer(db) as saver:
        assert isinstance(saver, AtomicWritesSaver)
        fail_third_write(db)
        with pytest.raises(sqlite3.IntegrityError):
            await save_and_write(saver, WRITES)
    assert stored_writes(db) == 0


async def test_the_stock_saver_would_store_part_of_a_task(tmp_path: Path) -> None:
    """Why the saver exists: on an autocommit connection the stock one stores row by row."""
    db = tmp_path / "run.db"
    async with aiosqlite.connect(str(db), isolation_level=None) as conn:
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        fail_third_write(db)
        with pytest.raises(sqlite3.IntegrityError):
            await save_and_write(saver, WRITES)
    assert stored_writes(db) == 2


async def test_pending_writes_read_back_in_order(tmp_path: Path) -> None:
    db = tmp_path / "run.db"
    async with open_checkpointer(db) as saver:
        await save_and_write(saver, WRITES)
        found = await saver.aget_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
    assert found is not None
    assert [(channel, value) for _, channel, value in found.pending_writes or []] == WRITES
