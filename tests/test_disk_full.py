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
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import kept_coder_replies, scripted_models, the_one_error, until_checkpoints
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


def run_until_the_disk_fills(run_id: str, flags: list[str], out: Path, disk: Path, env: dict[str, str], log: Path):
    """Run the CLI; once step 0 is checkpointed (its coder turn recorded), fill ``disk``. Returns the
    run's one error line, all it printed, and the file that filled the disk (remove it to free the space)."""
    with log.open("w") as written:
        proc = subprocess.Popen(
            [CLI, "run", REQUIREMENT, "--run-id", run_id, "--out", str(out), *flags],
            env=env,
            stdout=written,
            stderr=subprocess.STDOUT,
        )
        try:
            until_checkpoints(proc, flags[flags.index("--db") + 1], run_id, 3, timeout_s=300, log=log)
            filler = fill(disk)
            proc.wait(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
    output = log.read_text()
    assert proc.returncode == 1, output
    return the_one_error(output), output, filler


def resume_asks_only_for_the_rest(
    server: ScriptedServer, run_id: str, db: str, flags: list[str], env: dict[str, str], kept: list
) -> None:
    """``resume`` finishes the run, and the steps kept before the stop were not asked again."""
    coder_before = sum(r.model == "scripted-coder" for r in server.requests)
    replies_kept = kept_coder_replies(db, run_id)
    resumed = subprocess.run([CLI, "resume", run_id, *flags[:-2]], env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    coder_after = sum(r.model == "scripted-coder" for r in server.requests)
    record = RunIndex(db).get(run_id)
    assert record is not None and record.status == "finished"
    steps = asyncio.run(final_state(db, run_id))["steps"]
    assert [s["completion"] for s in steps[: len(kept)]] == [s["completion"] for s in kept]
    assert coder_after - coder_before == len(steps) - len(kept) - replies_kept


@pytest.mark.e2e
def test_a_full_disk_stops_the_run_in_one_line_and_resume_continues(small_disk, chromium_path):
    db, out = small_disk / "webgen.db", small_disk / "runs" / "d"
    env = {**os.environ, "WEBGEN_CHROMIUM": chromium_path, "COLUMNS": "200"}
    with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        flags = [*scripted_models(server.base_url), "--db", str(db), "--max-steps", "3"]
        line, _, filler = run_until_the_disk_fills("d", flags, out, small_disk, env, small_disk.parent / "run.log")
        assert f"no space left on the disk mounted at {small_disk}" in line, line
        assert "webgen-agent resume d" in line
        # The checkpoint before the failed write is intact and readable.
        kept = asyncio.run(final_state(str(db), "d"))["steps"]
        assert kept

        filler.unlink()
        resume_asks_only_for_the_rest(server, "d", str(db), flags, env, kept)
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
    env = {**os.environ, "WEBGEN_CHROMIUM": chromium_path, "COLUMNS": "200"}
    with ScriptedServer(Scenario.load(scenario_path("landing"))) as server:
        flags = [*scripted_models(server.base_url), "--db", db, "--max-steps", "3"]
        line, output, filler = run_until_the_disk_fills(
            "p", flags, tmp_path / "runs" / "p", disk, env, tmp_path / "run.log"
        )
        assert "no space left on the PostgreSQL server's disk" in line and "webgen-agent resume p" in line, line
        assert "unreachable" not in output, "a full disk is not an outage to wait out"
        # The checkpoint before the failed write is intact and readable.
        kept = asyncio.run(final_state(db, "p"))["steps"]
        assert kept

        filler.unlink()
        resume_asks_only_for_the_rest(server, "p", db, flags, env, kept)
