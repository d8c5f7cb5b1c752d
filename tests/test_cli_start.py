"""The command line starts without the agent: what its modules import, and what its help shows.

Not timed (a loaded CI machine would make a timing flaky): the start-up figure is measured by
benchmarks/cli_start.py (docs/performance.md). These tests pin what makes it fast: the command
modules import the agent (LangGraph, model clients, browser, settings models) only inside the
commands that run it, and the commands that read a recorded run (``history``, ``report``) read its
checkpoints without the graph, the nodes, the model clients or the browser.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from webgen_agent.apps.cli.main import app

# Never imported to build the command line (its help included): each costs from 0.05 s to seconds.
HEAVY = (
    "langgraph",
    "langchain_core",
    "langchain_openai",
    "openai",
    "httpx",
    "browser_use",
    "playwright",
    "torch",
    "ray",
    "pydantic_settings",
    "webgen_agent.core.context",
    "webgen_agent.graph",
    "webgen_agent.nodes",
    "webgen_agent.tools",
)

_LOADED = """
import json, sys
argv = sys.argv[1:]
from webgen_agent.apps.cli.main import app
code = 0
if argv:
    try:
        app(argv, prog_name="webgen-agent")
    except SystemExit as exit:
        code = exit.code
print(json.dumps(sorted(sys.modules)))
sys.exit(code)
"""


def _modules_after(*argv: str) -> set[str]:
    """The modules a fresh process holds after importing the command line (and running ``argv``,
    which must succeed)."""
    done = subprocess.run([sys.executable, "-c", _LOADED, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY))


@pytest.mark.e2e  # the command line as a process (a second each)
@pytest.mark.parametrize(
    "argv",
    [(), ("--help",), ("runs", "--help"), ("history", "--help"), ("report", "--help"), ("run", "--help")],
    ids=["import", "help", "runs-help", "history-help", "report-help", "run-help"],
)
def test_the_command_line_starts_without_the_agent(argv: tuple[str, ...]) -> None:
    modules = _modules_after(*argv)
    assert "webgen_agent.apps.cli.main" in modules
    assert _heavy(modules) == []
    # Typer validates the values a command is given with pydantic; help needs none of it (Typer's
    # own flags, left at None, used to be coerced through it: apps/cli/base.py).
    assert "pydantic" not in modules


@pytest.mark.e2e  # the command line as a process
def test_listing_runs_imports_no_pydantic(tmp_path) -> None:
    """``runs`` on a real database reads the table without pydantic: Typer's coercion of ``--db``, the
    run records, the database check and the cost column are all pydantic-free."""
    from webgen_agent.checkpoints.database import Database
    from webgen_agent.checkpoints.runs import RunIndex, RunRecord

    db = tmp_path / "webgen.db"
    RunIndex(Database.of(str(db))).start(RunRecord(run_id="listed", requirement="A blog", out_dir=str(tmp_path)))
    done = subprocess.run(
        [sys.executable, "-c", _LOADED, "runs", "--json", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    *listing, loaded = done.stdout.splitlines()
    assert [json.loads(line)["run_id"] for line in listing] == ["listed"]
    modules = set(json.loads(loaded))
    assert "webgen_agent.checkpoints.runs" in modules
    assert _heavy(modules) == []
    assert "pydantic" not in modules


@pytest.mark.parametrize("spelling", ["WEBGEN_DB", "webgen_db", None])
def test_the_default_database_is_the_settings_one(monkeypatch, tmp_path, spelling: str | None) -> None:
    """The read commands find the database without the settings model: the same answer as it gives."""
    from webgen_agent.core.context import Settings
    from webgen_agent.core.names import DEFAULT_DB, database_from_environment

    monkeypatch.delenv("WEBGEN_DB", raising=False)
    if spelling:
        monkeypatch.setenv(spelling, str(tmp_path / "runs.db"))
    assert database_from_environment() == Settings().db
    assert database_from_environment() == (str(tmp_path / "runs.db") if spelling else str(DEFAULT_DB))


# Never imported to read a recorded run (``history``, ``report``): the graph, its nodes, the model
# clients and the browser. Reading a checkpoint needs LangGraph's checkpointer and serializer, which
# import LangChain's message and runnable classes; nothing else of LangGraph.
NOT_FOR_READING = (
    "langchain_openai",
    "openai",
    "httpx",
    "browser_use",
    "playwright",
    "torch",
    "ray",
    "langsmith",
    "langgraph_sdk",
    "webgen_agent.graph.api",
    "webgen_agent.graph.builder",
    "webgen_agent.nodes",
    "webgen_agent.tools.models",
    "webgen_agent.tools.browser",
)
CHECKPOINT_READING = ("langgraph.checkpoint", "langgraph.store")  # the saver and its serializer


@pytest.mark.e2e  # the command line as a process, on the session's demo run
@pytest.mark.parametrize("command", ["history", "report"])
def test_reading_a_recorded_run_loads_no_graph_models_or_browser(command: str, demo_run, tmp_path) -> None:
    result, base = demo_run
    argv = [command, result.run_id, "--db", str(base / "db" / "webgen.db")]
    if command == "report":
        argv += ["--out", str(tmp_path / "report.html")]
    modules = _modules_after(*argv)
    assert f"webgen_agent.apps.cli.{command}" in modules and "webgen_agent.checkpoints.saver" in modules
    assert sorted(m for m in modules if any(m == h or m.startswith(f"{h}.") for h in NOT_FOR_READING)) == []
    langgraph = [m for m in modules if m.startswith("langgraph.")]
    assert [m for m in langgraph if not m.startswith(CHECKPOINT_READING)] == []
    if command == "report":
        assert "score-timeline" in (tmp_path / "report.html").read_text()
    else:  # the report shows the settings' descriptions; history needs no settings model
        assert "webgen_agent.core.context" not in modules and "pydantic_settings" not in modules


def _command_names() -> list[str]:
    group = typer.main.get_command(app)
    return sorted(group.commands)  # type: ignore[attr-defined]


def test_every_command_is_covered() -> None:
    assert {"run", "runs", "history", "report", "bench", "rollout", "export", "doctor"} <= set(_command_names())


@pytest.mark.parametrize("command", [None, *_command_names()])
def test_no_flag_shows_a_type_in_help(command: str | None) -> None:
    argv = [command, "--help"] if command else ["--help"]
    result = CliRunner().invoke(app, argv, catch_exceptions=False, terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "--help" in result.output
    assert "<bool>" not in result.output
    if command == "runs":
        # The type column is there for options that take a value; only flags leave it empty.
        assert "--json " in result.output and "<str>" in result.output


@pytest.mark.e2e  # bound by processes and timeouts, not by the code (a fresh Python process importing the server's graph)
def test_the_servers_graph_import_leaves_model_clients_and_browser_use_for_the_first_run() -> None:
    """``langgraph dev`` warns when importing the graph (``webgen_agent.graph.studio``) takes over 3 s;
    openai and langchain-openai alone took seconds of it: they, and browser-use, are imported by the
    first run that calls a model or opens a GUI session, never by the import."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys; import webgen_agent.graph.studio; print(json.dumps(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    assert loaded & {"openai", "langchain_openai", "browser_use"} == set()


def _modules_after_error(*argv: str) -> tuple[set[str], str]:
    """The modules a fresh process held when ``argv`` ended in a user error (exit 2), and its stderr."""
    done = subprocess.run([sys.executable, "-c", _LOADED, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    return set(json.loads(done.stdout.splitlines()[-1])), done.stderr


@pytest.mark.e2e  # the command line as a process
@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["fork", "nope", "--step", "0", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"], "no run nope"),
        (["resume", "nope", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"], "no run nope"),
        (["ship", "nope", "--out", "{tmp}/x.zip"], "no run nope"),
        (["train", "--data", "{tmp}/missing.jsonl", "--model", "{tmp}", "--out", "{tmp}/o"], "missing.jsonl: no such"),
    ],
    ids=["fork", "resume", "ship", "train"],
)
def test_a_typo_is_answered_before_the_agent_loads(tmp_path, argv: list[str], said: str) -> None:
    """An unknown run or a missing file is checked before the graph, the model clients, the browser
    or torch load: the answer comes as fast as `history`'s."""
    from webgen_agent.checkpoints.runs import RunIndex, RunRecord

    db = tmp_path / "runs.db"
    RunIndex(db).start(RunRecord(run_id="other", requirement="A blog", out_dir=str(tmp_path / "other")))
    args = [arg.format(tmp=tmp_path) for arg in argv]
    modules, stderr = _modules_after_error(*args, *([] if argv[0] == "train" else ["--db", str(db)]))
    assert said in stderr
    assert sorted(m for m in modules if any(m == h or m.startswith(f"{h}.") for h in (*NOT_FOR_READING, "torch"))) == []
