"""The HTML run report, built from the session's demo run (tests/conftest.py ``demo_run``).

The page is opened in real headless Chromium: every embedded image must decode, the score
timeline and the per-step plots must draw, the code diffs, coder replies, grade reasons and GUI
test frames must be there, and the page must log no error. A screenshot of the report is saved
next to it for people to look at.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from webgen_agent.apps.cli.main import app
from webgen_agent.apps.report.html import render_report
from webgen_agent.apps.report.model import REPORT_NAME, build_report, final_state
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.checkpoints.store import BlobStore

pytestmark = pytest.mark.e2e


def _db(base: Path) -> Path:
    return base / "db" / "webgen.db"


@pytest.fixture(scope="module")
def report_file(demo_run, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``webgen-agent report RUN_ID --out ... --db ...`` on the demo run."""
    result, base = demo_run
    out = tmp_path_factory.mktemp("report") / "report.html"
    invoked = CliRunner().invoke(app, ["report", result.run_id, "--out", str(out), "--db", str(_db(base))])
    assert invoked.exit_code == 0, invoked.output
    assert f"report: {out.resolve()}" in invoked.output
    return out


def test_demo_ends_with_a_report_in_the_run_folder(demo_run) -> None:
    result, _ = demo_run
    page = (Path(result.out_dir) / REPORT_NAME).read_text()
    assert result.run_id in page and "score-timeline" in page


def test_report_is_self_contained_and_complete(report_file: Path, demo_run) -> None:
    result, _ = demo_run
    page = report_file.read_text()
    # Offline-safe: no script, nothing fetched from anywhere.
    assert "<script" not in page
    assert not re.search(r"""(src|href)=["']https?:""", page) and "url(http" not in page
    assert "Build a to-do list web app" in page
    for index in range(4):
        assert f'id="step-{index}"' in page
    assert page.count('<img class="screenshot"') == 4
    assert page.count('<img class="gui-screenshot"') == 2  # the two GUI tests' last pages
    assert page.count('<img class="gui-frame"') == 6  # and the page before each of their agent steps
    assert re.search(r'<section id="step-3" class="step chosen"', page)
    assert re.search(r'<section id="step-0" class="step errored"', page)
    step0 = _section(page, 0)
    assert "failed at the render stage" in step0 and "App.jsx" in step0
    assert "Critic feedback" in step0 and "Fix the render error first" in step0
    # A step that did not run says why it has no grades.
    assert "not graded: <span" in step0 and "the project failed at the render stage" in step0
    assert "GUI test</b> not run" in step0
    step1 = _section(page, 1)
    assert "below the 4 that starts the GUI test" in step1
    step2 = _section(page, 2)
    assert "failed 2/5" in step2 and "<code>click</code>" in step2 and "Buy milk" in step2
    # The failed GUI test's reason stands beside its grade.
    assert re.search(r'failed 2/5</span>: <span class="why">Clicking &#x27;Add item&#x27; clears the input', step2)
    # The code: a highlighted diff per changed file and the coder's reply.
    assert "Code changes: 2 files" in step2 and "<code>src/styles.css</code> modified" in step2
    assert '<tr class="added">' in step2 and '<span class="nt">button</span>' in step2  # JSX tags coloured
    assert "Coder's reply" in step2 and "&lt;boltAction" in step2
    # The GUI test as frames: the page before each agent step, with what was acted on, by name.
    assert step2.count('<img class="gui-frame"') == 3
    assert "<code>click</code> button &quot;Add item&quot;" in step2 and "index=" not in step2
    step3 = _section(page, 3)
    assert "passed 5/5" in step3 and "gui_tester" in step3  # per-node time and tokens
    total_tokens = result.summary.input_tokens
    assert f"{total_tokens:,}" in page
    # Settings as a table, in words; tokens, cost and seconds per step as plots.
    assert "<td>Step limit</td><td>8</td><td>Coder steps before the run stops.</td>" in page
    assert "prices=" not in page and '"input_usd_per_mtok"' not in page
    for plot in ("tokens-plot", "cost-plot", "seconds-plot"):
        assert f'<svg id="{plot}"' in page


def _section(page: str, index: int) -> str:
    start = page.index(f'<section id="step-{index}"')
    return page[start : page.index("</section>", start)]


async def test_report_renders_in_chromium(report_file: Path, shared_browser) -> None:
    context = await shared_browser.browser.new_context(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    try:
        page = await context.new_page()
        page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(str(error)))
        # The shared Chromium runs in a sandbox of its own that sees no test folder: the page is
        # handed over as it is (it needs nothing else: every image is inline).
        html = await asyncio.to_thread(report_file.read_text, encoding="utf-8")
        await page.set_content(html, wait_until="load")
        await page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        images = await page.eval_on_selector_all(
            "img", "imgs => imgs.map(i => ({ok: i.complete && i.naturalWidth > 0, cls: i.className}))"
        )
        timeline = await page.evaluate(
            """() => {
                const svg = document.querySelector('#score-timeline');
                const box = svg.getBoundingClientRect();
                const count = sel => svg.querySelectorAll(sel).length;
                return {width: box.width, height: box.height, shots: count('circle.point.screenshot'),
                        gui: count('rect.point.gui'), chosen: count('rect.band.chosen'),
                        errored: count('rect.band.errored'), lines: count('polyline')};
            }"""
        )
        shown = await page.evaluate(
            """() => {
                const visible = el => !!el && el.getBoundingClientRect().height > 0;
                const plot = id => {
                    const svg = document.getElementById(id);
                    const box = svg.getBoundingClientRect();
                    const rights = [...svg.querySelectorAll('rect.bar')].map(r => r.getBoundingClientRect().right);
                    return {drawn: visible(svg), bars: svg.querySelectorAll('rect.bar').length,
                            unknown: svg.querySelectorAll('text.unknown').length,
                            fill: (Math.max(...rights) - box.left) / box.width};
                };
                const step2 = document.getElementById('step-2');
                return {
                    plots: ['tokens-plot', 'cost-plot', 'seconds-plot'].map(plot),
                    diffRows: step2.querySelectorAll('table.diff tr.added').length,
                    diffVisible: visible(step2.querySelector('table.diff')),
                    reply: step2.querySelector('pre.reply').innerText,
                    judge: step2.querySelector('.gui-grade .why').innerText,
                    frames: [...step2.querySelectorAll('figure.gui-step')].map(f => f.innerText),
                    settings: document.querySelectorAll('table.settings tr').length,
                };
            }"""
        )
        shot = report_file.with_suffix(".png")
        await page.screenshot(path=str(shot), full_page=True)
    finally:
        await context.close()
    assert problems == []
    assert len(images) == 12 and all(image["ok"] for image in images), images
    assert sorted({image["cls"] for image in images}) == ["gui-frame", "gui-screenshot", "screenshot"]
    assert timeline["width"] > 200 and timeline["height"] > 100
    assert (timeline["shots"], timeline["gui"], timeline["chosen"], timeline["errored"], timeline["lines"]) == (
        4,
        4,
        1,
        2,
        2,
    )
    # The bars spread over their chart, however few the steps (4 steps filled half of it).
    assert all(plot.pop("fill") > 0.8 for plot in shown["plots"]), shown["plots"]
    tokens, cost, seconds = shown["plots"]
    assert tokens == {"drawn": True, "bars": 8, "unknown": 0}  # input and output per step
    assert cost["drawn"] and cost["unknown"] == 0  # the demo's scripted model is free: $0, not "?"
    assert seconds == {"drawn": True, "bars": 4, "unknown": 0}
    assert shown["diffVisible"] and shown["diffRows"] > 20
    assert "<boltAction" in shown["reply"]
    assert shown["judge"].startswith("Clicking 'Add item' clears the input but never adds the todo")
    assert len(shown["frames"]) == 3
    assert 'input "New todo"' in shown["frames"][0] and 'click button "Add item"' in shown["frames"][1]
    assert shown["settings"] > 10
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 10_000


_CONTRAST = """el => {
    const rgb = c => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
    const lum = c => {
        const [r, g, b] = rgb(c).map(v => v / 255).map(v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const style = getComputedStyle(el);
    const [a, b] = [lum(style.color), lum(style.backgroundColor)].sort((x, y) => y - x);
    return (a + 0.05) / (b + 0.05);
}"""


async def test_recorded_tests_are_readable_and_images_open_at_full_size(report_file: Path, shared_browser) -> None:
    context = await shared_browser.browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = await context.new_page()
        await page.set_content(await asyncio.to_thread(report_file.read_text, encoding="utf-8"), wait_until="load")
        # The recorded GUI tests' code: WCAG AA asks 4.5:1 of body text.
        contrast = await page.eval_on_selector("pre.code", _CONTRAST)
        shot = page.locator("img.screenshot").first
        small = await shot.evaluate("i => [i.getBoundingClientRect().width, i.naturalWidth]")
        await shot.click()
        large = await shot.evaluate(
            "i => [i.getBoundingClientRect().width, getComputedStyle(i.parentElement).position]"
        )
        await shot.click()
        closed = await shot.evaluate("i => i.getBoundingClientRect().width")
    finally:
        await context.close()
    assert contrast >= 4.5, contrast
    assert small[0] < small[1]  # shown smaller than it is ...
    assert large[0] >= small[1] and large[1] == "fixed"  # ... a click shows it at its own size over the page ...
    assert closed == small[0]  # ... and another click puts it back


async def test_forks_are_shown_as_branches(demo_run) -> None:
    result, base = demo_run
    state = await final_state(_db(base), result.run_id)
    parent = RunIndex(_db(base)).get(result.run_id)
    assert parent is not None
    fork = dataclasses.replace(
        parent, run_id="demo-fork", parent_run=parent.run_id, fork_step=1, out_dir=str(base / "fork")
    )
    store = BlobStore(_db(base))
    try:
        as_fork = build_report("demo-fork", state, fork, [parent, fork], store)
        as_parent = build_report(parent.run_id, state, parent, [parent, fork], store)
    finally:
        store.close()

    assert as_fork.parent is not None and as_fork.parent.run_id == parent.run_id
    assert [s.index for s in as_fork.steps if s.inherited] == [0, 1]
    fork_page = render_report(as_fork)
    assert f'Fork of run <a href="file://{parent.out_dir}/report.html"><b>{parent.run_id}</b></a>' in fork_page
    assert "branched after step 1" in fork_page and fork_page.count('<span class="badge inherited">') == 2

    assert [f.run_id for f in as_parent.forks] == ["demo-fork"] and as_parent.parent is None
    parent_page = render_report(as_parent)
    assert "Forks of this run" in parent_page and str(base / "fork" / "report.html") in parent_page


def test_backtracks_are_drawn_on_the_timeline(demo_run) -> None:
    from webgen_agent.apps.report.model import RunReport, StepReport, Totals

    steps = [
        StepReport(index=i, role="refiner", action="edit", errored=i in (1, 2), screenshot_score=s)
        for i, s in enumerate([3, 0, 1, 4])
    ]
    report = RunReport(
        run_id="r",
        requirement="x",
        status="finished",
        chosen_step=3,
        steps=steps,
        events=[{"kind": "backtrack", "after_step": 2, "target_step": 0, "reason": "2 errors"}],
        totals=Totals(steps=4, seconds=0, input_tokens=0, output_tokens=0, model_calls=0),
    )
    page = render_report(report)
    assert page.count('<g class="backtrack">') == 1 and "↩ 0" in page
    assert "backtrack</b> after step 2 → step 0" in page


def test_unknown_run_is_a_one_line_error(demo_run) -> None:
    _, base = demo_run
    invoked = CliRunner().invoke(app, ["report", "no-such-run", "--db", str(_db(base))])
    assert invoked.exit_code == 2
    assert "no run no-such-run" in invoked.output


def test_a_grade_that_failed_says_why() -> None:
    from webgen_agent.apps.report.model import GuiTest, RunReport, StepReport, Totals

    judge_failed = StepReport(
        index=0,
        role="generator",
        action="edit",
        errored=True,
        execution_ok=True,
        description="The screenshot could not be graded: the model's answer was not valid JSON",
    )
    gui_failed = StepReport(
        index=1,
        role="refiner",
        action="edit",
        screenshot_score=4,
        description="A list.",
        gui_score=1,
        gui_passed=False,
        gui=GuiTest(passed=False, score=1, suggestions=["The GUI test could not be judged: HTTP 500"]),
    )
    report = RunReport(
        run_id="r",
        requirement="x",
        status="failed",
        chosen_step=None,
        steps=[judge_failed, gui_failed],
        totals=Totals(steps=2, seconds=0, input_tokens=0, output_tokens=0, model_calls=0),
    )
    page = render_report(report)
    assert 'Screenshot judge</b> 0/5: <span class="why">The screenshot could not be graded: the model' in page
    assert 'failed 1/5</span>: <span class="why">The GUI test could not be judged: HTTP 500' in page
