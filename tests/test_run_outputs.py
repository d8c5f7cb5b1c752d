"""The run's output folder: every screenshot written once, run.json naming the file that holds it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from webgen_agent.checkpoints.outputs import write_run_outputs
from webgen_agent.checkpoints.store import BlobStore


def _step(index: int, screenshot: str, pages: str) -> dict[str, Any]:
    return {
        "index": index,
        "role": "generator" if index == 0 else "refiner",
        "action": "edit",
        "parent": index - 1 if index else None,
        "summary": f"step {index}",
        "screenshot_score": 3,
        "gui_score": 0,
        "gui_passed": None,
        "errored": False,
        "format_ok": True,
        "problems": [],
        "timings": {},
        "tokens": {},
        "screenshot": screenshot,
        "pages": pages,
    }


def test_each_screenshot_is_written_once(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "webgen.db")
    try:
        landing_0, menu, landing_1 = (store.put(b"\x89PNG" + bytes([n]) * 64) for n in range(3))
        pages_0 = store.put_json([{"path": "/", "screenshot": landing_0}, {"path": "/menu", "screenshot": menu}])
        # Step 1 changed the landing page only: its /menu screenshot is step 0's.
        pages_1 = store.put_json([{"path": "/", "screenshot": landing_1}, {"path": "/menu", "screenshot": menu}])
        state = {"run_id": "r", "steps": [_step(0, landing_0, pages_0), _step(1, landing_1, pages_1)]}
        write_run_outputs(tmp_path / "out", state, store)
    finally:
        store.close()

    files = sorted((tmp_path / "out" / "steps").iterdir())
    digests = [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]
    assert len(set(digests)) == len(digests), [f.name for f in files]  # no byte-identical copies
    assert [f.name for f in files] == ["0-1.png", "0.png", "1.png"]
    summary = json.loads((tmp_path / "out" / "run.json").read_text())
    assert [s["screenshot"] for s in summary["steps"]] == ["steps/0.png", "steps/1.png"]
    assert [[p["screenshot"] for p in s["pages"]] for s in summary["steps"]] == [
        ["steps/0.png", "steps/0-1.png"],
        ["steps/1.png", "steps/0-1.png"],
    ]
