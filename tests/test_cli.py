"""The command line as a user meets it: clear errors before anything runs, preview of a folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "WEBGEN_"))}
    return subprocess.run(
        [sys.executable, "-m", "webgen_agent", *args],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.e2e
def test_missing_model_is_a_one_line_error_before_anything_runs(tmp_path):
    result = cli("run", "A blog", "--db", str(tmp_path / "db.sqlite"), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert "No coder model" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.e2e
def test_missing_endpoint_names_the_flag_and_variable(tmp_path):
    result = cli("run", "A blog", "--model", "m", "--db", str(tmp_path / "db.sqlite"))
    assert result.returncode == 2
    assert "--base-url" in result.stderr and "OPENAI_BASE_URL" in result.stderr


@pytest.mark.e2e
def test_an_unknown_scaffold_is_a_one_line_error_naming_the_choices(tmp_path):
    result = cli(
        "run",
        "A blog",
        "--scaffold",
        "wordpress",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--db",
        str(tmp_path / "db.sqlite"),
        "--out",
        str(tmp_path / "out"),
    )
    assert result.returncode == 2
    assert "unknown scaffold 'wordpress'" in result.stderr and "react-router, static-pages" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.e2e
def test_preview_screenshots_a_static_folder_and_reports_a_broken_one(tmp_path, chromium_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<html><body><h1>Hello preview</h1></body></html>")
    shot = tmp_path / "shot.png"
    ok = cli("preview", str(site), "--screenshot", str(shot), env={"WEBGEN_CHROMIUM": chromium_path})
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert shot.read_bytes().startswith(b"\x89PNG")
    assert json.loads(ok.stdout)["title"] == ""

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "index.html").write_text("<html><body><script>throw new Error('kaboom')</script></body></html>")
    bad = cli("preview", str(broken), "--screenshot", str(tmp_path / "b.png"), env={"WEBGEN_CHROMIUM": chromium_path})
    assert bad.returncode == 1
    report = json.loads(bad.stdout)
    assert "kaboom" in (report["render_error"] or "")


@pytest.mark.e2e
def test_preview_leaves_the_users_folder_as_it_was(tmp_path, chromium_path):
    project = tmp_path / "project"
    project.mkdir()
    server = (
        "require('http').createServer((q, r) => r.end('<h1>Served</h1>')).listen(process.env.PORT || 3000, '127.0.0.1')"
    )
    (project / "server.js").write_text(server)
    (project / "package.json").write_text(
        json.dumps({"name": "p", "version": "1.0.0", "scripts": {"dev": "node server.js"}, "dependencies": {}})
    )
    before = sorted(p.name for p in project.iterdir())
    result = cli(
        "preview", str(project), "--screenshot", str(tmp_path / "p.png"), env={"WEBGEN_CHROMIUM": chromium_path}
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.name for p in project.iterdir()) == before  # no node_modules, lockfile or marker


@pytest.mark.e2e
def test_offline_pages_is_recorded_with_the_run(tmp_path):
    """``--offline-pages`` reaches the run's context (its captures and GUI agents) and its record (resume)."""
    from webgen_agent.apps.scripted.server import ScriptedServer
    from webgen_agent.apps.scripted.views import Scenario
    from webgen_agent.checkpoints.runs import RunIndex
    from webgen_agent.core.context import AgentContext

    db = tmp_path / "db.sqlite"
    failing = Scenario.model_validate({"name": "down", "rules": [{"fault": {"status": 500, "message": "down"}}]})
    with ScriptedServer(failing) as server:
        flags = ["--model", "m", "--base-url", server.base_url, "--patience", "1", "--no-sandbox", "--db", str(db)]
        result = cli("run", "A blog", "--run-id", "offline", "--offline-pages", *flags, "--out", str(tmp_path / "o"))
    assert result.returncode == 1, result.stderr  # the failing model stops it after the run is recorded
    assert RunIndex(db).settings("offline")["offline_pages"] is True
    assert AgentContext.model_fields["offline_pages"].default is False  # public subresources by default
