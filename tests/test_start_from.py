"""``run --from DIR``: a run that starts from the user's own project (the real CLI as a process, the
scripted model server, a real static site in Chromium).

The landing scenario's coder writes version 1 of a coffee-shop page at its first turn and version 2
(with the opening-hours button) at its second. Here the user's folder holds version 1: step 0 is
that folder, run and judged (3/5) with no coder call, and the coder's first call is its second turn,
answering the feedback on the user's page, which the GUI agent then passes.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from tests.helpers import scripted_models
from tests.test_cli import cli
from webgen_agent.apps.demo import scenario_path
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.store import BlobStore

REQUIREMENT = "A coffee-shop landing page with a button that shows the opening hours."
LOGO = bytes(range(256)) * 4  # binary: not shown to the coder, imported all the same


def _users_project(root: Path) -> Path:
    """The user's folder: the scenario's version 1 page, a binary file, a link out of the folder and
    a node_modules folder (none of the last two imported)."""
    reply = (Path(scenario_path("landing")).parent / "landing" / "page-v1.txt").read_text()
    page = re.search(r'filePath="index.html">\n(.*)</boltAction>', reply, re.S)
    assert page is not None
    project = root / "coffee"
    (project / "node_modules" / "left-pad").mkdir(parents=True)
    (project / "node_modules" / "left-pad" / "index.js").write_text("module.exports = 1;\n")
    (project / "index.html").write_text(page.group(1))
    (project / "logo.bin").write_bytes(LOGO)
    (root / "outside.txt").write_text("a file outside the project")
    (project / "outside").symlink_to(root / "outside.txt")
    return project


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.e2e
def test_a_run_from_a_folder_judges_it_as_it_is_and_improves_it(tmp_path: Path, chromium_path: str) -> None:
    project = _users_project(tmp_path)
    before = _files(project)
    db, out = tmp_path / "runs.db", tmp_path / "out"
    env = {"WEBGEN_CHROMIUM": chromium_path}
    with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        flags = [*scripted_models(server.base_url), "--db", str(db)]
        result = cli("run", REQUIREMENT, "--from", str(project), "--run-id", "mine", "--out", str(out), *flags, env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        coder_turns = [r.turn for r in server.requests if r.model == "scripted-coder"]
    # No coder call for step 0: the first call is the scenario's second turn (the user's page is the first).
    assert coder_turns == [1], coder_turns

    summary = json.loads((out / "run.json").read_text())
    steps = summary["steps"]
    assert [s["role"] for s in steps] == ["import", "refiner"], steps
    assert steps[0]["screenshot_score"] == 3 and steps[0]["execution_ok"] is True  # judged as it is
    assert steps[0]["tokens"].get("generator") is None  # no coder tokens: nothing was asked
    assert steps[1]["screenshot_score"] == 5 and steps[1]["gui_passed"] is True
    assert summary["status"] == "finished" and summary["chosen_step"] == 1
    assert _files(project) == before  # the user's folder is left as it was

    state = asyncio.run(final_state(db, "mine"))
    first = state["steps"][0]
    blobs = BlobStore(db)
    imported = blobs.manifest(first["imported"])
    assert sorted(imported) == ["index.html", "logo.bin"]  # no link, no node_modules
    assert blobs.get(imported["logo.bin"]) == LOGO
    assert any("outside" in problem and "symbolic link" in problem for problem in first["problems"])
    # The files are step 0's edit: its diff is every file, from nothing.
    assert first["base_files"] is None and first["changed"] == ["index.html", "logo.bin"]
    # The coder read the user's page as the first assistant turn, then the feedback on it.
    sent = [blobs.get_text(ref["hash"]) for ref in blobs.get_json(state["steps"][1]["prompt"])]
    assert "imported-project" in sent[2] and "Bean There" in sent[2] and "logo.bin" in sent[2]
    assert "outside" not in (out / "site").iterdir().__repr__()

    history = cli("history", "mine", "--db", str(db), env={"COLUMNS": "200"})  # wide enough for the role column
    assert history.returncode == 0 and "import" in history.stdout, history.stdout
    assert cli("report", "mine", "--db", str(db)).returncode == 0
    report = (out / "report.html").read_text()
    assert "imported 2 file(s)" in report and "Started from the folder" in report
    assert "Step 0 · import · edit" in report and "The imported project, as the coder read it" in report

    # Exports: step 0 is the user's, not a model completion (docs/exports.md).
    grpo = tmp_path / "steps.jsonl"
    exported = cli("export", "--format", "step-grpo", "--out", str(grpo), "--db", str(db))
    assert exported.returncode == 0, exported.stderr
    assert [json.loads(line)["step"] for line in grpo.read_text().splitlines()] == [1]
    trajectory = tmp_path / "trajectory.jsonl"
    assert cli("export", "--format", "trajectory", "--out", str(trajectory), "--db", str(db)).returncode == 0
    turns = json.loads(trajectory.read_text())["turns"]
    assert [(t["step"], t["train"]) for t in turns] == [(0, False), (1, True)]
    sft = cli("export", "--format", "sft", "--out", str(tmp_path / "sft.jsonl"), "--db", str(db))
    assert sft.returncode == 2 and "started from a folder" in sft.stderr and "mine" in sft.stderr
    assert not (tmp_path / "sft.jsonl").exists()
