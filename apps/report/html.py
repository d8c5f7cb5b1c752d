"""A run report as one self-contained HTML page.

``render_report`` is a pure function from ``RunReport`` to text; ``write_report`` loads a run from
the database and writes its page. Everything is inline (CSS, SVG plots, images as data URLs) and
there is no script, so the file opens offline, attaches to an issue or an e-mail, and looks the same
years later. Per step it shows the code (a highlighted diff of each changed file and the coder's
reply), both grades with their reasons, and the GUI test as the page the agent saw before each of
its steps with the actions it took there; long parts are collapsible (``<details>``).
"""

from __future__ import annotations

from pathlib import Path

from webgen_agent.apps.report.charts import plots, timeline_svg
from webgen_agent.apps.report.diff import highlight_css
from webgen_agent.apps.report.markup import badge, esc
from webgen_agent.apps.report.model import (
    RelatedRun,
    RunReport,
    default_report_path,
    load_report,
)
from webgen_agent.apps.report.settings import setting_rows
from webgen_agent.apps.report.steps import recorded_tests, step_section
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.core.money import usd_text

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
pre.code { background: #f6f8fa; color: #1f2937; }
label.zoom { display: block; cursor: zoom-in; } label.zoom input { display: none; }
label.zoom input:checked + span { position: fixed; inset: 0; overflow: auto; z-index: 10; cursor: zoom-out;
                                  background: rgba(15, 23, 42, .85); }
label.zoom input:checked + span img { display: block; margin: 12px auto; max-width: none; width: auto; }
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
        f"<h1>{esc(title)} {badge(report.status, report.status)}</h1>",
        _meta(report),
        f"<blockquote>{esc(report.requirement)}</blockquote>",
        *_fork_notes(report),
        _totals(report),
        _settings(report),
        "<h2>Score timeline</h2>",
        f'<div class="timeline">{timeline_svg(report)}</div>',
        plots(report),
        _events(report),
        "<h2>Steps</h2>",
        *(step_section(step, report) for step in report.steps),
        recorded_tests(report),
    ]
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{esc(title)}</title>'
        f"<style>{CSS}{highlight_css('.code')}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


# ---- header ----------------------------------------------------------------------------------
def _meta(report: RunReport) -> str:
    parts = []
    if report.group_id:
        parts.append(f"group {esc(report.group_id)}")
    if report.out_dir:
        parts.append(f"folder <code>{esc(report.out_dir)}</code>")
    return f'<p class="muted small">{" · ".join(parts)}</p>' if parts else ""


def _settings(report: RunReport) -> str:
    rows = setting_rows(report.settings)
    if not rows:
        return ""
    values = {row.name: row.value for row in rows}
    gist = ", ".join(f"{name.lower()} {values[name]}" for name in ("Loop", "Profile", "Step limit") if name in values)
    body = "".join(f"<tr><td>{esc(r.name)}</td><td>{esc(r.value)}</td><td>{esc(r.meaning)}</td></tr>" for r in rows)
    return (
        f'<details class="settings"><summary>Settings ({esc(gist)})</summary>'
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
            f"<li>{_run_link(fork)} branched after step {fork.fork_step} ({esc(fork.status)})</li>"
            for fork in report.forks
        )
        notes.append(f'<div class="note">Forks of this run:<ul>{items}</ul></div>')
    return notes


def _run_link(run: RelatedRun) -> str:
    if not run.report:
        return f"<b>{esc(run.run_id)}</b>"
    # A file:// link: the other report sits in that run's folder once written.
    return f'<a href="file://{esc(run.report)}"><b>{esc(run.run_id)}</b></a>'


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
    return '<div class="totals">' + "".join(f"<div><b>{esc(v)}</b>{esc(k)}</div>" for k, v in cells) + "</div>"


def _events(report: RunReport) -> str:
    if not report.events:
        return ""
    rows = []
    for event in report.events:
        target = event.get("target_step")
        where = f" → step {target}" if target is not None else ""
        rows.append(
            f"<li><b>{esc(event.get('kind'))}</b> after step {esc(event.get('after_step'))}{esc(where)}: "
            f"{esc(event.get('reason', ''))}</li>"
        )
    return f"<h2>Events</h2><ul>{''.join(rows)}</ul>"
