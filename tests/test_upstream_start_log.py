"""The upstream profile's "start error": the word "error" in the server's log as the feedback shows it.

WebGen-Agent reads the whole log file, clips it (over 500 lines: the first and last 50; then over
50,000 characters in the agent loop, 10,000 in the rollout environment: the first and last 5,000),
and only then looks for "error" (A `utils/execute_for_feedback.py` l.190-219, RL l.238-267). A word
that the clip drops does not make the step errored; a crash's first lines do, however long the log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_upstream_execution import INFERENCE, ROLLOUT, reference_start_output
from webgen_agent.core.profiles import EnvironmentRules
from webgen_agent.core.state import Execution
from webgen_agent.nodes.feedback import clipped_log
from webgen_agent.nodes.resources import Resources, use_resources
from webgen_agent.nodes.site_results import log_error_words
from webgen_agent.tools.site import ExecutionResult, SiteRunner


def _log(lines: int, error_at: int | None) -> str:
    return "\n".join(
        "Error: Cannot find module './Missing'" if n == error_at else f"  vite v5.4.0 line {n}" for n in range(lines)
    )


async def _start_error(tmp_path: Path, log: str, environment: EnvironmentRules) -> bool:
    """``log_error_words`` on a step whose dev server stopped and left ``log`` in its log file."""
    log_file = tmp_path / "logs" / "server-001.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_file.write_text(log)
    result = ExecutionResult(
        ok=False,
        stage="start",
        error="the server exited",
        log_tail="\n".join(log.split("\n")[-40:]),  # what the runner keeps of a stopped server's log
        server_log=str(log_file),
    )
    site = SiteRunner(tmp_path / "ws", log_dir=tmp_path / "logs")  # no server: it stopped
    execution: Execution = {"ok": False}  # type: ignore[typeddict-item]
    async with use_resources(Resources(tmp_path / "webgen.db", chromium="unused")):
        await log_error_words(execution, result, site, None, environment)
    return execution["start_error"]


@pytest.mark.parametrize("environment", [INFERENCE, ROLLOUT])
@pytest.mark.parametrize(
    ("lines", "error_at"),
    [
        (600, 100),  # over 500 lines, the word in the middle: clipped away, not an error upstream
        (600, 590),  # in the last 50 lines: an error
        (600, 10),  # in the first 50: an error
        (45, 0),  # a crash: the word on its first line, more than the last 40 lines after it
        (300, 150),  # under 500 lines: whole, or cut to its first and last 5,000 characters in rollouts
    ],
)
async def test_the_start_error_is_read_from_the_log_as_the_feedback_shows_it(
    tmp_path: Path, environment: EnvironmentRules, lines: int, error_at: int
) -> None:
    log = _log(lines, error_at)
    rollout = environment.name == "rollout"
    expected = "error" in reference_start_output(log, rollout=rollout).lower()
    assert await _start_error(tmp_path, log, environment) is expected
    assert clipped_log(log, whole_up_to=environment.start_log_chars) == reference_start_output(log, rollout=rollout)


@pytest.mark.parametrize(("environment", "limit"), [(INFERENCE, 50_000), (ROLLOUT, 10_000)])
def test_the_start_log_is_cut_by_characters_exactly_past_each_environments_limit(
    environment: EnvironmentRules, limit: int
) -> None:
    """Logs of ``limit`` and ``limit + 1`` characters (under 500 lines): the first is whole, the second cut."""
    for size in (limit, limit + 1):
        rows, filler = [], 0
        while sum(map(len, rows)) + len(rows) - 1 < size - 200:
            rows.append(f"line {filler} " + "z" * 150)
            filler += 1
        text = "\n".join(rows)
        text += "\n" + "w" * (size - len(text) - 1)
        assert len(text) == size and text.count("\n") < 500
        rollout = environment.name == "rollout"
        assert clipped_log(text, whole_up_to=environment.start_log_chars) == reference_start_output(
            text, rollout=rollout
        )
        assert ("[Output Too Long, Truncated]" in clipped_log(text, whole_up_to=environment.start_log_chars)) is (
            size > limit
        )
