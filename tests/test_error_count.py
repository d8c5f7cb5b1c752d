"""The consecutive-error count has one rule (core/error_count.py) and every node follows it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from webgen_agent.core.error_count import count_after, error_count, verdict_of
from webgen_agent.core.state import AgentState

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("before", "verdict", "after"),
    [(2, "errored", 3), (2, "clean", 0), (2, "open", 2), (2, "backtrack", 0), (None, "errored", 1), (None, "open", 0)],
)
def test_the_count_after_each_verdict(before, verdict, after):
    state: AgentState = {} if before is None else {"consecutive_errors": before}
    assert count_after(state, verdict) == after


def test_a_clean_step_resets_the_count_only_from_its_last_judge():
    assert verdict_of(True, final=False) == verdict_of(True, final=True) == "errored"
    assert verdict_of(False, final=True) == "clean"
    assert verdict_of(False, final=False) == "open"
    assert error_count({}) == 0


def test_no_module_counts_errors_but_the_rule():
    """Every read goes through ``error_count`` and every write through ``count_after``."""
    offenders = []
    for folder in ("nodes", "graph", "core", "apps", "checkpoints"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == ROOT / "core" / "error_count.py" or path == ROOT / "core" / "state.py":
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if "consecutive_errors" in line and not re.search(
                    r'"consecutive_errors"(\]\s*=|:)\s*count_after\(', line
                ):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
