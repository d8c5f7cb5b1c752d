"""Finalize and the best-step choice on their own (tests/node_harness.py)."""

from __future__ import annotations

import json

from webgen_agent.nodes.finalize import finalize
from webgen_agent.nodes.selection import best_good_step, best_step


def snapshot(harness, name: str, text: str) -> str:
    folder = harness.root / "snapshots" / name
    folder.mkdir(parents=True)
    (folder / "index.html").write_text(text)
    return harness.store.snapshot(folder)


def three_edits(harness):
    """Step 0 good-looking, step 1 the best GUI result, step 2 the last but errored."""
    return [
        harness.step(0, files=snapshot(harness, "0", "zero"), screenshot_score=4, gui_score=2),
        harness.step(1, files=snapshot(harness, "1", "one"), screenshot_score=3, gui_score=4),
        harness.step(2, files=snapshot(harness, "2", "two"), screenshot_score=5, gui_score=5, errored=True),
    ]


def test_the_best_step_is_the_good_one_with_the_best_gui_then_screenshot_grade(node_harness):
    steps = three_edits(node_harness)
    assert best_step(steps)["index"] == 1  # an errored step is not good, whatever its grades
    assert best_good_step(steps)["index"] == 1
    bad = [{**s, "errored": True} for s in steps]
    assert best_step(bad)["index"] == 2 and best_good_step(bad) is None  # none good: all rank, none to return to


async def test_finalize_writes_the_best_steps_files_as_the_site_and_run_json(node_harness):
    state = node_harness.state(steps=three_edits(node_harness), current=2, status="running")
    run = await node_harness.run(finalize, state)
    assert run.update["status"] == "finished" and run.update["chosen_step"] == 1
    site = node_harness.out_dir / "site"
    assert run.update["site_dir"] == str(site) and (site / "index.html").read_text() == "one"
    summary = json.loads((node_harness.out_dir / "run.json").read_text())
    assert summary["chosen_step"] == 1 and summary["status"] == "finished" and len(summary["steps"]) == 3
    (event,) = run.update["events"]
    assert event == {"kind": "finalize", "after_step": 2, "target_step": 1, "reason": "best step"}
    assert run.message == "chose step 1"


async def test_without_select_best_the_last_edit_is_the_site(node_harness):
    state = node_harness.state(steps=three_edits(node_harness), current=2)
    run = await node_harness.run(finalize, state, select_best=False)
    assert run.update["chosen_step"] == 2 and run.update["events"][0]["reason"] == "last step"
    assert (node_harness.out_dir / "site" / "index.html").read_text() == "two"


async def test_a_run_that_wrote_no_code_finishes_without_a_site(node_harness):
    malformed = node_harness.step(0, action="malformed", errored=True)
    run = await node_harness.run(finalize, node_harness.state(steps=[malformed], current=0))
    assert run.update["chosen_step"] is None and run.update["site_dir"] is None
    assert not (node_harness.out_dir / "site").exists()
