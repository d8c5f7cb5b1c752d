"""Checks before a run: a dead endpoint or database is one line at once, and `doctor` says what to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fake_endpoints import fake_endpoint
from tests.test_cli import cli
from webgen_agent.apps.checks import database_check, first_failure
from webgen_agent.apps.probes import endpoint_checks
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.database import Database
from webgen_agent.core.context import AgentContext, Settings


@pytest.fixture(scope="module")
def served_model() -> str:
    """A real OpenAI-compatible server (the scripted one) that lists the model ``served-model``."""
    scenario = Scenario.model_validate({"name": "doctor", "rules": [{"model": "served-model", "content": "OK"}]})
    with ScriptedServer(scenario) as server:
        yield server.base_url


@pytest.mark.parametrize(
    ("base_url", "reason"),
    [("http://127.0.0.1:9/v1", "connection refused"), ("http://no-such-host.invalid/v1", "unknown host")],
)
@pytest.mark.e2e
def test_an_unreachable_endpoint_stops_run_in_one_line_and_records_nothing(tmp_path: Path, base_url: str, reason: str):
    db = tmp_path / "runs.db"
    result = cli("run", "A blog", "--model", "m", "--base-url", base_url, "--db", str(db), "--out", str(tmp_path / "o"))
    assert result.returncode == 2, result.stderr
    assert reason in result.stderr and base_url in result.stderr and "--base-url" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""  # no progress table, no run id
    assert not db.exists() and not (tmp_path / "o").exists()


@pytest.mark.e2e
def test_an_unreachable_database_stops_run_in_one_line(tmp_path: Path, served_model: str):
    url = "postgresql://user:secret-pw@127.0.0.1:1/webgen"
    result = cli("run", "A blog", "--model", "served-model", "--base-url", served_model, "--db", url)
    assert result.returncode == 2, result.stderr
    assert "database" in result.stderr and "cannot be reached" in result.stderr
    assert "secret-pw" not in result.stderr  # the URL is shown masked
    assert len(result.stderr.strip().splitlines()) == 1


async def test_endpoint_checks_find_the_model_listed_or_name_the_listed_ones(served_model: str):
    good = Settings(model="served-model", base_url=served_model).to_context()
    assert first_failure(await endpoint_checks(good)) is None
    typo = Settings(model="servd-model", base_url=served_model).to_context()
    checks = await endpoint_checks(typo, deep=True)
    failure = first_failure(checks)
    assert failure is not None and "servd-model" in failure.detail and "served-model" in failure.detail
    # Before a run it is only a warning: some gateways serve models they do not list.
    assert first_failure(await endpoint_checks(typo)) is None


@pytest.mark.parametrize("kind", ["folder", "text file"])
async def test_a_database_path_that_is_not_a_database_is_named(tmp_path: Path, kind: str):
    target = tmp_path / "db"
    if kind == "folder":
        target.mkdir()
    else:
        target.write_text("not sqlite")
    check = await database_check(Database.of(str(target)))
    assert not check.ok and str(target) in check.detail


async def test_a_new_database_is_not_created_by_the_check(tmp_path: Path):
    target = tmp_path / "runs.db"
    check = await database_check(Database.of(str(target)))
    assert check.ok and not target.exists()


async def test_a_database_in_a_folder_that_is_not_there_is_refused(tmp_path: Path):
    """A mistyped --db folder is not made: the run would land in a new database that `runs` does not read."""
    target = tmp_path / "nodir" / "sub" / "runs.db"
    check = await database_check(Database.of(str(target)))
    assert check.failed and "does not exist (a mistyped --db?)" in check.detail
    assert f"mkdir -p {target.parent}" in check.fix and not (tmp_path / "nodir").exists()


@pytest.mark.e2e
def test_doctor_prints_a_table_with_a_fix_per_failing_line(tmp_path: Path):
    result = cli("doctor", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--db", str(tmp_path / "x.db"))
    assert result.returncode == 1
    for name in ("endpoint", "database", "chromium", "node", "npm"):
        assert name in result.stdout
    assert "connection refused" in result.stdout and "start the server" in result.stdout
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize(
    ("kind", "answered"), [("html", "an HTML page ('Welcome to nginx!')"), ("junk", "bytes that are not HTTP")]
)
@pytest.mark.e2e
def test_doctor_refuses_a_server_that_is_not_a_model_endpoint(tmp_path: Path, kind: str, answered: str):
    with fake_endpoint(kind) as url:
        result = cli("doctor", "--model", "m", "--base-url", url, "--db", str(tmp_path / "x.db"), "--no-sandbox")
    assert result.returncode == 1, result.stdout
    failing = [line for line in result.stdout.splitlines() if line.startswith("FAIL ")]
    assert failing and "is not an OpenAI-compatible endpoint: it answered " + answered in failing[0], result.stdout
    # No row of the endpoint claims what it could not show: a chat answer, images, structured output.
    for row in result.stdout.splitlines():
        assert not any(name in row and "ok" in row for name in ("chat", "images", "structured output"))


async def test_a_page_answering_chat_completions_fails_the_chat_probe(served_model: str):
    """A listing alone is not enough: doctor asks each role a real question, in the OpenAI shape."""
    good = Settings(model="served-model", base_url=served_model).to_context()
    checks = await endpoint_checks(good, deep=True)
    assert [c.name for c in checks if c.name.endswith(("chat", "images"))] == [
        "coder chat",
        "vlm chat",
        "vlm images",
        "feedback chat",
    ]
    assert first_failure(checks) is None
    with fake_endpoint("html") as url:
        page = Settings(model="m", base_url=url).to_context()
        failure = first_failure(await endpoint_checks(page, deep=True))
    assert failure is not None and "HTML page" in failure.detail


def test_a_host_without_sandbox_cgroups_is_a_warning_naming_what_is_lost(monkeypatch):
    import webgen_agent.apps.doctor as doctor
    from webgen_agent.core.context import SandboxSettings

    context = AgentContext.model_validate(
        {
            role: {"model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"}
            for role in ("coder", "vlm", "feedback")
        }
        | {"sandbox": SandboxSettings()}
    )
    monkeypatch.setattr(doctor, "limit_warnings", lambda settings: ["No memory or cpu cgroup can be made here ..."])
    check = doctor._limits_check(context)
    assert not check.ok and not check.failed and "memory" in check.detail
    monkeypatch.setattr(doctor, "limit_warnings", lambda settings: [])
    assert doctor._limits_check(context).ok
