"""A disk that fills mid-run is an honest stop: one line naming the disk, the checkpoint before it
intact, and ``resume`` continues once space is free. Run on a small tmpfs holding the run database
and the runs folder, and on one holding a PostgreSQL server's data folder (mounting one needs root;
elsewhere the tests are skipped)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import checkpoint_count, scripted_models
from tests.postgres import PostgresCluster
from tests.test_costs import REQUIREMENT
from webgen_agent.apps.demo import scenario_path
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.runs import RunIndex

CLI = str(Path(sys.executable).parent / "webgen-agent")


@contextlib.contextmanager
def _tmpfs(disk: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``disk``, unmounted at the end (skips the test where it cannot be)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB tmpfs, unmounted at the end."""
    with _tmpfs(tmp_path / "disk", "48m") as disk:
        yield disk


def fill(disk: Path) -> Path:
    """Write a file until the disk is full; returns it (remove it to free the space)."""
    filler = disk / "filler"
    with filler.open("wb") as out:
        try:
            while True:
                out.write(b"\0" * (1 << 20))
                out.flush()
        except OSError:
            pass
    return filler


@pytest.mark.e2e
def test_a_full_disk_stops_the_run_in_one_line_and_resume_continues(small_disk, chromium_path):
    db, out = small_disk / "webgen.db", small_disk / "runs" / "d"
    env = {**os.environ, "WEBGEN_CHROMIUM": chromium_path, "COLUMNS": "200"}
    with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        flags = [*scripted_models(server.base_url), "--db", str(db), "--max-steps", "3"]
        log = small_disk.parent / "run.log"
        with log.open("w") as written:
            proc = subprocess.Popen(
                [CLI, "run", REQUIREMENT, "--run-id", "d", "--out", str(out), *flags],
                env=env,
                stdout=written,
                stderr=subprocess.STDOUT,
            )
            try:
                # Step 0 is checkpointed (its coder turn recorded); then the disk fills.
                deadline = time.monotonic() + 300
                while not (db.exists() and checkpoint_count(db, "d") >= 3):
                    assert proc.poll() is None, log.read_text()
                    assert time.monotonic() < deadline, "the run never got under way"
                    time.sleep(0.05)
                filler = fill(small_disk)
                proc.wait(timeout=300)
            finally:
                if proc.poll() is None:
                    proc.kill()
        output = log.read_text()
        assert proc.returncode == 1, output
        assert output.count("error:") == 1 and "Traceback" not in output, output
        line = output.split("error:")[1].strip()
        assert f"no space left on the disk mounted at {small_disk}" in line, output
        assert "webgen-agent resume d" in line
        # The checkpoint before the failed write is intact and readable.
        kept = asyncio.run(final_state(str(db), "d"))["steps"]
        assert kept

        filler.unlink()
        coder_before = sum(r.model == "scripted-coder" for r in server.requests)
        resumed = subprocess.run(
            [CLI, "resume", "d", *flags[:-2]], env=env, capture_output=True, text=True, timeout=300
        )
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        coder_after = sum(r.model == "scripted-coder" for r in server.requests)
    record = RunIndex(db).get("d")
    assert record is not None and record.status == "finished"
    steps = asyncio.run(final_state(str(db), "d"))["steps"]
    # The steps kept before the stop were not asked again: the resume asked only for the rest.
    assert [s["completion"] for s in steps[: len(kept)]] == [s["completion"] for s in kept]
    assert coder_after - coder_before == len(steps) - len(kept)
    assert json.loads((out / "run.json").read_text())["status"] == "finished"


@pytest.fixture
def small_postgres() -> Iterator[tuple[PostgresCluster, Path]]:
    """A PostgreSQL server of its own whose data folder is on a 96 MiB tmpfs (``initdb`` takes about
    40 MiB of it); the server is stopped and the tmpfs unmounted at the end."""
    from tests.postgres import postgres_bin

    bin_dir = postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql, or run scripts/setup.sh --test)")
    # Outside pytest's own folders, which the server's user (postgres) cannot enter.
    root = Path(tempfile.mkdtemp(prefix="webgen-pgdisk-"))
    root.chmod(0o755)
    try:
        with _tmpfs(root / "disk", "96m") as disk:
            shutil.chown(disk, "postgres", "postgres")
            cluster = PostgresCluster(disk, bin_dir)
            cluster.start()
            try:
                yield cluster, disk
            finally:
                cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.e2e
def test_a_full_postgres_disk_stops_the_run_in_one_line_and_resume_continues(small_postgres, tmp_path, chromium_path):
    cluster, disk = small_postgres
    db = cluster.new_database()
    out = tmp_path / "runs" / "p"
    env = {**os.environ, "WEBGEN_CHROMIUM": chromium_path, "COLUMNS": "200"}
    with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        flags = [*scripted_models(server.base_url), "--db", db, "--max-steps", "3"]
        log = tmp_path / "run.log"
        with log.open("w") as written:
            proc = subprocess.Popen(
                [CLI, "run", REQUIREMENT, "--run-id", "p", "--out", str(out), *flags],
                env=env,
                stdout=written,
                stderr=subprocess.STDOUT,
            )
            try:
                # Step 0 is checkpointed (its coder turn recorded); then the server's disk fills.
                deadline = time.monotonic() + 300
                while checkpoint_count(db, "p") < 3:
                    assert proc.poll() is None, log.read_text()
                    assert time.monotonic() < deadline, "the run never got under way"
                    time.sleep(0.05)
                filler = fill(disk)
                proc.wait(timeout=300)
            finally:
                if proc.poll() is None:
                    proc.kill()
        output = log.read_text()
        assert proc.returncode == 1, output
        assert output.count("error:") == 1 and "Traceback" not in output, output
        line = output.split("error:")[1].strip()
        assert "no space left on the PostgreSQL server's disk" in line and "webgen-agent resume p" in line, output
        assert "unreachable" not in output, "a full disk is not an outage to wait out"
        # The checkpoint before the failed write is intact and readable.
        kept = asyncio.run(final_state(db, "p"))["steps"]
        assert kept

        filler.unlink()
        coder_before = sum(r.model == "scripted-coder" for r in server.requests)
        resumed = subprocess.run(
            [CLI, "resume", "p", *flags[:-2]], env=env, capture_output=True, text=True, timeout=300
        )
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        coder_after = sum(r.model == "scripted-coder" for r in server.requests)
    record = RunIndex(db).get("p")
    assert record is not None and record.status == "finished"
    steps = asyncio.run(final_state(db, "p"))["steps"]
    assert [s["completion"] for s in steps[: len(kept)]] == [s["completion"] for s in kept]
    assert coder_after - coder_before == len(steps) - len(kept)
