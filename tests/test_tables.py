"""`runs` and `history` in an 80-column terminal (and piped, with COLUMNS): every run id and checkpoint
id whole, since every other command takes them; other columns are dropped or wrapped first."""

from __future__ import annotations

import asyncio

import pytest

from tests.test_cli import cli
from webgen_agent.graph.history import run_history

pytestmark = pytest.mark.e2e  # the command line as a process, on the session's demo run


@pytest.mark.parametrize("columns", [80, 100])
def test_ids_are_never_cut_and_lines_fit_the_width(demo_run, columns: int) -> None:
    result, base = demo_run
    db = str(base / "db" / "webgen.db")
    env = {"COLUMNS": str(columns)}
    listed = cli("runs", "--db", db, env=env)
    assert listed.returncode == 0, listed.stderr
    assert result.run_id in listed.stdout and "…" not in listed.stdout
    shown = cli("history", result.run_id, "--db", db, env=env)
    assert shown.returncode == 0, shown.stderr
    rows, _ = asyncio.run(run_history(result.run_id, db_path=db))
    assert rows and all(row.checkpoint_id in shown.stdout for row in rows)
    for output in (listed.stdout, shown.stdout):
        assert max(len(line) for line in output.splitlines()) <= columns, output
