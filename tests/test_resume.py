"""Resume after kill -9 at several points: same steps, scores and files as an uninterrupted run.

The agent runs as a real CLI process against a scripted server in this test process; it is killed
with SIGKILL twice (during the first build, then later in the run) and resumed each time.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import group_alive, kill_when, owned_groups, scripted_models, site_files, start, still_running
from webgen_agent.apps.demo import DEMO_REQUIREMENT, scenario_path
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.runs import RunIndex

pytestmark = pytest.mark.e2e


def test_killed_twice_and_resumed_ends_like_an_uninterrupted_run(tmp_path, demo_run, chromium_path, db_target):
    """On both stores: a task's writes are stored all or none, so a kill never leaves half a step."""
    reference, _ = demo_run
    db = db_target
    env = {**os.environ, "WEBGEN_CHROMIUM": chromium_path}
    with ScriptedServer(Scenario.load(scenario_path("demo"))) as server:
        flags = [
            *scripted_models(server.base_url),
            "--db",
            str(db),
        ]
        first = start(
            ["run", DEMO_REQUIREMENT, "--run-id", "r", "--out", str(tmp_path / "out"), "--max-steps", "8", *flags], env
        )
        started = kill_when(first, db, "r", checkpoints=3)  # step 0 is being built (npm install / vite start)
        assert RunIndex(db).get("r").status == "interrupted"
        # The killed run's watchdog takes its dev server and browser down; nobody has to resume first.
        assert len(started) >= 2, "the run had started a browser and npm by then"
        assert still_running(started) == []
        orphans = owned_groups(db, first.pid)  # the watchdog also took them off the registry

        second = start(["resume", "r", *flags], env)
        started = kill_when(second, db, "r", checkpoints=12)  # later: step 2 is being judged or GUI-tested
        assert len(started) >= 2 and still_running(started) == []
        orphans += owned_groups(db, second.pid)

        third = start(["resume", "r", *flags], env)
        output = third.communicate(timeout=300)[0]
        assert third.returncode == 0, output
        coder_turns = Counter(r.turn for r in server.requests if r.model == "scripted-coder")

    assert not [g for g in orphans if group_alive(g)], "nothing the dead processes started is still running"
    record = RunIndex(db).get("r")
    assert record.status == "finished"
    summary = json.loads((tmp_path / "out" / "run.json").read_text())
    expected = [
        (s.index, s.action, s.screenshot_score, s.gui_score, s.gui_passed, s.errored) for s in reference.summary.steps
    ]
    got = [
        (s["index"], s["action"], s["screenshot_score"], s["gui_score"], s["gui_passed"], s["errored"])
        for s in summary["steps"]
    ]
    assert got == expected
    assert summary["chosen_step"] == reference.chosen_step
    assert site_files(tmp_path / "out" / "site") == site_files(Path(reference.site_dir))
    # Finished steps were not asked again: only a call in flight at a kill may repeat.
    assert coder_turns[0] == 1
    assert all(count <= 2 for count in coder_turns.values()) and sum(coder_turns.values()) <= 4 + 2
