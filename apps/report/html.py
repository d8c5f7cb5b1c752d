"""A run report as one self-contained HTML page.

``render_report`` is a pure function from ``RunReport`` to text; ``write_report`` loads a run from
the database and writes its page. Everything is inline (CSS, an SVG score timeline, images as data URLs) and there is no script, so
the file opens offline, attaches to an issue or an e-mail, and looks the same years later.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Callable, Iterable
from pathlib import Path

from webgen_agent.apps.report.model import (
    GuiTest,
    NodeCost,
    RelatedRun,
    RunReport,
    StepReport,
    default_report_path,
    load_report,
)
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.core.costs import usd_text

SCREENSHOT_COLOUR = "#2563eb"
GUI_COLOUR = "#16a34a"
ERROR_COLOUR = "#dc2626"
CHOSEN_COLOUR = "#f59e0b"
BACKTRACK_COLOUR = "#7c3aed"

Scale = Callable[[int], float]  # step index or score -> SVG coordinate

CSS = """
:root { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; color: #1f2937; }
body { margin: 0 auto; max-width: 1100px; padding: 24px; background: #f8fafc; }
h1 { font-size: 1.5rem; margin: 0 0 4px; } h2 { margin-top: 32px; } h3 { margin: 0; font-size: 1.1rem; }
.muted { color: #6b7280; } .small { font-size: .85rem; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: .8rem; margin-left: 6px;
         background: #e5e7eb; }
.badge.finished, .badge.pass { background: #dcfce7; color: #166534; }
.badge.failed, .badge.errored, .badge.fail { background: #fee2e2; color: #991b1b; }
.badge.interrupted, .badge.budget { background: #fef3c7; color: #92400e; }
.badge.chosen { background: #fde68a; color: #78350f; } .badge.inherited { background: #e0e7ff; color: #3730a3; }
blockquote { margin: 12px 0; padding: 12px 16px; background: #fff; border-left: 4px solid #2563eb; }
.note { padding: 10px 14px; background: #eef2ff; border: 1px solid #c7d2fe; border-radius: 6px; margin: 8px 0; }
.totals { display: flex; gap: 12px; flex-wrap: wrap; margin: 16px 0; }
.totals div { background: #fff; border: 1px solid #e5e7eb; border-radius: 8px; padding: 8px 14px; }
.totals b { display: block; font-size: 1.2rem; }
.timeline { background: #fff; border: 1px solid #e5e7eb; border-radius: 8px; padding: 8px; overflow-x: auto; }
.step { background: #fff; border: 1px solid #e5e7eb; border-radius: 8px; padding: 16px; margin: 16px 0; }
.step.chosen { border: 2px solid #f59e0b; } .step.errored { border-left: 6px solid #dc2626; }
.step.inherited { opacity: .85; }
.shots { display: flex; gap: 12px; flex-wrap: wrap; margin: 12px 0; }
.shots figure { margin: 0; } .shots img { max-width: 520px; width: 100%; border: 1px solid #d1d5db; border-radius: 4px; }
figcaption { font-size: .8rem; color: #6b7280; }
pre { background: #0f172a; color: #e2e8f0; padding: 10px; border-radius: 6px; overflow-x: auto; white-space: pre-wrap;
      font-size: .8rem; max-height: 360px; }
table { border-collapse: collapse; font-size: .85rem; } td, th { border-bottom: 1px solid #e5e7eb; padding: 3px 8px;
      text-align: left; vertical-align: top; }
details { margin: 8px 0; } summary { cursor: pointer; font-weight: 600; }
ul { margin: 4px 0; padding-left: 20px; }
"""


async def write_report(run_id: str, *, db_path: str | Path | Database, out: str | Path | None = None) -> Path:
    """Write the report of ``run_id`` (default ``<run folder>/report.html``); returns its path."""
    report = await load_report(run_id, db_path=db_path)
    target = Path(out) if out else default_report_path(RunIndex(db_path).get(run_id), run_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_report(report), encoding="utf-8")
    return target.resolve()


def render_report(report: RunReport) -> str:
    """The whole page."""
    title = f"webgen-agent run {report.run_id}"
    body = [
        f"<h1>{_e(title)} {_badge(report.status, report.status)}</h1>",
        _meta(report),
        f"<blockquote>{_e(report.requirement)}</blockquote>",
        *_fork_notes(report),
        _totals(report),
        "<h2>Score timeline</h2>",
        f'<div class="timeline">{timeline_svg(report)}</div>',
        _events(report),
        "<h2>Steps</h2>",
        *(_step(step) for step in report.steps),
    ]
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_e(title)}</title>'
        f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


# ---- header ----------------------------------------------------------------------------------
def _meta(report: RunReport) -> str:
    parts = []
    if report.group_id:
        parts.append(f"group {_e(report.group_id)}")
    if report.out_dir:
        parts.append(f"folder <code>{_e(report.out_dir)}</code>")
    if report.settings:
        parts.append("settings " + ", ".join(f"{_e(k)}={_e(json.dumps(v))}" for k, v in report.settings.items()))
    return f'<p class="muted small">{" · ".join(parts)}</p>' if parts else ""


def _fork_notes(report: RunReport) -> list[str]:
    notes = []
    if report.parent is not None:
        notes.append(
            f'<div class="note">Fork of run {_run_link(report.parent)}, branched after step '
            f"{report.parent.fork_step}: steps 0-{report.parent.fork_step} come from that run "
            "(marked <em>inherited</em>).</div>"
        )
    if report.forks:
        items = "".join(
            f"<li>{_run_link(fork)} branched after step {fork.fork_step} ({_e(fork.status)})</li>"
            for fork in report.forks
        )
        notes.append(f'<div class="note">Forks of this run:<ul>{items}</ul></div>')
    return notes


def _run_link(run: RelatedRun) -> str:
    if not run.report:
        return f"<b>{_e(run.run_id)}</b>"
    # A file:// link: the other report sits in that run's folder once written.
    return f'<a href="file://{_e(run.report)}"><b>{_e(run.run_id)}</b></a>'


def _totals(report: RunReport) -> str:
    t = report.totals
    chosen = "-" if report.chosen_step is None else str(report.chosen_step)
    cells = [
        ("steps", str(t.steps)),
        ("chosen step", chosen),
        ("node time", f"{t.seconds:.1f} s"),
        ("input tokens", f"{t.input_tokens:,}"),
        ("output tokens", f"{t.output_tokens:,}"),
        ("model calls", str(t.model_calls)),
        ("cost", usd_text(t.cost_usd) if t.cost_usd is not None else "unknown"),
    ]
    return '<div class="totals">' + "".join(f"<div><b>{_e(v)}</b>{_e(k)}</div>" for k, v in cells) + "</div>"


def _events(report: RunReport) -> str:
    if not report.events:
        return ""
    rows = []
    for event in report.events:
        target = event.get("target_step")
        where = f" → step {target}" if target is not None else ""
        rows.append(
            f"<li><b>{_e(event.get('kind'))}</b> after step {_e(event.get('after_step'))}{_e(where)}: "
            f"{_e(event.get('reason', ''))}</li>"
        )
    return f"<h2>Events</h2><ul>{''.join(rows)}</ul>"


# ---- timeline --------------------------------------------------------------------------------
def timeline_svg(report: RunReport) -> str:
    """Screenshot and GUI score per step; errored steps, backtracks and the chosen step marked."""
    steps = report.steps
    left, right, top, bottom, gap = 44, 16, 16, 46, 72
    width = max(560, left + right + gap * max(len(steps), 1))  # at least the legend's width
    height = top + bottom + 150
    plot_h = height - top - bottom

    def x(index: int) -> float:
        return left + gap * index + gap / 2

    def y(score: int) -> float:
        return top + plot_h - plot_h * score / 5

    out = [
        (
            f'<svg id="score-timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="Scores per step">'
        )
    ]
    out += _bands(steps, x, gap, top, plot_h)
    out += _grid(left, width - right, y)
    out += _series(steps, x, y, "screenshot_score", SCREENSHOT_COLOUR, "screenshot")
    out += _series(steps, x, y, "gui_score", GUI_COLOUR, "gui")
    out += _backtracks(report, x, gap, top, plot_h)
    for step in steps:
        label = f"{step.index}{' ✕' if step.errored else ''}"
        colour = ERROR_COLOUR if step.errored else "#374151"
        out.append(
            f'<a href="#step-{step.index}"><text x="{x(step.index)}" y="{top + plot_h + 18}" '
            f'text-anchor="middle" font-size="12" fill="{colour}">{_e(label)}</text></a>'
        )
    out.append(_legend(left, height - 8))
    out.append("</svg>")
    return "".join(out)


def _bands(steps: list[StepReport], x: Scale, gap: int, top: int, plot_h: float) -> list[str]:
    bands = []
    for step in steps:
        fill = CHOSEN_COLOUR if step.chosen else ERROR_COLOUR if step.errored else "#e0e7ff" if step.inherited else ""
        if not fill:
            continue
        opacity = 0.3 if step.chosen else 0.1 if step.errored else 0.4
        kind = "chosen" if step.chosen else "errored" if step.errored else "inherited"
        bands.append(
            f'<rect class="band {kind}" x="{x(step.index) - gap / 2 + 2}" y="{top}" width="{gap - 4}" '
            f'height="{plot_h}" fill="{fill}" fill-opacity="{opacity}"><title>step {step.index}: {kind}'
            "</title></rect>"
        )
    return bands


def _grid(x0: int, x1: int, y: Scale) -> list[str]:
    lines = []
    for score in range(6):
        lines.append(
            f'<line x1="{x0}" x2="{x1}" y1="{y(score)}" y2="{y(score)}" stroke="#e5e7eb"/>'
            f'<text x="{x0 - 8}" y="{y(score) + 4}" text-anchor="end" font-size="11" fill="#6b7280">'
            f"{score}</text>"
        )
    return lines


def _series(steps: list[StepReport], x: Scale, y: Scale, field: str, colour: str, name: str) -> list[str]:
    points = [(x(s.index), y(getattr(s, field)), s) for s in steps]
    if not points:
        return []
    path = " ".join(f"{px},{py}" for px, py, _ in points)
    marks = [f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2" stroke-opacity="0.7"/>']
    for px, py, step in points:
        if name == "screenshot":  # circles left of the step, squares right: equal scores stay visible
            tag, where = "circle", f'cx="{px - 5}" cy="{py}" r="6"'
        else:
            tag, where = "rect", f'x="{px}" y="{py - 5}" width="10" height="10"'
        marks.append(
            f'<a href="#step-{step.index}"><{tag} class="point {name}" {where} fill="{colour}" '
            f'stroke="#fff"><title>step {step.index} {name} score {getattr(step, field)}/5</title>'
            f"</{tag}></a>"
        )
    return marks


def _backtracks(report: RunReport, x: Scale, gap: int, top: int, plot_h: float) -> list[str]:
    marks = []
    for event in report.events:
        if event.get("kind") not in ("backtrack", "restart") or event.get("after_step") is None:
            continue
        at = x(int(event["after_step"])) + gap / 2
        target = event.get("target_step")
        label = f"↩ {target}" if target is not None else "restart"
        marks.append(
            f'<g class="backtrack"><line x1="{at}" x2="{at}" y1="{top}" y2="{top + plot_h}" '
            f'stroke="{BACKTRACK_COLOUR}" stroke-width="2" stroke-dasharray="5,4"/>'
            f'<text x="{at + 3}" y="{top + 10}" font-size="11" fill="{BACKTRACK_COLOUR}">{_e(label)}</text>'
            f"<title>{_e(event.get('kind'))} after step {event['after_step']}: "
            f"{_e(event.get('reason', ''))}</title></g>"
        )
    return marks


LEGEND = (  # label, swatch, colour, opacity
    ("screenshot score", "circle", SCREENSHOT_COLOUR, 1.0),
    ("GUI score", "square", GUI_COLOUR, 1.0),
    ("chosen", "square", CHOSEN_COLOUR, 0.5),
    ("errored", "square", ERROR_COLOUR, 0.3),
    ("backtrack", "dash", BACKTRACK_COLOUR, 1.0),
)


def _legend(x0: int, y0: float) -> str:
    parts, x = [], float(x0)
    for label, swatch, colour, opacity in LEGEND:
        parts.append(_swatch(swatch, x, y0, colour, opacity))
        parts.append(f'<text x="{x + 14}" y="{y0}" font-size="11" fill="#374151">{label}</text>')
        x += 30 + 6.5 * len(label)
    return '<g class="legend">' + "".join(parts) + "</g>"


def _swatch(kind: str, x: float, y: float, colour: str, opacity: float) -> str:
    if kind == "circle":
        return f'<circle cx="{x + 5}" cy="{y - 4}" r="5" fill="{colour}"/>'
    if kind == "dash":
        return (
            f'<line x1="{x + 5}" x2="{x + 5}" y1="{y - 10}" y2="{y + 1}" stroke="{colour}" stroke-width="2" '
            'stroke-dasharray="3,2"/>'
        )
    return f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{colour}" fill-opacity="{opacity}"/>'


# ---- steps -----------------------------------------------------------------------------------
def _step(step: StepReport) -> str:
    classes = " ".join(
        c for c, on in (("chosen", step.chosen), ("errored", step.errored), ("inherited", step.inherited)) if on
    )
    badges = "".join(
        [
            _badge("chosen", "chosen") if step.chosen else "",
            _badge("errored", "errored") if step.errored else "",
            _badge("inherited", "inherited from the parent run") if step.inherited else "",
            _badge("", f"screenshot {step.screenshot_score}/5"),
            _badge("", f"GUI {step.gui_score}/5"),
        ]
    )
    parent = f" · builds on step {step.parent}" if step.parent is not None else ""
    head = (
        f"<h3>Step {step.index} · {_e(step.role)} · {_e(step.action)}{badges}</h3>"
        f'<p class="muted small">{_e(step.summary)}{_e(parent)} · {step.wall_seconds:.1f} s · {step.total_tokens:,} tokens · {_e(usd_text(step.cost_usd) if step.cost_usd is not None else "cost unknown")}</p>'
    )
    parts = [head, _shots(step), _execution(step), _judge(step)]
    if step.gui is not None:
        parts.append(_gui(step.gui))
    if step.feedback:
        parts.append(
            f"<details><summary>Critic feedback (what the next Refiner turn got)</summary>"
            f"<pre>{_e(step.feedback)}</pre></details>"
        )
    parts.append(_costs(step.nodes))
    return f'<section id="step-{step.index}" class="step {classes}">' + "\n".join(p for p in parts if p) + "</section>"


def _shots(step: StepReport) -> str:
    figures = []
    if step.screenshot:
        figures.append(_figure(step.screenshot, f"Landing page after step {step.index}", "screenshot"))
    for path, png in step.other_pages:
        figures.append(_figure(png, f"Page {path} after step {step.index}", "screenshot"))
    if step.gui is not None and step.gui.final_screenshot:
        figures.append(_figure(step.gui.final_screenshot, "Page at the end of the GUI test", "gui-screenshot"))
    return f'<div class="shots">{"".join(figures)}</div>' if figures else ""


def _figure(png: bytes, caption: str, kind: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    mime = "image/png" if png.startswith(b"\x89PNG") else "image/jpeg"
    return (
        f'<figure><img class="{kind}" alt="{_e(caption)}" src="data:{mime};base64,{data}">'
        f"<figcaption>{_e(caption)}</figcaption></figure>"
    )


def _execution(step: StepReport) -> str:
    parts = []
    if step.changed:
        parts.append(
            f"<p><b>Files changed</b> ({len(step.changed)}): "
            + ", ".join(f"<code>{_e(p)}</code>" for p in step.changed)
            + "</p>"
        )
    if step.execution_ok is not None:
        verdict = "ran and rendered" if step.execution_ok else f"failed at the {step.execution_stage} stage"
        parts.append(f"<p><b>Execution</b>: {_e(verdict)}</p>")
    if step.execution_error:
        parts.append(f'<pre class="execution-error">{_e(step.execution_error)}</pre>')
    if step.page_errors:
        parts.append("<p><b>Page errors</b></p>" + _list(step.page_errors))
    if step.problems:
        parts.append("<p><b>Problems with the reply</b></p>" + _list(step.problems))
    return "\n".join(parts)


def _judge(step: StepReport) -> str:
    if not step.description:
        return ""
    checks = "<p><b>Requirement checks</b></p>" + _list(step.checks) if step.checks else ""
    return (
        f"<p><b>Screenshot judge</b> ({step.screenshot_score}/5): {_e(step.description)}</p>"
        + (_list(step.suggestions) if step.suggestions else "")
        + checks
    )


def _gui(gui: GuiTest) -> str:
    verdict = "passed" if gui.passed else "failed" if gui.passed is False else "not judged"
    rows = "".join(
        f"<tr><td>{n}</td><td><code>{_e(a.name)}</code></td><td>{_e(_params(a.params))}</td>"
        f"<td>{_e(a.error or a.result or '')}</td></tr>"
        for n, a in enumerate(gui.actions, 1)
    )
    actions = (
        (f'<table class="gui-actions"><tr><th>#</th><th>action</th><th>params</th><th>result</th></tr>{rows}</table>')
        if rows
        else '<p class="muted">No browser actions.</p>'
    )
    parts = [
        (
            f"<p><b>GUI test</b> {_badge('pass' if gui.passed else 'fail', f'{verdict} {gui.score}/5')}"
            f"{f' · stopped: {_e(gui.stopped_reason)}' if gui.stopped_reason else ''}</p>"
        ),
        f'<p class="small"><b>Instruction</b>: {_e(gui.instruction)}</p>' if gui.instruction else "",
        actions,
        f'<p class="small"><b>Agent\'s answer</b>: {_e(gui.final_answer)}</p>' if gui.final_answer else "",
        ('<p class="small"><b>Suggestions</b></p>' + _list(gui.suggestions)) if gui.suggestions else "",
        ('<p class="small"><b>Errors</b></p>' + _list(gui.errors)) if gui.errors else "",
    ]
    return '<div class="gui">' + "".join(parts) + "</div>"


def _params(params: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def _costs(nodes: list[NodeCost]) -> str:
    if not nodes:
        return ""
    rows = "".join(
        f"<tr><td>{_e(n.node)}</td><td>{n.seconds:.2f}</td><td>{n.input_tokens:,}</td><td>{n.output_tokens:,}</td>"
        f"<td>{n.calls}</td><td>{_e(usd_text(n.cost_usd) if n.cost_usd is not None else 'unknown')}</td></tr>"
        for n in nodes
    )
    return (
        '<details><summary>Time, tokens and cost per node</summary><table class="costs"><tr><th>node</th>'
        "<th>seconds</th><th>input tokens</th><th>output tokens</th><th>calls</th><th>cost</th></tr>"
        f"{rows}</table></details>"
    )


# ---- helpers ---------------------------------------------------------------------------------
def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _badge(kind: str, text: str) -> str:
    return f'<span class="badge {_e(kind)}">{_e(text)}</span>'


def _list(items: Iterable[str]) -> str:
    return "<ul>" + "".join(f"<li>{_e(item)}</li>" for item in items) + "</ul>"
