"""What a loop decides: the graph's shape after each page, named by what it does.

Routers and nodes read these fields, never a loop's name; a loop is one module in this package
holding one ``LoopRules`` (docs/loops.md describes the three).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The loops there are (core/loops/__init__.py registers one module per name).
LoopName = Literal["webgen-agent", "webloop", "single"]


@dataclass(frozen=True)
class LoopRules:
    """How a run goes on once a page was built (or the coder replied without building one)."""

    name: LoopName
    # After each page: WebGen-Agent's screenshot grade, GUI test, feedback and backtracking, with a
    # GUI test instruction written at the start. Without it, a page goes to the requirement checks
    # and then to the next critique round or to the end.
    gui_testing: bool
    # Another Code-Critic + Refiner round follows a checked page while ``critique_rounds`` are left.
    critique_rounds: bool
    # Requirement checks follow each judged page unless the run says otherwise.
    checks_by_default: bool
    # Every role's turns are training data (WebLoop trains one policy as Generator, Critic and
    # Refiner): a rollout has the coder answer as Critic unless told otherwise, and a separate
    # Critic's log-probs are asked for beside the coder's.
    trains_every_role: bool = False
