"""Answering a run's review requests in the terminal (``webgen-agent run --review ...``, ``resume``).

On a terminal the reviewer picks approve / edit / note / reject (an edit opens $EDITOR on the text).
Without one (a pipe, a file) each answer is one line read from stdin: ``approve``, ``reject [NOTE]``,
``note NOTE``, ``edit TEXT`` (``\\n`` for new lines) or the JSON resume value. At the end of stdin
nobody is there to answer: the run is left waiting for review and ``resume`` asks again.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

import click
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.prompt import Prompt

from webgen_agent.apps import ctrl_c
from webgen_agent.apps.progress import ProgressView
from webgen_agent.core.views import REVIEW_POINTS, ReviewDecision, ReviewPoint, ReviewRequest, review_decision

SHOWN_CHARS = 6000  # of the text under review, in the terminal (the whole text is in the request)


def review_points(values: list[str] | None) -> list[ReviewPoint] | None:
    """The --review values as points (None when the flag was not given); raises ValueError on an unknown one."""
    if values is None:
        return None
    points: list[ReviewPoint] = []
    for value in values:
        for word in (w.strip().lower() for w in value.split(",")):
            if not word or word == "none":
                continue
            point = next((p for p in REVIEW_POINTS if p == word), None)
            if point is None:
                raise ValueError(f"unknown review point {word!r} (choose from {', '.join(REVIEW_POINTS)})")
            if point not in points:
                points.append(point)
    return points


def parse_answer(line: str) -> ReviewDecision:
    """One line of stdin as a decision; raises ValueError (one line) when it is none."""
    line = line.strip()
    if line.startswith("{"):
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the answer is not valid JSON: {exc}") from None
        return review_decision(value)
    word, _, rest = line.partition(" ")
    rest = rest.strip()
    if word in ("approve", "a"):
        return ReviewDecision(action="approve", note=rest)
    if word in ("reject", "r"):
        return ReviewDecision(action="reject", note=rest)
    if word in ("note", "n") and rest:
        return ReviewDecision(action="edit", note=rest)
    if word in ("edit", "e") and rest:
        return ReviewDecision(action="edit", text=rest.replace("\\n", "\n"))
    raise ValueError(
        f"cannot read the answer {line[:80]!r}: write approve, reject [NOTE], note NOTE, edit TEXT or a JSON object"
    )


class TerminalReviewer:
    """Asks each review request in the terminal; None (no answer: end of input) leaves the run waiting."""

    def __init__(self, console: Console, view: ProgressView | None = None, stdin: TextIO | None = None) -> None:
        self.console = console
        self.view = view
        self.stdin = stdin or sys.stdin

    async def __call__(self, request: ReviewRequest) -> ReviewDecision | None:
        # A daemon thread, not the loop's executor: a Ctrl-C while it waits must not wait for a line.
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[ReviewDecision | None] = loop.create_future()

        def settle(result: ReviewDecision | None, error: BaseException | None) -> None:
            if answered.done():
                return
            if error is not None:
                answered.set_exception(error)
            else:
                answered.set_result(result)

        def ask() -> None:
            try:
                result = self.ask(request)
            except BaseException as exc:  # handed to the awaiting task
                loop.call_soon_threadsafe(settle, None, exc)
            else:
                loop.call_soon_threadsafe(settle, result, None)

        threading.Thread(target=ask, name="review-prompt", daemon=True).start()
        return await answered

    def ask(self, request: ReviewRequest) -> ReviewDecision | None:
        live = self.view.live if self.view is not None else None
        if live is not None:
            live.stop()
        try:
            self.show(request)
            return self._prompt(request) if self.stdin.isatty() else self._read(request)
        finally:
            if live is not None:
                live.start()

    def show(self, request: ReviewRequest) -> None:
        text = request.text
        if len(text) > SHOWN_CHARS:
            text = f"{text[:SHOWN_CHARS]}\n... ({len(text) - SHOWN_CHARS} more characters)"
        lines = [f"[bold]{escape(request.about_to)}[/bold]", "", escape(text)]
        if request.files:
            lines += ["", f"files: {escape(', '.join(request.files))}"]
        if request.commands:
            lines += ["", f"command {request.command} of {request.commands}"]
        if request.screenshot_path:
            lines += ["", f"screenshot: {escape(request.screenshot_path)}"]
        lines += ["", f"edit: {escape(request.edit_means)}", f"reject: {escape(request.reject_means)}"]
        if request.error:
            lines += ["", f"[red]previous answer refused:[/red] {escape(request.error)}"]
        where = f" (step {request.step})" if request.step is not None else ""
        self.console.print(Panel("\n".join(lines), title=f"review: {request.point}{where}", expand=False))
        self.console.print(
            f"run {request.run_id} waits for review; answer now, or later with `webgen-agent resume {request.run_id}`",
            soft_wrap=True,
            highlight=False,
        )

    def _read(self, request: ReviewRequest) -> ReviewDecision | None:
        self.console.print("answer (approve | reject [NOTE] | note NOTE | edit TEXT | JSON):", highlight=False)
        while True:
            line = self.stdin.readline()
            if not line:
                return None
            if not line.strip():
                continue
            try:
                return parse_answer(line)
            except ValueError as exc:
                self.console.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)

    def _prompt(self, request: ReviewRequest) -> ReviewDecision | None:
        while True:
            try:
                return self._choose(request)
            except EOFError:
                return None
            except ValueError as exc:  # e.g. an empty note: ask again
                self.console.print(f"[red]error:[/red] {escape(str(exc).splitlines()[-1])}", soft_wrap=True)

    def _choose(self, request: ReviewRequest) -> ReviewDecision:
        choice = Prompt.ask(
            "approve / edit / note / reject",
            choices=["approve", "edit", "note", "reject"],
            default="approve",
            console=self.console,
        )
        if choice == "approve":
            return ReviewDecision(action="approve")
        if choice == "note":
            return ReviewDecision(action="edit", note=Prompt.ask("note", console=self.console))
        if choice == "reject":
            return ReviewDecision(
                action="reject", note=Prompt.ask("note for the coder (optional)", default="", console=self.console)
            )
        edited = click.edit(request.text)
        if edited is None:  # the editor was closed without saving
            edited = Prompt.ask("replacement (one line)", console=self.console)
        return ReviewDecision(action="edit", text=edited.rstrip("\n"))


async def run_with_review(console: Console, title: str, start: Callable[..., Awaitable[Any]]) -> Any:
    """``start(on_event, reviewer)`` under the live progress view, with a terminal reviewer."""
    with ProgressView(console, title) as view:
        # After Ctrl-C the run's next progress event stops it (apps/ctrl_c.py).
        return await start(ctrl_c.checked(view.on_event), TerminalReviewer(console, view))


def waiting_line(request: ReviewRequest) -> str:
    where = f" (step {request.step})" if request.step is not None else ""
    return (
        f"run {request.run_id} waits for review at {request.point}{where}; "
        f"answer with `webgen-agent resume {request.run_id}`"
    )
