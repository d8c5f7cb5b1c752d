"""The run's count of consecutive errored steps: a backtrack follows it (``error_limit``).

Six nodes pass verdicts on a step (the coder turns, the executor, the screenshot judge, the GUI
test) or leave the branch (backtrack); each states its verdict here and writes what this returns, so
the count has one rule:

- ``errored``: the step errored, one more;
- ``clean``: the step's last judge found it sound (the screenshot judge, the upstream GUI test): 0;
- ``open``: sound so far, but a later node judges it (a coder's edit, a page the judge grades next),
  or the verdict is that node's to give: unchanged;
- ``backtrack``: the run went back to a good step or to the requirement: 0.
"""

from __future__ import annotations

from typing import Literal

from webgen_agent.core.state import AgentState

StepVerdict = Literal["errored", "clean", "open", "backtrack"]


def error_count(state: AgentState) -> int:
    """Consecutive errored steps so far (0 before the first verdict)."""
    return state.get("consecutive_errors", 0)


def count_after(state: AgentState, verdict: StepVerdict) -> int:
    """The count once ``verdict`` is given on the current step."""
    if verdict == "errored":
        return error_count(state) + 1
    if verdict == "open":
        return error_count(state)
    return 0  # clean, backtrack


def verdict_of(errored: bool, *, final: bool) -> StepVerdict:
    """``errored``, else ``clean`` from the step's last judge (``final``) and ``open`` from any other node."""
    if errored:
        return "errored"
    return "clean" if final else "open"
