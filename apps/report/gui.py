"""The run report's GUI test of a step: the page before each agent step and the actions taken there."""

from __future__ import annotations

from webgen_agent.apps.report.markup import bullet_list, esc, figure, zoomable
from webgen_agent.apps.report.model import (
    GuiAction,
    GuiFrame,
    GuiTest,
)


# ---- GUI test --------------------------------------------------------------------------------
def gui_section(gui: GuiTest) -> str:
    parts = [
        f"<p><b>GUI test run</b>{f' · stopped: {esc(gui.stopped_reason)}' if gui.stopped_reason else ''}</p>",
        f'<p class="small"><b>Instruction</b>: {esc(gui.instruction)}</p>' if gui.instruction else "",
        _gui_strip(gui) if gui.frames else _gui_table(gui),
        f'<p class="small"><b>Agent\'s answer</b>: {esc(gui.final_answer)}</p>' if gui.final_answer else "",
        ('<p class="small"><b>Suggestions</b></p>' + bullet_list(gui.suggestions)) if gui.suggestions else "",
        ('<p class="small"><b>Errors</b></p>' + bullet_list(gui.errors)) if gui.errors else "",
    ]
    return '<div class="gui">' + "".join(parts) + "</div>"


def _gui_strip(gui: GuiTest) -> str:
    """The page the agent saw before each of its steps, with the actions it took there; then the end."""
    figures = [_gui_frame(frame) for frame in gui.frames]
    if gui.final_screenshot:
        shot = zoomable(gui.final_screenshot, "The page at the end of the GUI test", "gui-screenshot")
        figures.append(f"<figure>{shot}<figcaption>After the last action</figcaption></figure>")
    return f'<div class="strip gui-strip">{"".join(figures)}</div>'


def _gui_frame(frame: GuiFrame) -> str:
    image = (
        zoomable(frame.image, f"The page before agent step {frame.step}", "gui-frame")
        if frame.image
        else '<p class="muted small">(no screenshot)</p>'
    )
    actions = "".join(
        f'<li class="{"failed" if a.error else ""}">{action_text(a)}'
        + (f' <span class="muted">→ {esc(a.error or a.result)}</span>' if a.error or a.result else "")
        + "</li>"
        for a in frame.actions
    )
    return (
        f'<figure class="gui-step">{image}<figcaption>Agent step {frame.step}'
        f"{f' · {esc(frame.url)}' if frame.url else ''}</figcaption><ol>{actions}</ol></figure>"
    )


def _gui_table(gui: GuiTest) -> str:
    """Runs recorded before frames were kept: the actions as a table, and the last page."""
    rows = "".join(
        f"<tr><td>{n}</td><td>{action_text(a)}</td><td>{esc(a.error or a.result or '')}</td></tr>"
        for n, a in enumerate(gui.actions, 1)
    )
    table = (
        f'<table class="gui-actions"><tr><th>#</th><th>action</th><th>result</th></tr>{rows}</table>'
        if rows
        else '<p class="muted">No browser actions.</p>'
    )
    last = (
        figure(gui.final_screenshot, "Page at the end of the GUI test", "gui-screenshot")
        if gui.final_screenshot
        else ""
    )
    return table + (f'<div class="shots">{last}</div>' if last else "")


def action_text(action: GuiAction) -> str:
    """An action as HTML a person reads: ``click button "Add item"``, ``input text='Buy milk' into ...``."""
    params = {k: v for k, v in action.params.items() if not (k == "index" and action.target)}
    shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
    target = f" {esc(action.target)}" if action.target else ""
    return f"<code>{esc(action.name)}</code>{target}" + (f' <span class="small">{esc(shown)}</span>' if shown else "")
