"""Embedding: the public API, the parent-graph example, progress events, and a graph that never prints.

Both runs use the small static-site scenario (``landing``: two coder steps, no npm) for speed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import psutil
import pytest

import webgen_agent

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "embed_in_parent_graph.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("embed_in_parent_graph", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # typing.get_type_hints resolves the state's annotations through it
    spec.loader.exec_module(module)
    return module


def processes_under(folder: Path) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cwd"]):
        with contextlib.suppress(psutil.Error):
            if (proc.info["cwd"] or "").startswith(str(folder)):
                found.append(proc.pid)
    return found


def test_public_api_is_reexported_lazily() -> None:
    for name in (
        "compile_graph",
        "build_graph",
        "run_requirement",
        "RunResult",
        "InputState",
        "OutputState",
        "AgentContext",
        "ModelSettings",
        "ProgressEvent",
        "Resources",
        "use_resources",
        "open_checkpointer",
        "resume_run",
        "ReviewRequest",
        "ReviewDecision",
    ):
        assert name in webgen_agent.__all__ and getattr(webgen_agent, name) is not None
    # The one list (the package's TYPE_CHECKING imports) is what resolves: every public name imports.
    assert len(webgen_agent.__all__) == len(set(webgen_agent.__all__)) == 20
    for name in webgen_agent.__all__:
        assert getattr(webgen_agent, name) is not None and name in dir(webgen_agent)
    from webgen_agent.graph.api import run_requirement
    from webgen_agent.graph.builder import compile_graph

    assert webgen_agent.run_requirement is run_requirement and webgen_agent.compile_graph is compile_graph
    with pytest.raises(AttributeError):
        webgen_agent.no_such_name  # noqa: B018


def test_example_runs_the_agent_as_a_node_of_a_parent_graph(
    tmp_path: Path, chromium_path: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEBGEN_CHROMIUM", chromium_path)
    example = load_example()
    code = example.main(["a neighbourhood coffee shop called Bean There", "--out", str(tmp_path), "--scripted"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    lines = printed.splitlines()
    # The agent's progress events came through the parent's stream, tagged with the subgraph node.
    progress = [line for line in lines if line.startswith("[website] ")]
    nodes = [line.split()[3] for line in progress]
    assert nodes == [
        "generator",
        "executor",
        "screenshot_judge",
        "critic",
        "refiner",
        "executor",
        "screenshot_judge",
        "gui_tester",
        "finalize",
    ]
    assert "screenshot 3/5" in progress[2] and "GUI 5/5" in progress[7]
    assert "requirement: Build a one-page website for a neighbourhood coffee shop called Bean There." in printed
    review = next(line for line in lines if line.startswith("review: "))
    assert "step 1 of 2, screenshot 5/5, GUI 5/5" in review
    site = tmp_path / "site-run" / "site" / "index.html"
    assert "Show opening hours" in site.read_text()
    assert processes_under(tmp_path) == []


async def test_run_requirement_reports_progress_and_never_prints(
    tmp_path: Path, chromium_path: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from webgen_agent.apps.demo import scenario_path, scripted_context
    from webgen_agent.apps.scripted.server import ScriptedServer
    from webgen_agent.apps.scripted.views import Scenario

    monkeypatch.setenv("WEBGEN_CHROMIUM", chromium_path)
    events: list[dict] = []
    capfd.readouterr()
    async with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        context = scripted_context(server.base_url, max_steps=6, runs_dir=str(tmp_path / "runs"))
        result = await webgen_agent.run_requirement(
            "A one-page website for a coffee shop with its menu and a button that reveals the opening hours.",
            context=context,
            run_id="embedded",
            db_path=tmp_path / "webgen.db",
            on_progress=events.append,
        )
    captured = capfd.readouterr()
    # Neither the graph nor anything it started (static server, Chromium, GUI agent) wrote to stdout.
    assert captured.out == ""

    assert result.status == "finished" and result.chosen_step == 1
    assert isinstance(result, webgen_agent.RunResult)
    for event in events:
        webgen_agent.ProgressEvent.model_validate(event)
    ends = [e for e in events if e["phase"] == "end"]
    assert [(e["node"], e["step"]) for e in ends] == [
        ("generator", 0),
        ("executor", 0),
        ("screenshot_judge", 0),
        ("critic", 0),
        ("refiner", 1),
        ("executor", 1),
        ("screenshot_judge", 1),
        ("gui_tester", 1),
        ("finalize", 1),
    ]
    starts = [e for e in events if e["phase"] == "start"]
    assert len(starts) == len(ends)
    judged = {e["step"]: e["screenshot_score"] for e in ends if e["node"] == "screenshot_judge"}
    assert judged == {0: 3, 1: 5}
    gui = next(e for e in ends if e["node"] == "gui_tester")
    assert gui["gui_score"] == 5 and gui["input_tokens"] > 0 and gui["seconds"] > 0
    assert all(e["seconds"] >= 0 for e in ends)
    assert processes_under(tmp_path) == []


def test_an_embedded_run_is_recorded_for_runs_history_report_and_export(
    tmp_path: Path, chromium_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example's host opens the public ``open_checkpointer`` without asking for recording: its
    run still shows in ``runs``, ``history``, ``report`` and ``export`` like a CLI run."""
    from tests.studio import cli

    monkeypatch.setenv("WEBGEN_CHROMIUM", chromium_path)
    example = load_example()
    assert example.main(["a coffee shop", "--out", str(tmp_path), "--scripted"]) == 0
    db = str(tmp_path / "webgen.db")
    listed = cli("runs", db=db)
    assert listed.returncode == 0 and "pipeline-" in listed.stdout, listed.stdout + listed.stderr
    thread = next(word for word in listed.stdout.split() if word.startswith("pipeline-"))
    assert "finished" in listed.stdout
    history = cli("history", thread, db=db)
    assert history.returncode == 0 and "refiner" in history.stdout, history.stdout + history.stderr
    report = cli("report", thread, "--out", str(tmp_path / "report.html"), db=db)
    assert report.returncode == 0 and (tmp_path / "report.html").is_file(), report.stdout + report.stderr
    exported = cli("export", "--format", "trajectory", "--out", str(tmp_path / "t.jsonl"), db=db)
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert (tmp_path / "t.jsonl").read_text().count("\n") >= 1


def test_the_example_uses_only_the_public_api() -> None:
    import ast

    tree = ast.parse(EXAMPLE.read_text())
    ours = [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("webgen_agent")
    ]
    ours += [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith("webgen_agent")
    ]
    assert ours == ["webgen_agent"]
