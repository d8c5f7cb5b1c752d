"""Bad input through the real command line: exit 2, one line naming what is wrong and how to fix it,
no table drawn first, no traceback, and nothing created by a command that only reads (docs/cli.md)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.fake_endpoints import fake_endpoint
from tests.helpers import save_finished_run
from tests.test_cli import cli
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.runs import RunIndex, RunRecord

DEAD = "http://127.0.0.1:9/v1"  # never reached: every case below stops before a model is asked


pytestmark = pytest.mark.e2e  # every case runs the CLI as a process


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database with a finished and a failed run, and the bad files the cases name."""
    root = tmp_path_factory.mktemp("bad-input")
    runs = RunIndex(Database.of(str(root / "runs.db")))
    for run_id, status in (("done", "finished"), ("broke", "failed")):
        runs.start(RunRecord(run_id=run_id, requirement="A blog", out_dir=str(root / run_id)))
        runs.update(run_id, status=status)
    # A run that is running: its row names a live process (this one), as the run's own would.
    runs.start(RunRecord(run_id="live", requirement="A blog", out_dir=str(root / "live")))
    asyncio.run(_stepped_run(root / "runs.db", runs))
    (root / "not-a-db").write_text("plain text")
    (root / "folder").mkdir()
    (root / "bad-scenario.json").write_text(json.dumps({"rules": 5}))
    (root / "empty.jsonl").write_text("\n")
    (root / "no-instruction.jsonl").write_text(json.dumps({"id": "a"}) + "\n")
    (root / "a-file").write_text("not a folder")
    # Folders a run cannot start from (run --from): one over the workspace cap (a sparse file: no
    # disk used), one whose only entry is a link out of it.
    (root / "huge").mkdir()
    with (root / "huge" / "big.bin").open("wb") as big:
        big.truncate(3 * 1024**3)
    (root / "links").mkdir()
    (root / "links" / "etc").symlink_to("/etc")
    (root / "one.jsonl").write_text(json.dumps({"id": "a", "instruction": "A blog", "ui_instruct": []}) + "\n")
    return root


async def _stepped_run(db: Path, runs: RunIndex) -> None:
    """A finished run with checkpoints of steps 0 to 2."""
    from webgen_agent.checkpoints.saver import open_checkpointer

    async with open_checkpointer(db, record_runs=False) as saver:
        for current in range(3):
            values = {"run_id": "stepped", "group_id": "", "requirement": "A blog", "current": current, "steps": []}
            await save_finished_run(saver, runs, values, steps=3)


@pytest.fixture(scope="module")
def scripted() -> ScriptedServer:
    """A model endpoint that answers (the scripted server): no case below gets as far as asking it."""
    scenario = Scenario.model_validate({"name": "bad-input", "rules": [{"model": "served-model", "content": "OK"}]})
    with ScriptedServer(scenario) as served:
        yield served


@pytest.fixture(scope="module")
def fakes(scripted: ScriptedServer) -> dict[str, str]:
    """Two servers that are not model endpoints (a web server's welcome page, binary junk), and the
    scripted one."""
    with fake_endpoint("html") as html, fake_endpoint("junk") as junk:
        yield {"html": html, "junk": junk, "served": scripted.base_url}


MODEL = ["--model", "m", "--base-url", DEAD]

CASES = {
    "resume: unknown run": (["resume", "nope", *MODEL, "--db", "{root}/runs.db"], "no run nope in"),
    "resume: finished run": (["resume", "done", *MODEL, "--db", "{root}/runs.db"], "has finished"),
    # The user's mistakes about runs: one line with advice that works for the run's status, no table.
    "resume: running run": (["resume", "live", *MODEL, "--db", "{root}/runs.db"], "run live is running (pid"),
    "fork: a step the run does not have": (
        ["fork", "stepped", "--step", "99", *MODEL, "--db", "{root}/runs.db"],
        "run stepped has no step 99: its steps are 0 to 2 (`webgen-agent history stepped` lists them)",
    ),
    "fork: a run without steps": (
        ["fork", "done", "--step", "0", *MODEL, "--db", "{root}/runs.db"],
        "run done has no step 0: it recorded none",
    ),
    "run: --run-id of a finished run": (
        ["run", "A blog", "--run-id", "done", *MODEL, "--db", "{root}/runs.db"],
        "run done already exists in {root}/runs.db (finished): choose another --run-id (`webgen-agent fork done",
    ),
    "run: --run-id of a failed run": (
        ["run", "A blog", "--run-id", "broke", *MODEL, "--db", "{root}/runs.db"],
        "(failed): `webgen-agent resume broke` continues it",
    ),
    "run: --run-id of a running run": (
        ["run", "A blog", "--run-id", "live", *MODEL, "--db", "{root}/runs.db"],
        "run live is running (pid",
    ),
    "fork: --run-id of a recorded run": (
        ["fork", "stepped", "--step", "1", "--run-id", "done", *MODEL, "--db", "{root}/runs.db"],
        "run done already exists",
    ),
    "fork: unknown run": (["fork", "nope", "--step", "0", *MODEL, "--db", "{root}/runs.db"], "no run nope in"),
    "history: unknown run": (["history", "nope", "--db", "{root}/runs.db"], "no run nope in"),
    "report: unknown run": (["report", "nope", "--db", "{root}/runs.db"], "no run nope"),
    "ship: unknown run": (["ship", "nope", "--out", "{root}/x.zip", "--db", "{root}/runs.db"], "no run nope"),
    "runs: missing database": (["runs", "--db", "{root}/typo.db"], "no database at"),
    "history: missing database": (["history", "done", "--db", "{root}/typo.db"], "no database at"),
    "resume: missing database": (["resume", "done", *MODEL, "--db", "{root}/typo.db"], "no database at"),
    "runs: a folder": (["runs", "--db", "{root}/folder"], "is a folder"),
    "runs: not SQLite": (["runs", "--db", "{root}/not-a-db"], "not an SQLite database"),
    "runs: unreachable PostgreSQL": (["runs", "--db", "postgresql://u:pw@127.0.0.1:1/x"], "cannot be reached"),
    "run: --db in a folder that is not there": (
        ["run", "A blog", "--model", "served-model", "--base-url", "{served}", "--db", "{root}/nodir/sub/x.db"],
        "nodir/sub does not exist (a mistyped --db?) (for a new database there, create the folder first: mkdir -p",
    ),
    # run --from: a folder the run cannot start from, refused before any model is asked.
    "run: --from a missing folder": (
        ["run", "A blog", "--from", "{root}/nope", *MODEL, "--db", "{root}/new.db"],
        "--from {root}/nope: no such folder",
    ),
    "run: --from a file": (
        ["run", "A blog", "--from", "{root}/a-file", *MODEL, "--db", "{root}/new.db"],
        "--from {root}/a-file is a file, not a folder",
    ),
    "run: --from a folder over the workspace cap": (
        ["run", "A blog", "--from", "{root}/huge", *MODEL, "--db", "{root}/new.db"],
        "over the workspace cap of 2,048 MB",
    ),
    "run: --from a folder of links out of it": (
        ["run", "A blog", "--from", "{root}/links", *MODEL, "--db", "{root}/new.db"],
        "--from {root}/links: no files to start from (1 symbolic link(s), never followed)",
    ),
    "run: --from with --scaffold": (
        ["run", "A blog", "--from", "{root}/folder", "--scaffold", "static-pages", *MODEL, "--db", "{root}/new.db"],
        "--from (start_from) and --scaffold both say where the run starts",
    ),
    "run: empty requirement": (["run", "  ", *MODEL, "--db", "{root}/new.db"], "the requirement is empty"),
    "run: unreachable endpoint": (["run", "A blog", *MODEL, "--db", "{root}/new.db"], "connection refused"),
    # Something answers at --base-url, but not as a model endpoint: refused before a run starts.
    **{
        f"{command}: {kind} at the endpoint": (
            [*argv, "--model", "m", "--base-url", "{" + kind + "}", "--db", db],
            "is not an OpenAI-compatible endpoint: it answered " + answered,
        )
        for kind, answered in (("html", "an HTML page ('Welcome to nginx!')"), ("junk", "bytes that are not HTTP"))
        for command, argv, db in (
            ("run", ["run", "A blog", "--out", "{root}/b"], "{root}/new.db"),
            ("resume", ["resume", "broke"], "{root}/runs.db"),
            ("fork", ["fork", "stepped", "--step", "1"], "{root}/runs.db"),
            ("rollout", ["rollout", "--data", "{root}/one.jsonl", "--out", "{root}/b"], "{root}/new.db"),
            ("bench", ["bench", "--data", "{root}/one.jsonl", "--out", "{root}/b"], "{root}/new.db"),
        )
    },
    # An output path nothing can be written to: refused before a model is asked or a run recorded.
    **{
        f"{command}: --out {where}": (
            [*argv, "--out", path],
            problem,
        )
        for where, path, problem in (
            ("under a file", "{root}/a-file/sub", "a-file is a file, not a folder"),
            ("in /proc", "/proc/webgen/out", "cannot write in /proc"),
        )
        for command, argv in (
            ("run", ["run", "A blog", "--model", "served-model", "--base-url", "{served}", "--db", "{root}/new.db"]),
            (
                "fork",
                [
                    "fork",
                    "done",
                    "--step",
                    "0",
                    "--model",
                    "served-model",
                    "--base-url",
                    "{served}",
                    "--db",
                    "{root}/runs.db",
                ],
            ),
            ("export", ["export", "--format", "sft", "--include-unfinished", "--db", "{root}/runs.db"]),
            ("ship", ["ship", "done", "--db", "{root}/runs.db"]),
            ("report", ["report", "done", "--db", "{root}/runs.db"]),
            ("bench", ["bench", "--data", "{root}/one.jsonl", "--model", "served-model", "--base-url", "{served}"]),
        )
    },
    "scripted-server: bad scenario": (
        ["scripted-server", "--scenario", "{root}/bad-scenario.json"],
        "name: Field required",
    ),
    "bench: empty data file": (["bench", "--data", "{root}/empty.jsonl", "--out", "{root}/b", *MODEL], "no records"),
    "bench: record missing a field": (
        ["bench", "--data", "{root}/no-instruction.jsonl", "--out", "{root}/b", *MODEL],
        "instruction: Field required",
    ),
    "export: nothing finished": (
        ["export", "--format", "sft", "--out", "{root}/o.jsonl", "--db", "{root}/runs.db", "--groups", "g"],
        "no runs",
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_bad_input_is_one_line_and_exit_2(
    inputs: Path, fakes: dict[str, str], scripted: ScriptedServer, case: str
) -> None:
    argv, expected = CASES[case]
    result = cli(*(arg.format(root=inputs, **fakes) for arg in argv))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert expected.format(root=inputs) in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    # Nothing is created by a command that failed on its input.
    assert not (inputs / "typo.db").exists() and not (inputs / "new.db").exists() and not (inputs / "b").exists()
    assert not (inputs / "o.jsonl").exists() and not (inputs / "x.zip").exists() and not (inputs / "nodir").exists()
    assert len(RunIndex(Database.of(str(inputs / "runs.db"))).list()) == 4  # nothing recorded
    assert scripted.requests == []  # no model was asked: nothing spent


def test_export_of_unfinished_runs_names_the_flag(inputs: Path, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    RunIndex(Database.of(str(db))).start(RunRecord(run_id="r", requirement="A blog", out_dir=str(tmp_path / "r")))
    result = cli("export", "--format", "sft", "--out", str(tmp_path / "o.jsonl"), "--db", str(db))
    assert result.returncode == 2
    assert "--include-unfinished" in result.stderr and "1 running" in result.stderr
    assert not (tmp_path / "o.jsonl").exists()
