"""WebGen-Bench evaluation: start each site, run every UI test case with a GUI agent, grade the look.

Per record: the site folder is copied to a scratch workspace (the original is never touched; its
``node_modules`` is not copied, dependencies come from the shared cache or npm), installed with
the ``--force`` / ``--legacy-peer-deps`` retries and started. A site that never serves is Start
Failed for all its test cases and scores 0 for appearance. Otherwise each test case gets one GUI
agent session in a fresh browser context of the evaluation's one Chromium (like upstream's fresh
browser per task: no localStorage or cookies carried from one case to the next, and the agent sees
no other case's tabs) and the landing page is screenshot in the same Chromium and graded by the VLM.

Verdicts: in ``webgen-bench`` mode (the default) the agent runs as WebGen-Bench runs it (one action
per iteration, 3 screenshots kept, an answer forced at the last iteration) and WebGen-Bench's own
rule decides from its final answer: "YES" anywhere, else "PARTIAL" anywhere, else NO (no answer is
NO), so accuracy is comparable with the paper's. In ``strict`` mode the answer decides only when it starts with YES,
PARTIAL or NO; otherwise (the agent ran out of actions or time, or answered something else) the
feedback model judges the run from its actions and last screenshot, as a ``CaseVerdict``. In
``feedback`` mode the feedback model always decides.

Every result is appended to ``results.jsonl`` / ``sites.jsonl`` as soon as it exists, so an
interrupted evaluation continues where it stopped. One broken site or failing case is recorded
(``source="error"``, with the error) and never stops the rest.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import shutil
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path

from webgen_agent.apps.bench import prompts
from webgen_agent.apps.bench.config import EvalSettings
from webgen_agent.apps.bench.results import JsonlStore
from webgen_agent.apps.bench.views import Answer, CaseResult, CaseVerdict, SiteResult, VerdictSource
from webgen_agent.core.context import api_key_for, find_chromium
from webgen_agent.core.costs import Usage
from webgen_agent.core.profiles import profile_rules
from webgen_agent.nodes.gui_testing import describe_action
from webgen_agent.tools.browser import SharedBrowser
from webgen_agent.tools.gui_agent import GuiAgentSettings, GuiRun, leading_answer, run_gui_agent
from webgen_agent.tools.models import ModelCallError, ask_structured, complete
from webgen_agent.tools.process import ProcessRegistry
from webgen_agent.tools.site import DEPS_MARKER, ExecutionResult, SiteRunner
from webgen_agent.tools.webgen_bench import BenchRecord, UITestCase

logger = logging.getLogger(__name__)

Notify = Callable[[str], None]
Sink = Callable[[CaseResult | SiteResult], None]
# Evaluation of one record's site elsewhere (apps/cluster/bench.py: on a Ray actor).
RemoteSite = Callable[[BenchRecord, Path | None], Awaitable[None]]
RESULTS_FILE = "results.jsonl"
SITES_FILE = "sites.jsonl"
# Copied sites leave these behind: installed packages, VCS data, the agent's bookkeeping.
_NOT_COPIED = ("node_modules", ".git", DEPS_MARKER, ".webgen-manifest")


def webgen_bench_verdict(text: str | None) -> Answer:
    """WebGen-Bench's verdict (compute_acc.py) on the agent's last message, read whole (``GuiRun.last_message``:
    its reasoning and its answer): "YES" anywhere, else "PARTIAL" anywhere, else NO; case-sensitive, no
    message is NO."""
    text = text or ""
    if "YES" in text:
        return "YES"
    if "PARTIAL" in text:
        return "PARTIAL"
    return "NO"


def webgen_bench_agent(case: UITestCase) -> dict[str, object]:
    """The GUI agent as WebGen-Bench runs it (webvoyager/run.py with --max_iter 15 --max_attached_imgs 3):
    WebVoyager's rules, which the upstream profile's GUI agent follows too (one action per iteration,
    the latest 3 screenshots in every request, no giving up after failed steps), and on the last
    iteration an answer forced against the expected result, so that a run out of actions still says
    YES, PARTIAL or NO."""
    return {**profile_rules("upstream").gui_agent(), "last_step_prompt": prompts.case_limit(case.expected_result)}


def parse_answer(text: str | None) -> Answer | None:
    """YES / PARTIAL / NO when the agent's final answer's first word is one of them, else None."""
    return leading_answer(text)


@dataclass
class _Decision:
    verdict: Answer
    reason: str
    source: VerdictSource
    usage: Usage
    error: str | None = None


def _short(text: str, limit: int = 600) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _png_part(png: bytes) -> dict:
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode("ascii")}}


def verdict_messages(case: UITestCase, run: GuiRun) -> list[dict]:
    text = prompts.case_verdict_user(
        case.task, case.expected_result, [describe_action(a) for a in run.actions], run.final_answer, run.stopped_reason
    )
    content: list[dict] = [{"type": "text", "text": text}]
    if run.final_screenshot_png:
        content.append(_png_part(run.final_screenshot_png))
    return [{"role": "user", "content": content}]


def appearance_messages(requirement: str, png: bytes) -> list[dict]:
    return [
        {"role": "system", "content": prompts.APPEARANCE_SYSTEM},
        {"role": "user", "content": [{"type": "text", "text": prompts.appearance_user(requirement)}, _png_part(png)]},
    ]


def start_failed_case(record: BenchRecord, index: int, case: UITestCase, why: str) -> CaseResult:
    return _case_result(record, index, case, verdict="START_FAILED", reason=why, source="start_failed")


def _case_result(record: BenchRecord, index: int, case: UITestCase, **fields: object) -> CaseResult:
    return CaseResult(
        record_id=record.id,
        case_index=index,
        task=case.task,
        expected_result=case.expected_result,
        instruction_category=record.category.primary_category,
        case_category=case.task_category.primary_category,
        **fields,  # type: ignore[arg-type]
    )


class Evaluator:
    """Evaluates records' sites into ``out_dir/results.jsonl`` and ``out_dir/sites.jsonl``."""

    def __init__(
        self,
        settings: EvalSettings,
        out_dir: Path,
        *,
        deps_cache_dir: Path | None = None,
        retry_errors: bool = False,
        notify: Notify | None = None,
        registry: ProcessRegistry | None = None,
        sink: Sink | None = None,
    ) -> None:
        """``registry``: where its servers and browser are recorded (default: the output folder's);
        ``sink``: takes each result instead of ``store_result`` (a Ray actor sends them to the driver)."""
        self.settings = settings
        self.out_dir = Path(out_dir)
        self.work_dir = self.out_dir / "eval"
        self.cases = JsonlStore(self.out_dir / RESULTS_FILE, CaseResult)
        self.sites = JsonlStore(self.out_dir / SITES_FILE, SiteResult)
        self.registry = registry or ProcessRegistry(self.out_dir / "processes.jsonl")
        self.sink: Sink = sink or self.store_result
        self.deps_cache_dir = deps_cache_dir
        self.retry_errors = retry_errors
        self.notify = notify or (lambda message: None)
        self._chromium = find_chromium(settings.chromium)
        self._site_slots = asyncio.Semaphore(settings.workers)
        self._sessions = asyncio.Semaphore(settings.workers)
        self._browser: SharedBrowser | None = None
        self._browser_lock = asyncio.Lock()

    # -- the whole evaluation --------------------------------------------------------------------
    async def evaluate(
        self, records: list[BenchRecord], site_dirs: Mapping[str, Path | None], *, remote: RemoteSite | None = None
    ) -> None:
        """Evaluate every record whose results are not all in yet; ``site_dirs[id]`` None = no site.
        With ``remote`` each such record is evaluated elsewhere (a Ray actor) and its results come back."""
        self.registry.reap()  # servers left by an evaluation that was killed
        done_cases, done_sites = self.cases.load(), self.sites.load()
        todo = []
        for record in records:
            cases, grade = self.pending(record, done_cases, done_sites)
            if cases or grade:
                todo.append(record)
        try:
            if remote is not None:
                await asyncio.gather(*(remote(r, site_dirs.get(r.id)) for r in todo))
            else:
                await asyncio.gather(
                    *(self.evaluate_record(r, site_dirs.get(r.id), done_cases, done_sites) for r in todo)
                )
        finally:
            await self.close()
        self.cases.compact(order=lambda c: (c.record_id, c.case_index))
        self.sites.compact(order=lambda s: s.record_id)

    async def close(self) -> None:
        """Close its browser and whatever a cancelled evaluation left running."""
        await self._close_browser()
        self.registry.kill_all()

    def _needed(self, result: CaseResult | SiteResult | None) -> bool:
        return result is None or (self.retry_errors and result.error is not None)

    def pending(
        self, record: BenchRecord, done_cases: Mapping[Hashable, CaseResult], done_sites: Mapping[Hashable, SiteResult]
    ) -> tuple[list[tuple[int, UITestCase]], bool]:
        """The record's test cases still to run, and whether its appearance is still to grade."""
        cases = [
            (index, case)
            for index, case in enumerate(record.test_cases)
            if self._needed(done_cases.get((record.id, index, case.task)))
        ]
        return cases, self._needed(done_sites.get(record.id))

    async def evaluate_record(
        self,
        record: BenchRecord,
        site_dir: Path | None,
        done_cases: Mapping[Hashable, CaseResult],
        done_sites: Mapping[Hashable, SiteResult],
    ) -> None:
        """Start the record's site, run its pending test cases, grade it; every result goes to the sink."""
        pending, grade = self.pending(record, done_cases, done_sites)
        if not pending and not grade:
            return
        async with self._site_slots:
            written: set[int] = set()
            try:
                await self._evaluate_site(record, site_dir, pending, grade, written)
            except Exception as exc:  # one broken site never stops the others
                logger.exception("evaluating %s failed", record.id)
                error = f"evaluation of the site failed: {type(exc).__name__}: {_short(str(exc))}"
                for index, case in pending:
                    if index not in written:
                        self._write_case(
                            _case_result(record, index, case, verdict="NO", reason=error, source="error", error=error)
                        )
                if grade:
                    self._write_site(
                        SiteResult(
                            record_id=record.id,
                            instruction_category=record.category.primary_category,
                            started=False,
                            error=error,
                        )
                    )

    # -- one site --------------------------------------------------------------------------------
    async def _evaluate_site(
        self,
        record: BenchRecord,
        site_dir: Path | None,
        pending: list[tuple[int, UITestCase]],
        grade: bool,
        written: set[int],
    ) -> None:
        started = time.monotonic()
        workspace = self._prepare(record.id, site_dir)
        runner = None
        if workspace is None:
            served = ExecutionResult(ok=False, stage="start", error=f"no site folder for {record.id}")
        else:
            runner = SiteRunner(
                workspace,
                registry=self.registry,
                install_timeout_s=self.settings.install_timeout_s,
                start_timeout_s=self.settings.start_timeout_s,
                log_dir=self.work_dir / record.id / "logs",
                deps_cache_dir=self.deps_cache_dir,
                sandbox=self.settings.sandbox,
            )
        try:
            if runner is not None:
                served = await runner.ensure_running(None)
            if not served.ok or not served.url:
                self._site_failed(record, served, pending, grade, written, time.monotonic() - started)
                return
            self.notify(f"{record.id}: site up at {served.url} ({len(pending)} test case(s) to run)")
            url = served.url
            jobs = [self._case(record, index, case, url, written) for index, case in pending]
            if grade:
                jobs.append(self._appearance(record, served))
            await asyncio.gather(*jobs)
        finally:
            if runner is not None:
                await runner.stop()
            if workspace is not None:
                shutil.rmtree(workspace, ignore_errors=True)

    def _prepare(self, record_id: str, site_dir: Path | None) -> Path | None:
        """A scratch copy of the site (without installed packages), or None when there is no site."""
        if site_dir is None or not Path(site_dir).is_dir() or not any(Path(site_dir).iterdir()):
            return None
        workspace = self.work_dir / record_id / "site"
        shutil.rmtree(workspace, ignore_errors=True)  # half a copy from an interrupted evaluation
        shutil.copytree(site_dir, workspace, symlinks=True, ignore=shutil.ignore_patterns(*_NOT_COPIED))
        return workspace

    def _site_failed(
        self,
        record: BenchRecord,
        served: ExecutionResult,
        pending: list[tuple[int, UITestCase]],
        grade: bool,
        written: set[int],
        seconds: float,
    ) -> None:
        why = f"the site never started ({served.stage}): {_short(served.error or 'no URL')}"
        self.notify(f"{record.id}: START FAILED - {why}")
        for index, case in pending:
            self._write_case(start_failed_case(record, index, case, why))
            written.add(index)
        if grade:
            self._write_site(
                SiteResult(
                    record_id=record.id,
                    instruction_category=record.category.primary_category,
                    started=False,
                    start_stage=served.stage,
                    start_error=served.error,
                    install_s=served.install_s,
                    start_s=served.start_s,
                    seconds=round(seconds, 3),
                )
            )

    # -- one test case ---------------------------------------------------------------------------
    async def _case(self, record: BenchRecord, index: int, case: UITestCase, url: str, written: set[int]) -> None:
        started = time.monotonic()
        try:
            async with self._sessions:
                started = time.monotonic()  # the case's own time, not its wait for a session
                run = await self._gui_run(url, case)
            decision = await self._decide(case, run)
            result = _case_result(
                record,
                index,
                case,
                verdict=decision.verdict,
                reason=_short(decision.reason),
                source=decision.source,
                final_answer=run.final_answer,
                actions=len(run.actions),
                stopped_reason=run.stopped_reason,
                seconds=round(time.monotonic() - started, 3),
                input_tokens=run.input_tokens + decision.usage.input_tokens,
                output_tokens=run.output_tokens + decision.usage.output_tokens,
                model_calls=run.steps + decision.usage.calls,
                error=decision.error,
            )
        except Exception as exc:  # one failing test case never stops the rest
            logger.exception("test case %s #%d failed", record.id, index)
            error = f"{type(exc).__name__}: {_short(str(exc))}"
            result = _case_result(
                record,
                index,
                case,
                verdict="NO",
                reason=f"the test case could not be run: {error}",
                source="error",
                seconds=round(time.monotonic() - started, 3),
                error=error,
            )
        self._write_case(result)
        written.add(index)

    async def _gui_run(self, url: str, case: UITestCase) -> GuiRun:
        agent = self.settings.agent
        settings = GuiAgentSettings(
            model=agent.model,
            base_url=agent.base_url,
            api_key=api_key_for(agent, "vlm"),
            temperature=agent.temperature,
            max_actions=self.settings.max_actions,
            timeout_s=self.settings.case_timeout_s,
            chromium_path=self._chromium,
            # One Chromium for the whole evaluation; each agent sees only a browser context of its own.
            cdp_url=(await self._shared_browser()).ws_url,
            viewport=(self.settings.viewport_width, self.settings.viewport_height),
            offline_pages=self.settings.offline_pages,
        )
        if self.settings.verdict == "webgen-bench":
            settings = settings.model_copy(update=webgen_bench_agent(case))
        task = prompts.case_task(url, case.task, case.expected_result, self.settings.max_actions)
        return await run_gui_agent(url=url, task=task, settings=settings)

    async def _decide(self, case: UITestCase, run: GuiRun) -> _Decision:
        if run.stopped_reason == "error":
            # The harness failed (endpoint down, browser crash), not the site: no verdict to give.
            error = "; ".join(run.errors) or "the GUI agent failed"
            return _Decision("NO", f"the GUI agent could not run: {error}", "error", Usage(), _short(error))
        if self.settings.verdict == "webgen-bench":
            return _Decision(
                webgen_bench_verdict(run.last_message), _short(run.last_message) or "no final answer", "agent", Usage()
            )
        answer = parse_answer(run.final_answer) if self.settings.verdict == "strict" else None
        if answer is not None:
            return _Decision(answer, run.final_answer or "", "agent", Usage())
        try:
            judged = await ask_structured(self.settings.feedback, "feedback", verdict_messages(case, run), CaseVerdict)
        except ModelCallError as exc:
            return _Decision("NO", f"no verdict: {exc}", "error", Usage(), _short(str(exc)))
        if judged.value is None:
            return _Decision("NO", f"no verdict: {judged.error}", "error", judged.usage, judged.error)
        return _Decision(judged.value.verdict, judged.value.reason, "feedback", judged.usage)

    # -- appearance ------------------------------------------------------------------------------
    async def _shared_browser(self) -> SharedBrowser:
        async with self._browser_lock:
            if self._browser is None:
                self._browser = SharedBrowser(self._chromium, registry=self.registry)
            await self._browser.start()  # relaunches one that died
            return self._browser

    async def _close_browser(self) -> None:
        if self._browser is None:
            return
        try:
            # Bounded: a wedged browser must not hold the results back; kill_all() ends its process.
            await asyncio.wait_for(self._browser.close(), timeout=30)
        except TimeoutError:
            logger.warning("the screenshot browser did not close within 30 s; killing it")

    async def _appearance(self, record: BenchRecord, served: ExecutionResult) -> None:
        started = time.monotonic()
        base = SiteResult(
            record_id=record.id,
            instruction_category=record.category.primary_category,
            started=True,
            install_s=served.install_s,
            start_s=served.start_s,
        )
        try:
            result = await self._grade(record, served.url or "", base)
        except Exception as exc:  # a failed grade must not end the site's test cases
            logger.exception("appearance of %s failed", record.id)
            result = base.model_copy(update={"error": f"{type(exc).__name__}: {_short(str(exc))}"})
        # Start-up plus screenshot and grade: the site's own cost, apart from its test cases.
        seconds = served.install_s + served.start_s + time.monotonic() - started
        self._write_site(result.model_copy(update={"seconds": round(seconds, 3)}))

    async def _grade(self, record: BenchRecord, url: str, base: SiteResult) -> SiteResult:
        browser = await self._shared_browser()
        capture = await browser.capture(
            url,
            viewport=(self.settings.viewport_width, self.settings.viewport_height),
            timeout_s=self.settings.page_timeout_s,
            offline=self.settings.offline_pages,
        )
        if not capture.png:
            return base.model_copy(
                update={"error": f"no screenshot of the landing page: {capture.load_error or 'capture failed'}"}
            )
        shot = self.work_dir / record.id / "landing.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        shot.write_bytes(capture.png)
        base = base.model_copy(update={"screenshot": str(shot.relative_to(self.out_dir))})
        try:
            graded = await complete(
                self.settings.appearance, "vlm", appearance_messages(record.instruction, capture.png)
            )
        except ModelCallError as exc:
            return base.model_copy(update={"error": _short(str(exc))})
        # WebGen-Bench's reading: the first digit after "Grade" in the free-text answer, else 0.
        return base.model_copy(
            update={
                "appearance": prompts.appearance_grade(graded.text),
                "appearance_reason": _short(graded.text),
                "input_tokens": graded.usage.input_tokens,
                "output_tokens": graded.usage.output_tokens,
            }
        )

    # -- records ---------------------------------------------------------------------------------
    def _write_case(self, result: CaseResult) -> None:
        self.sink(result)

    def _write_site(self, result: SiteResult) -> None:
        self.sink(result)

    def store_result(self, result: CaseResult | SiteResult) -> None:
        """Append a result to its file and say it."""
        if isinstance(result, CaseResult):
            self.cases.append(result)
            self.notify(
                f"{result.record_id} #{result.case_index}: {result.verdict} ({result.source}, "
                f"{result.actions} actions, {result.seconds:.1f} s)"
            )
        else:
            self.sites.append(result)
            if result.started:
                self.notify(f"{result.record_id}: appearance {result.appearance}/5")
