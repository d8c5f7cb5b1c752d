"""The suite's own rules hold: the e2e marker means what it says (tests/e2e_guard.py), and a shared
fixture's failure is reported once (tests/fixture_failures.py). Checked on a small suite run by a
real pytest in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.e2e_guard import e2e_fixtures, e2e_program

ROOT = Path(__file__).resolve().parent.parent

INNER_CONFTEST = """
import pytest

pytest_plugins = ["tests.e2e_guard", "tests.fixture_failures"]


@pytest.fixture(scope="session")
def chromium_path():
    return "/usr/bin/chromium"  # a stand-in: only its name matters to the guard


@pytest.fixture
def browser_user(chromium_path):
    return chromium_path


@pytest.fixture(scope="module")
def whole_run():
    raise RuntimeError("the scripted run broke at step 3")
"""

INNER_TESTS = """
import subprocess

import pytest


def test_unmarked_browser_test(browser_user):
    pass


@pytest.mark.e2e
def test_marked_browser_test(browser_user):
    pass


def test_unmarked_npm_test(tmp_path):
    subprocess.run([NPM], check=True)


def test_reads_the_run_first(whole_run):
    pass


def test_reads_the_run_second(whole_run):
    pass


def test_reads_the_run_third(whole_run):
    pass
"""


def test_e2e_fixtures_and_programs_are_recognised():
    assert e2e_fixtures(["tmp_path", "shared_browser"], {}) == ["shared_browser"]
    assert e2e_fixtures(["db_target"], {"db_target": "postgres"}) == ["db_target[postgres]"]
    assert e2e_fixtures(["db_target"], {"db_target": "sqlite", "value": {"a": 1}}) == []
    assert e2e_program(["/bin/sh", "-c", 'exec "$@"', "x", "--", "/usr/bin/bwrap", "--die-with-parent"]) == "bwrap"
    assert e2e_program(["bash", "-c", "cd ws && npm install --no-audit"]) == "npm"
    assert e2e_program([sys.executable, "-m", "http.server", "8000"]) == "python -m http.server"
    assert e2e_program([sys.executable, "-m", "webgen_agent", "history"]) == "python -m webgen_agent"
    assert e2e_program([sys.executable, "-c", "print(1)"]) is None
    assert e2e_program([sys.executable, "-m", "webgen_agent.tools.watchdog", "1"]) is None  # not the CLI
    assert e2e_program(["git", "ls-files"]) is None


def test_a_small_suite_run_under_the_rules(tmp_path):
    npm = tmp_path / "bin" / "npm"
    npm.parent.mkdir()
    npm.write_text("#!/bin/sh\nexit 0\n")
    npm.chmod(0o755)
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    e2e: end-to-end\n")
    (suite / "conftest.py").write_text(INNER_CONFTEST)
    (suite / "test_inner.py").write_text(textwrap.dedent(INNER_TESTS).replace("NPM", repr(str(npm))))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", str(suite)],
        cwd=suite,
        # Only the plugins under test: no installed plugin's start-up (seconds on a busy machine).
        # A fixed width: how much of a summary line pytest prints depends on it.
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = run.stdout + run.stderr
    assert re.search(r"1 failed, 1 passed, 2 skipped, (\d+ warnings?, )?2 errors", out), out
    assert "test_unmarked_browser_test uses chromium_path but is not marked e2e" in out  # through another fixture
    assert "test_unmarked_npm_test started npm but is not marked e2e" in out
    # The broken run: its cause once (one error), the other readers skipped naming where it is.
    tracebacks = re.findall(r"^E\s+RuntimeError: the scripted run broke at step 3$", out, re.M)
    assert len(tracebacks) == 1, out
    assert "ERROR test_inner.py::test_reads_the_run_first" in out
    assert (
        out.count("fixture 'whole_run' failed; its error is reported at test_inner.py::test_reads_the_run_first") == 2
    )
