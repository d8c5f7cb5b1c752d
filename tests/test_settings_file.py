"""Settings where users keep them: a .env file in the working folder, and a run's own recorded models,
so that resume and fork need no model flags again (flags and variables given now still win)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_endpoints import fake_endpoint
from webgen_agent.checkpoints.runs import RunIndex, RunRecord
from webgen_agent.core.context import Settings
from webgen_agent.graph.api import recorded_settings

DEAD = "http://127.0.0.1:9/v1"


def cli_in(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """The command line run in ``folder``, with no model or endpoint variable of this process."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "WEBGEN_"))}
    return subprocess.run(
        [sys.executable, "-m", "webgen_agent", *args],
        cwd=folder,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_run_records_its_models_and_never_a_key():
    context = Settings(model="m", base_url=DEAD, api_key="sk-secret-key", coder_temperature=0.3).to_context()
    recorded = recorded_settings(context)
    assert recorded["models"]["coder"] == {
        "model": "m",
        "base_url": DEAD,
        "temperature": 0.3,
        "top_p": None,
        "fallback_model": "",
        "fallback_base_url": "",
    }
    assert "sk-secret-key" not in json.dumps(recorded) and "api_key" not in json.dumps(recorded)


@pytest.mark.e2e  # the command line as a process
def test_dotenv_in_the_working_folder_is_read(tmp_path: Path):
    with fake_endpoint("html") as url:
        (tmp_path / ".env").write_text(f"OPENAI_BASE_URL={url}\nWEBGEN_MODEL=m\nWEBGEN_DB={tmp_path}/mine.db\n")
        result = cli_in(tmp_path, "run", "A blog")
    # No flag named the endpoint or the model: .env did, and the check asked that endpoint.
    assert result.returncode == 2 and f"{url}/models is not an OpenAI-compatible endpoint" in result.stderr
    assert not (tmp_path / "mine.db").exists()


@pytest.mark.e2e
def test_resume_and_fork_need_no_model_flags_and_flags_still_win(tmp_path: Path):
    db = tmp_path / "runs.db"
    with fake_endpoint("html") as url:
        context = Settings(model="recorded-model", base_url=url).to_context()
        runs = RunIndex(db)
        runs.start(
            RunRecord(
                run_id="r",
                requirement="A blog",
                out_dir=str(tmp_path / "r"),
                settings=json.dumps(recorded_settings(context)),
            )
        )
        runs.update("r", status="failed")
        asyncio.run(_one_step(db))
        outcomes = {
            command: (
                cli_in(tmp_path, *argv, "--db", str(db)),
                cli_in(tmp_path, *argv, "--db", str(db), "--base-url", DEAD),
            )
            for command, argv in (("resume", ["resume", "r"]), ("fork", ["fork", "r", "--step", "0"]))
        }
    for command, (recorded, given) in outcomes.items():
        # Without flags the recorded endpoint is asked (here: a web page, so one line naming it) ...
        assert recorded.returncode == 2, (command, recorded.stderr)
        assert f"{url}/models is not an OpenAI-compatible" in recorded.stderr, (command, recorded.stderr)
        # ... and a flag given now beats it.
        assert given.returncode == 2 and DEAD in given.stderr and "connection refused" in given.stderr, command


async def _one_step(db: Path) -> None:
    """A checkpoint of step 0 for the run ``r`` (its row exists already)."""
    from tests.helpers import checkpoint_of
    from webgen_agent.checkpoints.saver import open_checkpointer

    values = {"run_id": "r", "group_id": "", "requirement": "A blog", "current": 0, "steps": []}
    async with open_checkpointer(db, record_runs=False) as saver:
        config = {"configurable": {"thread_id": "r", "checkpoint_ns": ""}}
        await saver.aput(config, checkpoint_of(values), {"source": "loop", "step": 1, "parents": {}}, {})


def test_working_files_stay_in_one_place_whatever_the_database(tmp_path: Path, monkeypatch):
    """A --db elsewhere gets no dependency cache or process registry beside it: they are the machine's
    state folder's (WEBGEN_STATE_DIR, else .webgen in the working folder)."""
    from webgen_agent.nodes.local_dirs import deps_cache_for, registry_for

    monkeypatch.delenv("WEBGEN_DEPS_CACHE", raising=False)
    monkeypatch.delenv("WEBGEN_STATE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "elsewhere" / "runs.db"
    assert deps_cache_for(db) == tmp_path / ".webgen" / "deps-cache"
    assert registry_for(db).path == tmp_path / ".webgen" / "processes.jsonl"
    monkeypatch.setenv("WEBGEN_STATE_DIR", str(tmp_path / "state"))
    assert deps_cache_for(db) == tmp_path / "state" / "deps-cache"
