"""One failure of a shared fixture is one failure: a pytest plugin (tests/conftest.py loads it).

A module or session fixture that does something costly once for many tests (a whole run, a
rollout) and fails would otherwise fail every test that reads it, each with the same traceback
(pytest keeps the fixture's exception and raises it again for each). Here the first of those tests
reports the error with its cause; each later one is skipped, naming the fixture and that test. The
fixture is not run again (pytest's cache of its exception is left as it is).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

_first_report: dict[int, tuple[BaseException, str]] = {}  # id(exception) -> (it, the test that reported it)


def _failed_fixture(item: pytest.Item, error: BaseException) -> str | None:
    """The name of the shared fixture whose cached exception is ``error``, if that is what failed."""
    info = getattr(item, "_fixtureinfo", None)
    for name, definitions in (getattr(info, "name2fixturedefs", None) or {}).items():
        for definition in definitions:
            cached = getattr(definition, "cached_result", None)
            if definition.scope in ("module", "package", "session") and cached and cached[2] is not None:
                if cached[2][0] is error:
                    return name
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, Any]:
    report = yield
    if call.when != "setup" or call.excinfo is None or not report.failed:
        return report
    error = call.excinfo.value
    fixture = _failed_fixture(item, error)
    if fixture is None:
        return report
    first = _first_report.get(id(error))
    if first is None or first[0] is not error:
        _first_report[id(error)] = (error, item.nodeid)
        return report  # the error, its cause and traceback, once
    path, line, _ = item.location
    report.outcome = "skipped"
    report.longrepr = (
        str(path),
        (line or 0) + 1,
        f"Skipped: fixture {fixture!r} failed; its error is reported at {first[1]}",
    )
    return report
