"""A fork from a step with no stored feedback (the step that ended its run) is shown the feedback its
run's profile gives: built by nodes/feedback.py under the run's rules, as the critic would have.

The run is written as its checkpoint and runs-table row (no graph run before the fork), and the
fork is taken at its step budget, so the graph goes from the written critic state straight to
finalize: no model call, no browser, about a second. Marked e2e all the same: a run's start probes
Chromium's sandbox with bubblewrap (tools/browser.py).
"""

from __future__ import annotations

import pytest

from tests.helpers import save_finished_run
from tests.node_harness import NO_BROWSER, RUN_ID
from webgen_agent.apps.demo import scripted_context
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.checkpoints.saver import open_checkpointer
from webgen_agent.graph.api import fork_run

pytestmark = pytest.mark.e2e

RAN = {"ok": True, "stage": None, "error": None, "install_ran": True, "url": "http://127.0.0.1:1/"}


@pytest.mark.parametrize(("profile", "graded"), [("upstream", False), ("default", True)])
async def test_a_fork_of_a_step_without_feedback_gets_its_profiles_feedback(node_harness, profile, graded):
    store = node_harness.store
    db = node_harness.root / "webgen.db"
    site = node_harness.root / "site"
    site.mkdir()
    (site / "index.html").write_text("<ul><li>a note</li></ul>")
    files = store.snapshot(site)
    judged = node_harness.step(
        0,
        execution=RAN,
        screenshot=store.put(b"a PNG"),
        screenshot_score=4,
        description="A plain list of notes.",
        suggestions=["Use a card per note."],
        files=files,
    )
    finished = node_harness.step(1, action="finish", files=files)
    values = node_harness.state(
        steps=[judged, finished], current=1, edit_step=0, group_id="g", profile=profile, files=files, conversation=[]
    )
    async with open_checkpointer(db) as saver:
        await save_finished_run(saver, RunIndex(db), dict(values))
    context = scripted_context(
        "http://127.0.0.1:9/v1", profile=profile, max_steps=2, chromium=NO_BROWSER, sandbox={"enabled": False}
    )
    await fork_run(RUN_ID, step=1, context=context, new_run_id="forked", out_dir=node_harness.root / "fork", db_path=db)
    text = store.get_text((await final_state(db, "forked"))["feedback"])
    assert "A plain list of notes." in text and "Use a card per note." in text
    assert ("graded 4/5" in text) is graded  # upstream never shows the coder its grades
