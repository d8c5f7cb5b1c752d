"""A run report as one self-contained HTML page.

``render_report`` is a pure function from ``RunReport`` to text; ``write_report`` loads a run from
the database and writes its page. Everything is inline (CSS, SVG plots, images as data URLs) and
there is no script, so the file opens offline, attaches to an issue or an e-mail, and looks the same
years later. Per step it shows the code (a highlighted diff of each changed file and the coder's
reply), both grades with their reasons, and the GUI test as the page the agent saw before each of
its steps with the actions it took there; long parts are collapsible (``<details>``).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Iterable
from pathlib import Path

from webgen_agent.apps.report.diff import FileDiff, file_diff, highlight_css
from webgen_agent.apps.report.model import (
    FileChange,
    GuiAction,
    GuiFrame,
    GuiTest,
    NodeCost,
    RelatedRun,
    RunReport,
    StepReport,
    default_report_path,
    load_report,
)
from webgen_agent.apps.report.settings import setting_rows
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.core.money import usd_text

SCREENSHOT_COLOUR = "#2563eb"
GUI_COLOUR = "#16a34a"
ERROR_COLOUR = "#dc2626"
CHOSEN_COLOUR = "#f59e0b"
BACKTRACK_COLOUR = "#7c3aed"
INPUT_COLOUR = "#60a5fa"
OUTPUT_COLOUR = "#1d4ed8"
COST_COLOUR = "#059669"
SECONDS_COLOUR = "#9333ea"

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
table.settings td:first-child { font-weight: 600; white-space: nowrap; } table.settings td:last-child { color: #6b7280; }
.plots { display: flex; gap: 12px; flex-wrap: wrap; }
.plots figure { margin: 0; background: #fff; border: 1px solid #e5e7eb; border-radius: 8px; padding: 6px; }
.grade { margin: 6px 0; } .grade .why { color: #374151; }
table.diff { width: 100%; border-collapse: collapse; font: .78rem/1.35 ui-monospace, SFMono-Regular, Menlo, monospace; }
table.diff td { border: 0; padding: 0 6px; white-space: pre-wrap; word-break: break-all; }
table.diff td.ln { color: #9ca3af; text-align: right; user-select: none; width: 1%; white-space: nowrap; }
table.diff td.mark { user-select: none; width: 1%; color: #6b7280; }
table.diff tr.added { background: #e6ffec; } table.diff tr.removed { background: #ffebe9; }
table.diff tr.hunk td { background: #ddf4ff; color: #57606a; padding: 2px 6px; }
.file-diff { border: 1px solid #e5e7eb; border-radius: 6px; padding: 4px 8px; margin: 6px 0; background: #fff; }
.file-diff > summary { font-weight: 400; } .plus { color: #1a7f37; } .minus { color: #cf222e; }
pre.reply { background: #f6f8fa; color: #1f2937; max-height: 520px; }
.strip { display: flex; gap: 10px; overflow-x: auto; padding-bottom: 6px; align-items: flex-start; }
.strip figure { margin: 0; flex: 0 0 300px; background: #f9fafb; border: 1px solid #e5e7eb; border-radius: 6px;
                padding: 6px; }
.strip img { width: 100%; border: 1px solid #d1d5db; border-radius: 3px; }
.strip ol { margin: 4px 0 0; padding-left: 18px; font-size: .8rem; } .strip li.failed { color: #991b1b; }
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
        _settings(report),
        "<h2>Score timeline</h2>",
        f'<div class="timeline">{timeline_svg(report)}</div>',
        _plots(report),
        _events(report),
        "<h2>Steps</h2>",
        *(_step(step, report) for step in report.steps),
        _recorded_tests(report),
    ]
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_e(title)}</title>'
        f"<style>{CSS}{highlight_css('.code')}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


# ---- header ----------------------------------------------------------------------------------
def _meta(report: RunReport) -> str:
    parts = []
    if report.group_id:
        parts.append(f"group {_e(report.group_id)}")
    if report.out_dir:
        parts.append(f"folder <code>{_e(report.out_dir)}</code>")
    return f'<p class="muted small">{" · ".join(parts)}</p>' if parts else ""


def _settings(report: RunReport) -> str:
    rows = setting_rows(report.settings)
    if not rows:
        return ""
    values = {row.name: row.value for row in rows}
    gist = ", ".join(f"{name.lower()} {values[name]}" for name in ("Loop", "Profile", "Step limit") if name in values)
    body = "".join(f"<tr><td>{_e(r.name)}</td><td>{_e(r.value)}</td><td>{_e(r.meaning)}</td></tr>" for r in rows)
    return (
        f'<details class="settings"><summary>Settings ({_e(gist)})</summary>'
        f'<table class="settings"><tr><th>setting</th><th>value</th><th>what it does</th></tr>{body}</table></details>'
    )


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


# ---- per-step plots --------------------------------------------------------------------------
def _plots(report: RunReport) -> str:
    """Tokens, cost and seconds per step as three small bar charts."""
    steps = report.steps
    if not steps:
        return ""
    tokens = bar_chart(
        "tokens-plot",
        "Tokens per step",
        steps,
        [
            ("input", INPUT_COLOUR, [_step_tokens(s, "input") for s in steps]),
            ("output", OUTPUT_COLOUR, [_step_tokens(s, "output") for s in steps]),
        ],
        lambda v: f"{v:,.0f}",
    )
    cost = bar_chart(
        "cost-plot",
        "Cost per step (USD)",
        steps,
        [("cost", COST_COLOUR, [s.cost_usd for s in steps])],
        lambda v: usd_text(v),
    )
    seconds = bar_chart(
        "seconds-plot", "Seconds per step", steps, [("seconds", SECONDS_COLOUR, [s.wall_seconds for s in steps])], _secs
    )
    return f'<h2>Tokens, cost and time per step</h2><div class="plots">{tokens}{cost}{seconds}</div>'


def _step_tokens(step: StepReport, kind: str) -> float:
    return float(sum(usage.get(kind, 0) for usage in step.tokens.values()))


def _secs(value: float) -> str:
    return f"{value:.1f} s"


def bar_chart(
    chart_id: str,
    title: str,
    steps: list[StepReport],
    series: list[tuple[str, str, list[float | None]]],
    fmt: Callable[[float], str],
) -> str:
    """Stacked bars, one per step, each a link to its step; a step with an unknown value shows ``?``."""
    left, top, bottom, plot_h, gap = 56, 22, 22, 90, 24
    width = max(280, left + 12 + gap * len(steps))
    height = top + plot_h + bottom
    totals = [_stacked([values[i] for _, _, values in series]) for i in range(len(steps))]
    known_peak = max((t for t in totals if t is not None), default=0.0)
    peak = known_peak or 1.0  # all zero or unknown: bars of no height
    out = [
        f'<svg id="{chart_id}" class="plot" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}">',
        f'<text x="4" y="14" font-size="12" font-weight="600" fill="#374151">{_e(title)}</text>',
        f'<line x1="{left}" x2="{width - 4}" y1="{top + plot_h}" y2="{top + plot_h}" stroke="#9ca3af"/>',
        f'<text x="{left - 4}" y="{top + 8}" text-anchor="end" font-size="10" fill="#6b7280">{_e(fmt(known_peak))}</text>'
        if known_peak
        else "",
        f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end" font-size="10" fill="#6b7280">0</text>',
    ]
    for position, step in enumerate(steps):
        x = left + 6 + gap * position
        label = (
            f'<text x="{x + 8}" y="{height - 6}" text-anchor="middle" font-size="10" fill="#374151">{step.index}</text>'
        )
        if totals[position] is None:
            out.append(
                f'<a href="#step-{step.index}"><text class="unknown" x="{x + 8}" y="{top + plot_h - 4}" '
                f'text-anchor="middle" font-size="12" fill="#6b7280">?<title>step {step.index}: unknown '
                f"(a price was not given)</title></text>{label}</a>"
            )
            continue
        y = float(top + plot_h)
        bars = []
        for name, colour, values in series:
            value = float(values[position] or 0)
            h = plot_h * value / peak
            y -= h
            bars.append(
                f'<rect class="bar" x="{x}" y="{y:.1f}" width="16" height="{h:.1f}" fill="{colour}">'
                f"<title>step {step.index} {_e(name)}: {_e(fmt(value))}</title></rect>"
            )
        out.append(f'<a href="#step-{step.index}">{"".join(bars)}{label}</a>')
    if len(series) > 1:
        key_x = float(left + 100)
        for name, colour, _ in series:
            out.append(f'<rect x="{key_x}" y="5" width="9" height="9" fill="{colour}"/>')
            out.append(f'<text x="{key_x + 12}" y="14" font-size="10" fill="#374151">{_e(name)}</text>')
            key_x += 18 + 6 * len(name)
    out.append("</svg>")
    return f"<figure>{''.join(out)}</figure>"


def _stacked(values: list[float | None]) -> float | None:
    """A bar's height: the sum of its parts, unknown when one part is."""
    return None if any(v is None for v in values) else sum(float(v or 0) for v in values)


# ---- steps -----------------------------------------------------------------------------------
def _step(step: StepReport, report: RunReport) -> str:
    classes = " ".join(
        c for c, on in (("chosen", step.chosen), ("errored", step.errored), ("inherited", step.inherited)) if on
    )
    badges = "".join(
        [
            _badge("chosen", "chosen") if step.chosen else "",
            _badge("errored", "errored") if step.errored else "",
            _badge("inherited", "inherited from the parent run") if step.inherited else "",
            _badge("", f"screenshot {step.screenshot_score}/5" if _judged(step) else "screenshot not graded"),
            _badge("", f"GUI {step.gui_score}/5" if step.gui is not None else "no GUI test"),
        ]
    )
    parent = f" · builds on step {step.parent}" if step.parent is not None else ""
    head = (
        f"<h3>Step {step.index} · {_e(step.role)} · {_e(step.action)}{badges}</h3>"
        f'<p class="muted small">{_e(step.summary)}{_e(parent)} · {step.wall_seconds:.1f} s · {step.total_tokens:,} tokens · {_e(usd_text(step.cost_usd) if step.cost_usd is not None else "cost unknown")}</p>'
    )
    parts = [
        head,
        _shots(step),
        _grades(step, report),
        _execution(step),
        _changes(step),
        _reply(step),
    ]
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
    return f'<div class="shots">{"".join(figures)}</div>' if figures else ""


def _figure(image: bytes, caption: str, kind: str) -> str:
    return (
        f'<figure><img class="{kind}" alt="{_e(caption)}" src="{_data_url(image)}">'
        f"<figcaption>{_e(caption)}</figcaption></figure>"
    )


def _data_url(image: bytes) -> str:
    mime = "image/png" if image.startswith(b"\x89PNG") else "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(image).decode('ascii')}"


def _execution(step: StepReport) -> str:
    parts = []
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


# ---- grades ----------------------------------------------------------------------------------
def _judged(step: StepReport) -> bool:
    return bool(step.screenshot_score or step.description or step.visible_error)


def _grades(step: StepReport, report: RunReport) -> str:
    """Both grades, each with why: the judge's words, or why there was no grade."""
    return f'<div class="grades">{_screenshot_grade(step)}{_gui_grade(step, report)}</div>'


def _screenshot_grade(step: StepReport) -> str:
    if step.judge_error:
        grade, why = f"{step.screenshot_score}/5", f"the judge failed: {step.judge_error}"
    elif _judged(step):
        grade, why = f"{step.screenshot_score}/5", step.description or "(the judge gave no description)"
    else:
        grade, why = "not graded", _why_not_graded(step)
    parts = [
        f'<p class="grade screenshot-grade"><b>Screenshot judge</b> {_e(grade)}: <span class="why">{_e(why)}</span></p>'
    ]
    if step.visible_error:
        parts.append(f'<p class="grade"><b>Error seen on the page</b>: {_e(step.visible_error)}</p>')
    if step.suggestions:
        parts.append(_list(step.suggestions))
    if step.checks:
        parts.append("<p><b>Requirement checks</b></p>" + _list(step.checks))
    if step.replays:
        lines = [f"{r.test}: {r.status}" + (f" {r.detail}" if r.detail else "") for r in step.replays]
        parts.append("<p><b>Recorded GUI tests replayed</b> (no model call)</p>" + _list(lines))
        shots = [_figure(r.screenshot, f"{r.test} when it failed", "screenshot") for r in step.replays if r.screenshot]
        if shots:
            parts.append(f'<div class="shots">{"".join(shots)}</div>')
    return "".join(parts)


def _recorded_tests(report: RunReport) -> str:
    """The GUI tests the run recorded, as the Playwright specs ``ship`` writes."""
    if not report.recorded_tests:
        return ""
    parts = ["<h2>Recorded GUI tests</h2>"]
    for test in report.recorded_tests:
        scope = "the whole GUI test" if test.covers_all else "part of the GUI test"
        parts.append(
            f"<p><b>{_e(test.name)}</b>: recorded at step {test.recorded_at_step}, covers {scope}</p>"
            f'<pre class="code">{_e(test.spec)}</pre>'
        )
    return "".join(parts)


def _why_not_graded(step: StepReport) -> str:
    if step.execution_ok is False:
        return f"the project failed at the {step.execution_stage} stage, so there was no page to grade (error below)."
    if step.action != "edit":
        return f"a {step.action} step changes no code, so it has no new page to grade."
    if step.screenshot is None:
        return "no screenshot was taken."
    return "the judge did not answer (the run stopped first)."


def _gui_grade(step: StepReport, report: RunReport) -> str:
    gui = step.gui
    if gui is None:
        return f'<p class="grade gui-grade"><b>GUI test</b> not run: <span class="why">{_e(_why_no_gui(step, report))}</span></p>'
    verdict = "passed" if gui.passed else "failed" if gui.passed is False else "not judged"
    why = step.gui_error or "; ".join(gui.suggestions) or "; ".join(gui.errors) or gui.final_answer or ""
    return (
        f'<p class="grade gui-grade"><b>GUI test</b> {_badge("pass" if gui.passed else "fail", f"{verdict} {gui.score}/5")}'
        + (f': <span class="why">{_e(why)}</span>' if why else "")
        + "</p>"
    )


def _why_no_gui(step: StepReport, report: RunReport) -> str:
    if step.gui_error:
        return step.gui_error
    if step.execution_ok is False:
        return "the project did not run."
    threshold = report.settings.get("appearance_threshold")
    if _judged(step) and isinstance(threshold, int) and step.screenshot_score < threshold:
        return f"the screenshot scored {step.screenshot_score}/5, below the {threshold} that starts the GUI test."
    if step.action != "edit":
        return f"a {step.action} step is not tested."
    return "this step was not tested (see the run's loop and settings)."


# ---- code ------------------------------------------------------------------------------------
def _changes(step: StepReport) -> str:
    if not step.changes:
        if step.changed:  # recorded without contents: the names at least
            return "<p><b>Files changed</b>: " + ", ".join(f"<code>{_e(p)}</code>" for p in step.changed) + "</p>"
        return ""
    diffs = [(change, _diff_of(change)) for change in step.changes]
    added = sum(d.added for _, d in diffs if d is not None)
    removed = sum(d.removed for _, d in diffs if d is not None)
    base = "" if step.base_known else " (the files before this step are not recorded: compared with nothing)"
    files = "".join(_file_diff(change, diff) for change, diff in diffs)
    return (
        f'<details class="changes"><summary>Code changes: {len(diffs)} file{"s" if len(diffs) != 1 else ""} '
        f'<span class="plus">+{added}</span> <span class="minus">−{removed}</span>{_e(base)}</summary>{files}</details>'
    )


def _diff_of(change: FileChange) -> FileDiff | None:
    return None if change.binary else file_diff(change.path, change.before, change.after)


def _file_diff(change: FileChange, diff: FileDiff | None) -> str:
    if diff is None:
        summary = f"{change.status}, binary: {change.bytes_before:,} → {change.bytes_after:,} bytes"
        return f'<div class="file-diff"><code>{_e(change.path)}</code> <span class="muted">{_e(summary)}</span></div>'
    rows = "".join(
        f'<tr class="hunk"><td colspan="4">{line.html}</td></tr>'
        if line.kind == "hunk"
        else f'<tr class="{line.kind}"><td class="ln">{line.old_number or ""}</td><td class="ln">{line.new_number or ""}</td>'
        f'<td class="mark">{_MARKS[line.kind]}</td><td>{line.html}</td></tr>'
        for line in diff.lines
    )
    more = f'<p class="muted small">{diff.left_out:,} more diff lines not shown.</p>' if diff.left_out else ""
    generated = change.path.rsplit("/", 1)[-1] in LOCKFILES
    return (
        f'<details class="file-diff"{"" if generated else " open"}><summary><code>{_e(change.path)}</code> '
        f"{_e(change.status)}{' (generated lockfile)' if generated else ''} "
        f'<span class="plus">+{diff.added}</span> <span class="minus">−{diff.removed}</span></summary>'
        f'<table class="diff code">{rows}</table>{more}</details>'
    )


_MARKS = {"context": " ", "added": "+", "removed": "−"}
# Written by the package manager, not the coder: listed closed.
LOCKFILES = frozenset({"package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lock"})


def _reply(step: StepReport) -> str:
    if not step.reply:
        return ""
    lines = step.reply.count("\n") + 1
    return (
        f'<details class="reply"><summary>Coder\'s reply ({lines:,} lines)</summary>'
        f'<pre class="reply">{_e(step.reply)}</pre></details>'
    )


# ---- GUI test --------------------------------------------------------------------------------
def _gui(gui: GuiTest) -> str:
    parts = [
        f"<p><b>GUI test run</b>{f' · stopped: {_e(gui.stopped_reason)}' if gui.stopped_reason else ''}</p>",
        f'<p class="small"><b>Instruction</b>: {_e(gui.instruction)}</p>' if gui.instruction else "",
        _gui_strip(gui) if gui.frames else _gui_table(gui),
        f'<p class="small"><b>Agent\'s answer</b>: {_e(gui.final_answer)}</p>' if gui.final_answer else "",
        ('<p class="small"><b>Suggestions</b></p>' + _list(gui.suggestions)) if gui.suggestions else "",
        ('<p class="small"><b>Errors</b></p>' + _list(gui.errors)) if gui.errors else "",
    ]
    return '<div class="gui">' + "".join(parts) + "</div>"


def _gui_strip(gui: GuiTest) -> str:
    """The page the agent saw before each of its steps, with the actions it took there; then the end."""
    figures = [_gui_frame(frame) for frame in gui.frames]
    if gui.final_screenshot:
        figures.append(
            f'<figure><img class="gui-screenshot" alt="The page at the end of the GUI test" '
            f'src="{_data_url(gui.final_screenshot)}"><figcaption>After the last action</figcaption></figure>'
        )
    return f'<div class="strip gui-strip">{"".join(figures)}</div>'


def _gui_frame(frame: GuiFrame) -> str:
    image = (
        f'<img class="gui-frame" alt="The page before agent step {frame.step}" src="{_data_url(frame.image)}">'
        if frame.image
        else '<p class="muted small">(no screenshot)</p>'
    )
    actions = "".join(
        f'<li class="{"failed" if a.error else ""}">{action_text(a)}'
        + (f' <span class="muted">→ {_e(a.error or a.result)}</span>' if a.error or a.result else "")
        + "</li>"
        for a in frame.actions
    )
    return (
        f'<figure class="gui-step">{image}<figcaption>Agent step {frame.step}'
        f"{f' · {_e(frame.url)}' if frame.url else ''}</figcaption><ol>{actions}</ol></figure>"
    )


def _gui_table(gui: GuiTest) -> str:
    """Runs recorded before frames were kept: the actions as a table, and the last page."""
    rows = "".join(
        f"<tr><td>{n}</td><td>{action_text(a)}</td><td>{_e(a.error or a.result or '')}</td></tr>"
        for n, a in enumerate(gui.actions, 1)
    )
    table = (
        f'<table class="gui-actions"><tr><th>#</th><th>action</th><th>result</th></tr>{rows}</table>'
        if rows
        else '<p class="muted">No browser actions.</p>'
    )
    last = (
        _figure(gui.final_screenshot, "Page at the end of the GUI test", "gui-screenshot")
        if gui.final_screenshot
        else ""
    )
    return table + (f'<div class="shots">{last}</div>' if last else "")


def action_text(action: GuiAction) -> str:
    """An action as HTML a person reads: ``click button "Add item"``, ``input text='Buy milk' into ...``."""
    params = {k: v for k, v in action.params.items() if not (k == "index" and action.target)}
    shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
    target = f" {_e(action.target)}" if action.target else ""
    return f"<code>{_e(action.name)}</code>{target}" + (f' <span class="small">{_e(shown)}</span>' if shown else "")


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
