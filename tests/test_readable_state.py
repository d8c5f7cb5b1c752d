"""The state a person reads in LangGraph Studio (nodes/readable.py) and what it costs to store
(checkpoints/saver.py): derived from the compact state with a real blob store, stored through the
real content-addressed serializer, without running the graph. The served graph's thread state is
checked in tests/test_studio_server.py."""

from __future__ import annotations

import base64
import random
import sqlite3
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from tests.helpers import checkpoint_of
from tests.test_storage_core import coder_step
from webgen_agent.checkpoints.requirements import requirement_items
from webgen_agent.checkpoints.saver import ContentAddressedSerde
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.core.state import AgentState, conversation_of
from webgen_agent.nodes.readable import RESULTS_NAME, readable_state

APP = "export default function App() {\n" + "  return <ul>{items.map((i) => <li>{i}</li>)}</ul>;\n" * 40 + "}\n"


def png_bytes(size: int = 60_000) -> bytes:
    """A PNG-sized blob that does not compress (as a real screenshot hardly does)."""
    return b"\x89PNG\r\n\x1a\n" + random.Random(size).randbytes(size)


def stored_bytes(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COALESCE(SUM(LENGTH(data)), 0) FROM blobs").fetchone()[0])


def a_run(store: BlobStore, project: Path) -> AgentState:
    """A run after one step that rendered and was judged: conversation, snapshot, screenshot."""
    (project / "src").mkdir(parents=True)
    (project / "src" / "App.jsx").write_text(APP)
    (project / "logo.bin").write_bytes(b"\xff\xfe\x00binary")
    system, user = "You write websites. " * 30, "A todo list where items can be added."
    reply = "<boltArtifact>...App.jsx...</boltArtifact> " * 20
    conversation = [
        {"role": "system", "hash": store.put_text(system)},
        {"role": "user", "hash": store.put_text(user)},
        {"role": "assistant", "hash": store.put_text(reply)},
    ]
    step = coder_step(
        0,
        prompt_len=2,
        completion=conversation[2]["hash"],
        files=store.snapshot(project),
        screenshot=store.put(png_bytes()),
        screenshot_score=4,
        description="A list with an input box.",
        gui_score=2,
        gui_passed=False,
        execution={"ok": True, "stage": "ok", "error": None},
        feedback=store.put_text("The Add button loses the item: keep it in state."),
    )
    return {  # type: ignore[typeddict-item]
        "conversation": conversation,
        "steps": [step],
        "current": 0,
        "files": step["files"],
        "feedback": step["feedback"],
    }


def test_the_conversation_reads_as_chat_with_the_screenshot_as_an_image(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "db.sqlite")
    state = a_run(store, tmp_path / "site")
    readable = readable_state(state, store)
    messages = readable["messages"]
    assert [type(m) for m in messages] == [SystemMessage, HumanMessage, AIMessage, AIMessage, HumanMessage]
    assert messages[1].content == "A todo list where items can be added."
    results = messages[3]
    assert results.name == RESULTS_NAME
    text, image = results.content
    assert "Screenshot: 4/5. A list with an input box." in text["text"] and "GUI test: failed, 2/5" in text["text"]
    header, encoded = image["image_url"]["url"].split(",")
    assert header == "data:image/png;base64" and base64.b64decode(encoded) == png_bytes()
    assert messages[4].content == "The Add button loses the item: keep it in state."  # what the Refiner gets next
    assert len({m.id for m in messages}) == len(messages)

    latest = readable["latest_step"]
    assert latest["screenshot_score"] == 4 and latest["gui_passed"] is False and latest["run"] == "ok"
    assert readable["latest_files"]["src/App.jsx"] == APP
    assert readable["latest_files"]["logo.bin"] == "(9 bytes of binary data)"


def test_readable_values_are_stored_by_content_and_read_back_exactly(tmp_path: Path) -> None:
    """Texts, the screenshot and the files are the blobs the run already stored: storing the
    readable keys adds a few small records, not the project and the PNG again."""
    db = tmp_path / "db.sqlite"
    store = BlobStore(db)
    state = a_run(store, tmp_path / "site")
    readable = readable_state(state, store)
    before = stored_bytes(db)
    serde = ContentAddressedSerde(store)
    typed = serde.dumps_typed(checkpoint_of(readable))
    added = stored_bytes(db) - before
    shown = len(APP) + len(png_bytes()) + sum(len(str(m.content)) for m in readable["messages"])
    assert shown > 60_000 and added < 3_000, added
    assert len(typed[1]) < 1_000  # the checkpoint row holds references

    loaded = ContentAddressedSerde(store).loads_typed(typed)["channel_values"]  # no cache: from the store
    assert loaded == readable

    # The next checkpoint with the same values (the next node's): nothing new at all.
    stored = stored_bytes(db)
    ContentAddressedSerde(store).dumps_typed(checkpoint_of(readable))
    assert stored_bytes(db) == stored


def test_a_data_url_that_is_not_canonical_base64_is_kept_as_written(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "db.sqlite")
    serde = ContentAddressedSerde(store)
    odd = "data:image/png;base64," + base64.b64encode(png_bytes(600)).decode()[:-2] + "\n=="
    messages = [AIMessage(content=[{"type": "image_url", "image_url": {"url": odd}}], id="a")]
    assert ContentAddressedSerde(store).loads_typed(serde.dumps_typed(messages)) == messages


def test_a_run_checkpointed_before_the_conversation_had_its_own_key_goes_on_from_it(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "db.sqlite")
    state = a_run(store, tmp_path / "site")
    earlier: dict[str, Any] = {**state, "messages": state["conversation"]}  # where it was kept then
    del earlier["conversation"]
    assert conversation_of(earlier) == state["conversation"]  # type: ignore[arg-type]
    assert readable_state(earlier, store)["messages"] == readable_state(state, store)["messages"]  # type: ignore[arg-type]


def test_a_requirement_list_reads_the_same_from_state_or_from_an_earlier_runs_blob(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "db.sqlite")
    listed = [{"task": "Add a note", "expected_result": "It is listed."}]
    assert requirement_items(listed, store) == requirement_items(store.put_json(listed), store) == listed


def test_a_mapping_of_texts_not_in_path_order_reads_back_in_its_own_order(tmp_path: Path) -> None:
    serde = ContentAddressedSerde(BlobStore(tmp_path / "db.sqlite"))
    value = {"b": "x" * 300, "a": "y" * 300}
    assert list(serde.loads_typed(serde.dumps_typed(value))) == ["b", "a"]
