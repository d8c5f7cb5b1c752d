"""The export-format registry (checkpoints/formats.py) against everything derived from it: every
format builds, writes and reloads; the command line offers exactly the registry's formats with its
help; docs/exports.md documents each. A format added, renamed or half-wired fails here, in the fast
suite (the e2e rollout test exports what a real rollout recorded)."""

from __future__ import annotations

import asyncio
import json
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.helpers import synthetic
from webgen_agent.checkpoints.export import export_trajectories
from webgen_agent.checkpoints.formats import FORMATS, TEXT_FORMATS, ExportFormatEntry
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.checkpoints.trajectories import BlobTexts, Trajectory
from webgen_agent.checkpoints.views import ChatMessage, ExportOptions
from webgen_agent.checkpoints.writers import write_records

ROOT = Path(__file__).resolve().parents[1]
ENTRIES = list(FORMATS.values())


def _trajectories(store: BlobStore) -> list[Trajectory]:
    """Two default-loop trajectories of one group (the first with an llm critique its Refiner step
    answered) and a WebLoop trajectory (a Critic turn credited by the Refiner's page): every
    format has records to write."""
    critique = {
        "checks": [{"requirement": "a list", "status": "unmet", "evidence": "none"}],
        "diagnosis": "d",
        "plan": ["p"],
    }
    critic_prompt = [{"role": "system", "content": "critic"}, {"role": "user", "content": "the step"}]
    critiqued = synthetic(
        store,
        "a",
        "g",
        [
            {
                "screenshot_score": 3,
                "gui_score": 2,
                "critique": store.put_json(critique),
                "critic_prompt": store.put_json(critic_prompt),
            },
            {"screenshot_score": 5, "gui_score": 5},
        ],
        chosen=1,
        logprobs=True,
    )
    critiqued.values["requirements"] = [{"task": "add an item", "expected_result": "it is listed"}]
    plain = synthetic(store, "b", "g", [{"screenshot_score": 4, "gui_score": 3}], chosen=0)
    checks = store.put_json([{"verdict": "met"}, {"verdict": "unmet"}])
    code_critique = {
        "verdicts": [{"id": 0, "status": "met", "evidence": "e"}, {"id": 1, "status": "unmet", "evidence": "e"}],
        "diagnosis": "d",
        "plan": ["p"],
    }
    webloop = synthetic(
        store,
        "w",
        "w",
        [
            {"check_score": 0.5, "checks": checks, "critique": store.put_json(code_critique), "critic_target": 0},
            {"check_score": 1.0, "checks": store.put_json([{"verdict": "met"}, {"verdict": "met"}]), "files": ["a.js"]},
        ],
        chosen=1,
    )
    return [critiqued, plain, webloop]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_every_format_writes_and_reloads(
    entry: ExportFormatEntry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry's builder gives records of the entry's type; written as JSON lines and as parquet
    they load again (the JSON lines record for record, both with ``datasets``)."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from datasets import load_dataset

    store = BlobStore(tmp_path / "blobs.db")
    trajectories = _trajectories(store)
    record_type = entry.record_type()
    build = entry.build()
    assert typing.get_type_hints(build)["return"] == Iterator[record_type], entry.name

    records = list(build(trajectories, BlobTexts(store), ExportOptions()))
    assert records and all(type(r) is record_type for r in records), entry.name
    lines = tmp_path / f"{entry.name}.jsonl"
    assert write_records(records, lines) == len(records)
    assert [record_type.model_validate_json(line) for line in lines.read_text().splitlines()] == records
    table = tmp_path / f"{entry.name}.parquet"
    assert write_records(records, table, parquet=True) == len(records)
    for kind, path in (("json", lines), ("parquet", table)):
        loaded = load_dataset(kind, data_files=str(path), split="train", cache_dir=str(tmp_path / "hf"))
        assert len(loaded) == len(records), (entry.name, kind)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_text_support_is_what_the_record_type_holds(entry: ExportFormatEntry, tmp_path: Path) -> None:
    """A format marked ``text`` has prompt and completion message lists for --text to render; any
    other is refused before anything is read."""
    fields = entry.record_type().model_fields
    messages = all(name in fields and fields[name].annotation == list[ChatMessage] for name in ("prompt", "completion"))
    assert messages == entry.text == (entry.name in TEXT_FORMATS), entry.name
    if not entry.text:
        with pytest.raises(ValueError, match=f"not {entry.name}"):
            asyncio.run(
                export_trajectories(entry.name, tmp_path / "x.jsonl", db_path=tmp_path / "none.db", render=_render)
            )


def _render(prompt: list[dict[str, Any]], completion: list[dict[str, Any]]) -> tuple[str, str]:
    return json.dumps(prompt), json.dumps(completion)


def test_an_unknown_format_is_refused_naming_the_formats(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown export format 'nope': one of step-grpo, "):
        asyncio.run(export_trajectories("nope", tmp_path / "x.jsonl", db_path=tmp_path / "none.db"))


def test_the_command_line_offers_the_registry() -> None:
    import typer

    from webgen_agent.apps.cli.main import app

    command = typer.main.get_command(app).commands["export"]  # type: ignore[attr-defined]
    option = next(p for p in command.params if p.name == "export_format")
    assert list(option.type_descriptor.choices) == list(FORMATS)
    assert all(f"{name}: {entry.help}" in option.help for name, entry in FORMATS.items())
    text = next(p for p in command.params if p.name == "text")
    assert text.help.startswith(", ".join(TEXT_FORMATS[:-1]))


def test_the_docs_describe_every_format() -> None:
    """docs/exports.md: a section per format and the options line listing them, in the registry's order."""
    doc = (ROOT / "docs" / "exports.md").read_text()
    sections = re.findall(r"^### `([a-z-]+)`", doc, flags=re.MULTILINE)
    assert sorted(sections) == sorted(FORMATS)
    listed = re.search(r"`--format ([a-z|-]+)`", doc)
    assert listed is not None and listed.group(1).split("|") == list(FORMATS)


def test_record_types_are_models() -> None:
    for entry in ENTRIES:
        assert issubclass(entry.record_type(), BaseModel), entry.name
