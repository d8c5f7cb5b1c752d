"""The ``e2e`` marker means what it says: a test that runs npm, a dev server, Chromium, bubblewrap,
PostgreSQL, Ray, ``langgraph dev`` or the CLI as a process (seconds of imports each) carries it, so
``pytest -m "not e2e"`` is the fast loop. (Tests that train a model carry it too; nothing checks that.)

A pytest plugin (tests/conftest.py loads it) with two checks, each failing the unmarked test with
what it used:
- by fixture, before the test runs: it needs one of ``E2E_FIXTURES`` (directly or through another
  fixture), or the PostgreSQL side of a store-parametrized fixture;
- by process, after the test ran: it started one of ``E2E_PROGRAMS`` (seen by a Python audit hook
  on ``subprocess.Popen`` and ``os.posix_spawn``, which asyncio's subprocesses go through too).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Generator, Iterable, Sequence
from pathlib import PurePath
from typing import Any

import pytest

# Session fixtures that install with npm, start Chromium, a dev server, PostgreSQL or langgraph dev.
E2E_FIXTURES = frozenset(
    {
        "vite_template",
        "chromium_path",
        "shared_browser",
        "browser_node_harness",
        "demo_run",
        "studio_server",
        "postgres_cluster",
    }
)
# Parameter values of store-parametrized fixtures (db_target and the module fixtures like it).
E2E_PARAMS = frozenset({"postgres"})
# Programs (by file name) whose start makes a test end-to-end.
E2E_PROGRAMS = frozenset(
    {
        "npm",
        "npx",
        "node",
        "bwrap",
        "chromium",
        "chromium-browser",
        "chrome",
        "google-chrome",
        "chrome-headless-shell",
        "headless_shell",
        "initdb",
        "pg_ctl",
        "postgres",
        "langgraph",
        "raylet",
        "gcs_server",
        "webgen-agent",
    }
)
# ``python -m MODULE`` runs of the same kind: a static site's dev server, Ray's processes, langgraph,
# the CLI.
E2E_MODULES = frozenset({"http.server", "ray", "langgraph_cli", "webgen_agent"})


def e2e_fixtures(fixturenames: Iterable[str], params: dict[str, Any]) -> list[str]:
    """What in a test's fixture closure (and parameters) makes it end-to-end."""
    used = sorted(set(fixturenames) & E2E_FIXTURES)
    used += [
        f"{name}[{value}]" for name, value in sorted(params.items()) if isinstance(value, str) and value in E2E_PARAMS
    ]
    return used


def e2e_program(argv: Sequence[str | bytes | PurePath]) -> str | None:
    """The end-to-end program a command starts (its name), else None.

    Every word is looked at, not only the first: a command often starts another (``sh -c '... exec
    bwrap ...'`` for the sandbox's cgroups, ``bash -c 'npm install'``).
    """
    words = [w.decode(errors="replace") if isinstance(w, bytes) else str(w) for w in argv]
    for word in words:
        for part in re.split(r"[\s;&|()'\"]+", word):
            if part and PurePath(part).name in E2E_PROGRAMS:
                return PurePath(part).name
    if words and PurePath(words[0]).name.startswith("python"):
        if "-m" in words[:-1]:
            module = words[words.index("-m") + 1]
            if module in E2E_MODULES or module.startswith("ray."):
                return f"python -m {module}"
        if len(words) > 1 and "ray" in PurePath(words[1]).parts:
            return "a Ray process"
    return None


class ProcessWatch:
    """Records the end-to-end programs started while a test runs (one audit hook for the session)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.watching = False
        sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.watching:
            return
        if event == "subprocess.Popen":  # (executable, args, cwd, env)
            argv = args[1]
        elif event == "os.posix_spawn":  # (path, argv, env)
            argv = args[1]
        else:
            return
        if isinstance(argv, bytes):
            argv = argv.decode(errors="replace")
        if isinstance(argv, str):  # a shell command line
            argv = argv.split()
        elif isinstance(argv, PurePath):
            argv = [argv]
        found = e2e_program(list(argv or [args[0]]))
        if found is not None and found not in self.started:
            self.started.append(found)


def is_e2e(item: pytest.Item) -> bool:
    return item.get_closest_marker("e2e") is not None


def params_of(item: pytest.Item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)
    return dict(callspec.params) if callspec is not None else {}


def fixture_problem(item: pytest.Item) -> str | None:
    used = e2e_fixtures(getattr(item, "fixturenames", ()), params_of(item))
    if not used or is_e2e(item):
        return None
    return f"{item.nodeid} uses {', '.join(used)} but is not marked e2e (add @pytest.mark.e2e or pytestmark)"


def process_problem(item: pytest.Item, started: list[str]) -> str | None:
    if not started or is_e2e(item):
        return None
    return f"{item.nodeid} started {', '.join(started)} but is not marked e2e (add @pytest.mark.e2e or pytestmark)"


_processes = ProcessWatch()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if problem := fixture_problem(item):
        pytest.fail(problem, pytrace=False)  # before any fixture of it starts a browser or a server


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    _processes.started.clear()
    _processes.watching = True  # its fixtures' setup included
    try:
        return (yield)
    finally:
        _processes.watching = False


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, Any]:
    report = yield
    if call.when == "call" and report.passed and (problem := process_problem(item, _processes.started)):
        report.outcome = "failed"
        report.longrepr = problem
    return report
