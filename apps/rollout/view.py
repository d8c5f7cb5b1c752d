"""The rollout command's live view (rich): trajectories done / running / failed, steps, time, tokens, cost."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from webgen_agent.apps.rollout.service import TrajectoryOutcome, TrajectorySpec
from webgen_agent.core.costs import Budget, Spending

_FINISHED_ROWS = 8  # the latest ended trajectories shown under the running ones


@dataclass
class _Running:
    spec: TrajectorySpec
    resumed: bool
    started: float = field(default_factory=time.monotonic)
    step: int | None = None
    node: str = "starting"
    message: str = ""


class RolloutView:
    """A ``RolloutListener`` that renders the rollout in place; use as a context manager."""

    def __init__(self, console: Console, title: str, total: int) -> None:
        self.console = console
        self.title = title
        self.total = total
        self.began = time.monotonic()
        self.running: dict[str, _Running] = {}
        self.ended_outcomes: list[TrajectoryOutcome] = []
        self.steps = 0
        self.spent = Spending(Budget())  # what this invocation's trajectories spent (no budget of its own)
        self.live = Live(self._render(), console=console, refresh_per_second=4, transient=False)

    def __enter__(self) -> RolloutView:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.live.update(self._render())
        self.live.__exit__(*exc)

    # -- RolloutListener --------------------------------------------------------------------------
    def started(self, spec: TrajectorySpec, *, resumed: bool) -> None:
        self.running[spec.run_id] = _Running(spec, resumed)
        self.live.update(self._render())

    def event(self, spec: TrajectorySpec, event: dict[str, Any]) -> None:
        row = self.running.get(spec.run_id)
        if row is None:
            return
        if event.get("node") == "run" and event.get("phase") == "wait" and event.get("message"):
            # The run waits out its database (said once per outage): a line of its own above the view.
            self.console.print(Text(f"{spec.run_id}: {event['message']}", style="yellow"), soft_wrap=True)
        row.node = event.get("node", row.node)
        if event.get("node") in ("generator", "refiner") and event.get("phase") == "end":
            self.steps += 1
        if event.get("step") is not None:
            row.step = event["step"]
        if event.get("message"):
            row.message = str(event["message"])
        self.spent.add(event)
        self.live.update(self._render())

    def ended(self, outcome: TrajectoryOutcome) -> None:
        self.running.pop(outcome.run_id, None)
        self.ended_outcomes.append(outcome)
        self.live.update(self._render())

    # -- rendering --------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        done = sum(o.status == "finished" for o in self.ended_outcomes)
        skipped = sum(o.status in ("skipped", "busy") for o in self.ended_outcomes)
        failed = sum(o.status == "failed" for o in self.ended_outcomes)
        return {"done": done, "skipped": skipped, "failed": failed, "running": len(self.running)}

    def _render(self) -> Group:
        table = Table(title=self.title, expand=False)
        for column in ("trajectory", "state", "step", "node / result", "seconds"):
            table.add_column(column)
        now = time.monotonic()
        for row in self.running.values():
            state = "resuming" if row.resumed else "running"
            table.add_row(
                row.spec.run_id, state, _text(row.step), f"{row.node}: {row.message}"[:70], f"{now - row.started:.0f}"
            )
        for outcome in self.ended_outcomes[-_FINISHED_ROWS:]:
            style = {"failed": "red", "finished": "green"}.get(outcome.status, "dim")
            detail = outcome.error[:70] if outcome.error else f"{outcome.steps} steps"
            table.add_row(outcome.run_id, Text(outcome.status, style=style), "", detail, f"{outcome.seconds:.0f}")
        c = self.counts()
        footer = Text(
            f"{c['done']} done, {c['skipped']} already done, {c['running']} running, {c['failed']} failed "
            f"of {self.total} | {self.steps} steps | {now - self.began:.0f}s elapsed | {self.spent.line()}",
            style="dim",
        )
        return Group(table, footer)


def outcome_table(outcomes: Sequence[TrajectoryOutcome]) -> Table:
    """End-of-rollout table: one row per trajectory."""
    table = Table(title="rollout")
    for column in ("trajectory", "group", "status", "steps", "seconds", "error"):
        table.add_column(column)
    for o in outcomes:
        status = f"{o.status} (resumed)" if o.resumed else o.status
        table.add_row(o.run_id, o.group_id, status, str(o.steps), f"{o.seconds:.1f}", o.error[:80])
    return table


def _text(value: int | None) -> str:
    return "" if value is None else str(value)
