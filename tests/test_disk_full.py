"""A disk that fills mid-run is an honest stop: one line naming the disk, the checkpoint before it
intact, and ``resume`` continues once space is free. Run on a small tmpfs holding the run database
and the runs folder (mounting one needs root; elsewhere the test is skipped)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import checkpoint_count, scripted_models
from tests.test_costs import REQUIREMENT
from webgen_agent.apps.demo import scenario_path
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.checkpoints.history import final_state
from webgen_agent.checkpoints.runs import RunIndex

CLI = str(Path(sys.executable).parent / "webgen-agent")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB tmpfs, unmounted at the end."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


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
