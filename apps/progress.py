"""The CLI's live progress view (rich) and its end-of-run step table."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from webgen_agent.checkpoints.outputs import RunSummary
from webgen_agent.core.money import add_costs, usd_text


class ProgressView:
    """Feed it progress events (``on_event``); shows step, node, scores, elapsed, tokens and cost
    (this invocation's: a resumed run counts from where it continues)."""

    def __init__(self, console: Console, title: str) -> None:
        self.console = console
        self.title = title
        self.started = time.monotonic()
        self.node = "starting"
        self.step: int | None = None
        self.rows: dict[int, dict[str, Any]] = {}
        self.tokens = 0
        self.cost: float | None = 0.0  # None once a call had no known price
        self.warnings: list[str] = []
        self.waiting = ""
        self.live = Live(self._render(), console=console, refresh_per_second=4, transient=False)

    def __enter__(self) -> ProgressView:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.live.update(self._render(final=True))
        self.live.__exit__(*exc)

    def on_event(self, event: dict[str, Any]) -> None:
        if event.get("warning") and event["warning"] not in self.warnings:
            self.warnings.append(event["warning"])
        if event.get("phase") == "wait":
            # A model call waits out its endpoint (429, 5xx, timeout, fallback): shown until the next event.
            self.waiting = str(event.get("message", ""))
            self.live.update(self._render())
            return
        self.waiting = ""
        self.node = event.get("node", self.node)
        step = event.get("step")
        if step is not None:
            self.step = step
            row = self.rows.setdefault(step, {"nodes": []})
            if event.get("phase") == "end":
                row["nodes"].append(self.node)
                for key in ("screenshot_score", "gui_score", "errored"):
                    if event.get(key) is not None:
                        row[key] = event[key]
                if event.get("message"):
                    row["message"] = event["message"]
                if "cost_usd" in event or event.get("priced") is False:
                    spent = event.get("cost_usd") if event.get("priced", True) else None
                    row["cost"] = add_costs([row.get("cost", 0.0), spent])
                    self.cost = add_costs([self.cost, spent])
        self.tokens += event.get("input_tokens", 0) + event.get("output_tokens", 0)
        self.live.update(self._render())

    def _render(self, final: bool = False) -> Group:
        table = Table(title=self.title, expand=False)
        for column in ("step", "nodes", "screenshot", "gui", "errored", "cost", "last message"):
            table.add_column(column)
        for step, row in sorted(self.rows.items()):
            table.add_row(
                str(step),
                " > ".join(row["nodes"]),
                _score(row.get("screenshot_score")),
                _score(row.get("gui_score")),
                "yes" if row.get("errored") else "",
                usd_text(row.get("cost", 0.0)),
                str(row.get("message", ""))[:60],
            )
        elapsed = time.monotonic() - self.started
        status = "done" if final else f"running {self.node}"
        footer_text = (
            f"{status} | step {self.step} | {elapsed:.0f}s elapsed | {self.tokens} tokens | {usd_text(self.cost)}"
        )
        footer = Text(footer_text, style="dim")
        warnings = [Text(f"warning: {w}", style="bold yellow") for w in self.warnings]
        if self.waiting and not final:
            return Group(*warnings, table, footer, Text(f"waiting: {self.waiting}", style="yellow"))
        return Group(*warnings, table, footer)


def _score(value: Any) -> str:
    return "" if value is None else f"{value}/5"


def step_table(summary: RunSummary) -> Table:
    spent = f"{summary.input_tokens + summary.output_tokens:,} tokens, {usd_text(summary.cost_usd)}"
    table = Table(title=f"run {summary.run_id}: {summary.status} ({spent})")
    for column in ("step", "role", "action", "screenshot", "gui", "errored", "seconds", "tokens", "cost", "edit"):
        table.add_column(column)
    for step in summary.steps:
        chosen = step.index == summary.chosen_step
        table.add_row(
            f"{step.index}{' *' if chosen else ''}",
            step.role,
            step.action,
            f"{step.screenshot_score}/5",
            f"{step.gui_score}/5" + (" pass" if step.gui_passed else ""),
            "yes" if step.errored else "",
            f"{sum(step.timings.values()):.1f}",
            str(step.total_tokens),
            usd_text(step.cost_usd),
            (step.execution_error or step.summary)[:50].replace("\n", " "),
        )
    return table
