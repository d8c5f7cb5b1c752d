"""The run report's section of one step: screenshots, grades, code changes, the coder's reply, costs."""

from __future__ import annotations

from webgen_agent.apps.report.diff import FileDiff, file_diff
from webgen_agent.apps.report.gui import gui_section
from webgen_agent.apps.report.markup import badge, bullet_list, esc, figure
from webgen_agent.apps.report.model import (
    FileChange,
    NodeCost,
    RunReport,
    StepReport,
)
from webgen_agent.core.money import usd_text


# ---- steps -----------------------------------------------------------------------------------
def step_section(step: StepReport, report: RunReport) -> str:
    classes = " ".join(
        c for c, on in (("chosen", step.chosen), ("errored", step.errored), ("inherited", step.inherited)) if on
    )
    badges = "".join(
        [
            badge("chosen", "chosen") if step.chosen else "",
            badge("errored", "errored") if step.errored else "",
            badge("inherited", "inherited from the parent run") if step.inherited else "",
            badge("", f"screenshot {step.screenshot_score}/5" if _judged(step) else "screenshot not graded"),
            badge("", f"GUI {step.gui_score}/5" if step.gui is not None else "no GUI test"),
        ]
    )
    parent = f" · builds on step {step.parent}" if step.parent is not None else ""
    head = (
        f"<h3>Step {step.index} · {esc(step.role)} · {esc(step.action)}{badges}</h3>"
        f'<p class="muted small">{esc(step.summary)}{esc(parent)} · {step.wall_seconds:.1f} s · {step.total_tokens:,} tokens · {esc(usd_text(step.cost_usd) if step.cost_usd is not None else "cost unknown")}</p>'
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
        parts.append(gui_section(step.gui))
    if step.feedback:
        parts.append(
            f"<details><summary>Critic feedback (what the next Refiner turn got)</summary>"
            f"<pre>{esc(step.feedback)}</pre></details>"
        )
    parts.append(_costs(step.nodes))
    return f'<section id="step-{step.index}" class="step {classes}">' + "\n".join(p for p in parts if p) + "</section>"


def _shots(step: StepReport) -> str:
    figures = []
    if step.screenshot:
        figures.append(figure(step.screenshot, f"Landing page after step {step.index}", "screenshot"))
    for path, png in step.other_pages:
        figures.append(figure(png, f"Page {path} after step {step.index}", "screenshot"))
    return f'<div class="shots">{"".join(figures)}</div>' if figures else ""


def _execution(step: StepReport) -> str:
    parts = []
    if step.execution_ok is not None:
        verdict = "ran and rendered" if step.execution_ok else f"failed at the {step.execution_stage} stage"
        parts.append(f"<p><b>Execution</b>: {esc(verdict)}</p>")
    if step.execution_error:
        parts.append(f'<pre class="execution-error">{esc(step.execution_error)}</pre>')
    if step.page_errors:
        parts.append("<p><b>Page errors</b></p>" + bullet_list(step.page_errors))
    if step.problems:
        parts.append("<p><b>Problems with the reply</b></p>" + bullet_list(step.problems))
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
        f'<p class="grade screenshot-grade"><b>Screenshot judge</b> {esc(grade)}: <span class="why">{esc(why)}</span></p>'
    ]
    if step.visible_error:
        parts.append(f'<p class="grade"><b>Error seen on the page</b>: {esc(step.visible_error)}</p>')
    if step.suggestions:
        parts.append(bullet_list(step.suggestions))
    if step.checks:
        parts.append("<p><b>Requirement checks</b></p>" + bullet_list(step.checks))
    if step.replays:
        lines = [f"{r.test}: {r.status}" + (f" {r.detail}" if r.detail else "") for r in step.replays]
        parts.append("<p><b>Recorded GUI tests replayed</b> (no model call)</p>" + bullet_list(lines))
        shots = [figure(r.screenshot, f"{r.test} when it failed", "screenshot") for r in step.replays if r.screenshot]
        if shots:
            parts.append(f'<div class="shots">{"".join(shots)}</div>')
    return "".join(parts)


def recorded_tests(report: RunReport) -> str:
    """The GUI tests the run recorded, as the Playwright specs ``ship`` writes."""
    if not report.recorded_tests:
        return ""
    parts = ["<h2>Recorded GUI tests</h2>"]
    for test in report.recorded_tests:
        scope = "the whole GUI test" if test.covers_all else "part of the GUI test"
        parts.append(
            f"<p><b>{esc(test.name)}</b>: recorded at step {test.recorded_at_step}, covers {scope}</p>"
            f'<pre class="code">{esc(test.spec)}</pre>'
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
        return f'<p class="grade gui-grade"><b>GUI test</b> not run: <span class="why">{esc(_why_no_gui(step, report))}</span></p>'
    verdict = "passed" if gui.passed else "failed" if gui.passed is False else "not judged"
    why = step.gui_error or "; ".join(gui.suggestions) or "; ".join(gui.errors) or gui.final_answer or ""
    return (
        f'<p class="grade gui-grade"><b>GUI test</b> {badge("pass" if gui.passed else "fail", f"{verdict} {gui.score}/5")}'
        + (f': <span class="why">{esc(why)}</span>' if why else "")
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
            return "<p><b>Files changed</b>: " + ", ".join(f"<code>{esc(p)}</code>" for p in step.changed) + "</p>"
        return ""
    diffs = [(change, _diff_of(change)) for change in step.changes]
    added = sum(d.added for _, d in diffs if d is not None)
    removed = sum(d.removed for _, d in diffs if d is not None)
    base = "" if step.base_known else " (the files before this step are not recorded: compared with nothing)"
    files = "".join(_file_diff(change, diff) for change, diff in diffs)
    return (
        f'<details class="changes"><summary>Code changes: {len(diffs)} file{"s" if len(diffs) != 1 else ""} '
        f'<span class="plus">+{added}</span> <span class="minus">−{removed}</span>{esc(base)}</summary>{files}</details>'
    )


def _diff_of(change: FileChange) -> FileDiff | None:
    return None if change.binary else file_diff(change.path, change.before, change.after)


def _file_diff(change: FileChange, diff: FileDiff | None) -> str:
    if diff is None:
        summary = f"{change.status}, binary: {change.bytes_before:,} → {change.bytes_after:,} bytes"
        return f'<div class="file-diff"><code>{esc(change.path)}</code> <span class="muted">{esc(summary)}</span></div>'
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
        f'<details class="file-diff"{"" if generated else " open"}><summary><code>{esc(change.path)}</code> '
        f"{esc(change.status)}{' (generated lockfile)' if generated else ''} "
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
    # Step 0 of a run from a folder: no model wrote it; the coder read the user's project so.
    what = "The imported project, as the coder read it" if step.role == "import" else "Coder's reply"
    return (
        f'<details class="reply"><summary>{what} ({lines:,} lines)</summary>'
        f'<pre class="reply">{esc(step.reply)}</pre></details>'
    )


def _costs(nodes: list[NodeCost]) -> str:
    if not nodes:
        return ""
    rows = "".join(
        f"<tr><td>{esc(n.node)}</td><td>{n.seconds:.2f}</td><td>{n.input_tokens:,}</td><td>{n.output_tokens:,}</td>"
        f"<td>{n.calls}</td><td>{esc(usd_text(n.cost_usd) if n.cost_usd is not None else 'unknown')}</td></tr>"
        for n in nodes
    )
    return (
        '<details><summary>Time, tokens and cost per node</summary><table class="costs"><tr><th>node</th>'
        "<th>seconds</th><th>input tokens</th><th>output tokens</th><th>calls</th><th>cost</th></tr>"
        f"{rows}</table></details>"
    )
