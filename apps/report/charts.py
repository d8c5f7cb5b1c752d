"""The run report's plots as inline SVG: the score timeline and the tokens, cost and seconds per step."""

from __future__ import annotations

from collections.abc import Callable

from webgen_agent.apps.report.markup import esc
from webgen_agent.apps.report.model import (
    RunReport,
    StepReport,
)
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
            f'text-anchor="middle" font-size="12" fill="{colour}">{esc(label)}</text></a>'
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
            f'<text x="{at + 3}" y="{top + 10}" font-size="11" fill="{BACKTRACK_COLOUR}">{esc(label)}</text>'
            f"<title>{esc(event.get('kind'))} after step {event['after_step']}: "
            f"{esc(event.get('reason', ''))}</title></g>"
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
def plots(report: RunReport) -> str:
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
    left, top, bottom, plot_h, bar = 56, 22, 22, 90, 16
    width = max(280, left + 12 + 24 * len(steps))
    gap = (width - left - 12) / max(len(steps), 1)  # the bars spread over the whole plot, however few
    height = top + plot_h + bottom
    totals = [_stacked([values[i] for _, _, values in series]) for i in range(len(steps))]
    known_peak = max((t for t in totals if t is not None), default=0.0)
    peak = known_peak or 1.0  # all zero or unknown: bars of no height
    out = [
        f'<svg id="{chart_id}" class="plot" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">',
        f'<text x="4" y="14" font-size="12" font-weight="600" fill="#374151">{esc(title)}</text>',
        f'<line x1="{left}" x2="{width - 4}" y1="{top + plot_h}" y2="{top + plot_h}" stroke="#9ca3af"/>',
        f'<text x="{left - 4}" y="{top + 8}" text-anchor="end" font-size="10" fill="#6b7280">{esc(fmt(known_peak))}</text>'
        if known_peak
        else "",
        f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end" font-size="10" fill="#6b7280">0</text>',
    ]
    for position, step in enumerate(steps):
        x = left + 6 + gap * position + (gap - 24) / 2
        label = f'<text x="{x + 8:.1f}" y="{height - 6}" text-anchor="middle" font-size="10" fill="#374151">{step.index}</text>'
        if totals[position] is None:
            out.append(
                f'<a href="#step-{step.index}"><text class="unknown" x="{x + 8:.1f}" y="{top + plot_h - 4}" '
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
                f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar}" height="{h:.1f}" fill="{colour}">'
                f"<title>step {step.index} {esc(name)}: {esc(fmt(value))}</title></rect>"
            )
        out.append(f'<a href="#step-{step.index}">{"".join(bars)}{label}</a>')
    if len(series) > 1:
        key_x = float(left + 100)
        for name, colour, _ in series:
            out.append(f'<rect x="{key_x}" y="5" width="9" height="9" fill="{colour}"/>')
            out.append(f'<text x="{key_x + 12}" y="14" font-size="10" fill="#374151">{esc(name)}</text>')
            key_x += 18 + 6 * len(name)
    out.append("</svg>")
    return f"<figure>{''.join(out)}</figure>"


def _stacked(values: list[float | None]) -> float | None:
    """A bar's height: the sum of its parts, unknown when one part is."""
    return None if any(v is None for v in values) else sum(float(v or 0) for v in values)
