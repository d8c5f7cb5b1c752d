"""WebGen-Bench in one call: generate a site per instruction with the agent, evaluate, score.

Output folder layout::

    DIR/webgen.db           run database (checkpoints, runs table) unless --db names another
    DIR/runs/<id>/          each agent run's output folder (site/, steps/<n>.png, run.json)
    DIR/sites/<id>/         the final site of each instruction (what is evaluated)
    DIR/generation.jsonl    one line per instruction: run id, status, steps, time, tokens
    DIR/results.jsonl       one line per test case: verdict, reason, actions, time, tokens
    DIR/sites.jsonl         one line per instruction: started?, appearance 1-5, time, tokens
    DIR/eval/<id>/          evaluation logs and the graded landing-page screenshot
    DIR/summary.json        the figures (``BenchSummary``)

Everything is resumable. Generation: run ids are ``bench-<name>-<record id>``; a finished run is
skipped (its site copied again if missing), an interrupted or failed one is resumed from its last
checkpoint. Evaluation: results already on file are kept (``retry_errors`` redoes those that ended
in an infrastructure error). Instructions whose generation did not finish are not evaluated, so a
re-run can still generate and evaluate them; until then their test cases count 0 as missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol

from webgen_agent.apps.bench.config import BenchSetup, EvalSettings
from webgen_agent.apps.bench.evaluate import Evaluator, RemoteSite
from webgen_agent.apps.bench.results import JsonlStore
from webgen_agent.apps.bench.score import summarize
from webgen_agent.apps.bench.views import BenchSummary, GenerationRecord
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.outputs import RunSummary
from webgen_agent.checkpoints.runs import RunIndex, RunRecord
from webgen_agent.core.context import AgentContext
from webgen_agent.core.costs import Spending
from webgen_agent.graph.api import COST_SETTINGS, resume_run, run_requirement
from webgen_agent.nodes.resources import Resources, use_resources
from webgen_agent.tools.models import ModelCallError
from webgen_agent.tools.webgen_bench import BenchRecord

logger = logging.getLogger(__name__)

Notify = Callable[[str], None]
# Generation of one record elsewhere (apps/cluster/bench.py: on a Ray actor); None: not started,
# the benchmark's budget being spent when its turn came.
RemoteGeneration = Callable[[BenchRecord], Awaitable[GenerationRecord | None]]
Progress = Callable[[dict[str, Any]], None]


class RemoteBench(Protocol):
    """Generation and evaluation elsewhere (apps/cluster/bench.py: on Ray actors), this process
    still writing every output file."""

    async def generate(self, record: BenchRecord) -> GenerationRecord | None: ...

    def evaluation(self, evaluator: Evaluator) -> RemoteSite: ...


# Starts a ``RemoteBench`` for one benchmark invocation (``run_bench``'s ``remote``; apps/cluster/bench.py's
# ``on_ray``), given what every worker needs, the run database, where to say progress and the budget.
RemoteBenchFactory = Callable[..., AbstractAsyncContextManager[RemoteBench]]
GENERATION_FILE = "generation.jsonl"
SUMMARY_FILE = "summary.json"


def bench_run_id(name: str, record_id: str) -> str:
    """The agent run of one instruction in the benchmark named ``name`` (stable, so re-runs find it)."""
    return f"bench-{name}-{record_id}"


def _summary_of(run_out_dir: Path) -> RunSummary | None:
    try:
        return RunSummary.model_validate_json((run_out_dir / "run.json").read_text())
    except (OSError, ValueError):
        return None


class Generator:
    """Runs the agent on each record, ``workers`` at a time, sharing one Chromium."""

    def __init__(
        self,
        context: AgentContext,
        out_dir: Path,
        *,
        db_path: str | Path | Database,
        name: str,
        workers: int,
        notify: Notify | None = None,
        spending: Spending | None = None,
        on_progress: Progress | None = None,
    ) -> None:
        self.context = context
        self.spending = spending
        # Each run's progress events: counted against the budget here, or sent on (a Ray actor's
        # generator sends them to the driver, which counts them).
        self.on_progress = on_progress or (spending.add if spending is not None else None)
        self.not_started: list[str] = []  # record ids left alone once the budget was spent
        self.out_dir = Path(out_dir)
        self.db_path = Database.of(db_path)
        self.name = name
        self.store = JsonlStore(self.out_dir / GENERATION_FILE, GenerationRecord)
        self.notify = notify or (lambda message: None)
        self._slots = asyncio.Semaphore(workers)

    def site_dir(self, record_id: str) -> Path:
        return self.out_dir / "sites" / record_id

    async def generate(
        self, records: list[BenchRecord], *, remote: RemoteGeneration | None = None
    ) -> dict[str, GenerationRecord]:
        """Generate the records not finished yet (here, or with ``remote``, e.g. on Ray actors);
        returns every generation on file by record id."""
        done = self.store.load()
        todo = [r for r in records if not self._finished(done.get(r.id))]
        for record_id in sorted({r.id for r in records} - {r.id for r in todo}):
            self.notify(f"{record_id}: generated earlier, skipped")
        if todo and remote is not None:
            await asyncio.gather(*(self._remote_one(record, remote) for record in todo))
        elif todo:
            Resources.reap_orphans(self.db_path)  # servers and browsers of a killed earlier run
            async with use_resources(Resources(self.db_path, chromium=self.context.chromium)):
                await asyncio.gather(*(self._one(record) for record in todo))
        if self.not_started and self.spending is not None:
            self.notify(
                f"budget spent ({self.spending.reached()}): {len(records) - len(self.not_started)} of "
                f"{len(records)} instruction(s) generated, {len(self.not_started)} not started; "
                f"{self.spending.line()}; re-run (with a larger budget) to continue"
            )
        return {g.record_id: g for g in self.store.compact(order=lambda g: g.record_id)}

    def _finished(self, generated: GenerationRecord | None) -> bool:
        if generated is None or generated.status != "finished":
            return False
        return generated.site is None or (self.out_dir / generated.site).is_dir()

    async def _one(self, record: BenchRecord) -> None:
        async with self._slots:
            if self.spending is not None and not self.spending.has_room():
                self._left_out(record)
                return
            self._store(await self.generate_one(record))

    async def _remote_one(self, record: BenchRecord, remote: RemoteGeneration) -> None:
        generated = await remote(record)
        if generated is None:
            self._left_out(record)
        else:
            self._store(generated)

    def _left_out(self, record: BenchRecord) -> None:
        self.not_started.append(record.id)
        self.notify(f"{record.id}: not started, the benchmark's budget is spent")

    async def generate_one(self, record: BenchRecord) -> GenerationRecord:
        """Run (or continue) the agent on one record inside the bound resources; never raises."""
        run_id = bench_run_id(self.name, record.id)
        started = time.monotonic()
        self.notify(f"{record.id}: generating ({run_id})")
        error = None
        try:
            await self._run(record, run_id)
        except (ModelCallError, ValueError) as exc:  # endpoint down, run still running elsewhere: said in one line
            error = f"{type(exc).__name__}: {str(exc)[:500]}"
        except Exception as exc:  # one failed run never stops the others; it is resumed on a re-run
            logger.exception("generation of %s failed", record.id)
            error = f"{type(exc).__name__}: {str(exc)[:500]}"
        return self._generation_record(record, run_id, time.monotonic() - started, error)

    def _store(self, generated: GenerationRecord) -> None:
        self.store.append(generated)
        self.notify(
            f"{generated.record_id}: {generated.status}, {generated.steps} step(s), {generated.seconds:.1f} s"
            + (f" - {generated.error}" if generated.error else "")
        )

    async def _run(self, record: BenchRecord, run_id: str) -> None:
        runs = RunIndex(self.db_path)
        existing = runs.get(run_id)
        on_progress = self.on_progress
        if existing is None:
            await run_requirement(
                record.instruction,
                context=self.context,
                run_id=run_id,
                out_dir=self.out_dir / "runs" / record.id,
                group_id=record.id,
                db_path=self.db_path,
                on_progress=on_progress,
            )
        elif existing.status != "finished":
            # The run keeps the settings it was started with; prices and budgets are this command's
            # (its budget is the whole benchmark's).
            await resume_run(
                run_id,
                context=self.context,
                changes=self.context.model_dump(include=set(COST_SETTINGS)),
                db_path=self.db_path,
                on_progress=on_progress,
            )

    def _generation_record(
        self, record: BenchRecord, run_id: str, seconds: float, error: str | None
    ) -> GenerationRecord:
        """What the run left (status, summary), with its final site copied to sites/<id>."""
        run: RunRecord | None = RunIndex(self.db_path).get(run_id)
        summary = _summary_of(Path(run.out_dir)) if run is not None else None
        status = run.status if run is not None else "failed"
        site = None
        if run is not None and status == "finished" and (Path(run.out_dir) / "site").is_dir():
            target = self.site_dir(record.id)
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(Path(run.out_dir) / "site", target, symlinks=True)
            site = str(target.relative_to(self.out_dir))
        return GenerationRecord(
            record_id=record.id,
            run_id=run_id,
            status=status,
            site=site,
            steps=len(summary.steps) if summary else 0,
            chosen_step=summary.chosen_step if summary else None,
            seconds=round(seconds, 3),
            node_seconds=summary.wall_seconds if summary else 0.0,
            input_tokens=summary.input_tokens if summary else 0,
            output_tokens=summary.output_tokens if summary else 0,
            model_calls=summary.model_calls if summary else 0,
            error=error or (run.error or None if run is not None and status != "finished" else None),
        )


async def run_bench(
    records: list[BenchRecord],
    *,
    data: Path,
    out_dir: Path,
    eval_settings: EvalSettings,
    context: AgentContext | None = None,
    sites_dir: Path | None = None,
    db_path: str | Path | Database | None = None,
    name: str | None = None,
    deps_cache_dir: Path | None = None,
    retry_errors: bool = False,
    notify: Notify | None = None,
    spending: Spending | None = None,
    remote: RemoteBenchFactory | None = None,
) -> BenchSummary:
    """Generate (with ``context``) or take sites from ``sites_dir`` (one folder per record id), evaluate, score.

    With ``spending`` (the whole benchmark's budget), no generation is started once it is spent; the
    sites generated by then are evaluated (evaluation's own model calls are not counted). With
    ``remote`` (apps/cluster/bench.py's ``on_ray``), generation and evaluation run elsewhere; this
    process still writes every output file, says every progress line and counts the budget.
    """
    if (context is None) == (sites_dir is None):
        raise ValueError("give either an agent context (generate) or a sites folder (evaluate only)")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    database = Database.of(db_path if db_path is not None else out_dir / "webgen.db")
    # Built first: a missing Chromium is reported before hours of generation, not after.
    evaluator = Evaluator(
        eval_settings,
        out_dir,
        deps_cache_dir=deps_cache_dir or database.local_dir / "deps-cache",
        retry_errors=retry_errors,
        notify=notify,
    )
    async with contextlib.AsyncExitStack() as stack:
        elsewhere: RemoteBench | None = None
        if remote is not None:
            setup = BenchSetup(
                out_dir=str(out_dir.resolve()),
                name=name or out_dir.resolve().name,
                eval_settings=eval_settings,
                context=context,
                retry_errors=retry_errors,
            )
            elsewhere = await stack.enter_async_context(
                remote(setup=setup, db=database, notify=notify or (lambda message: None), spending=spending)
            )
        generated: dict[str, GenerationRecord] | None = None
        if context is not None:
            generator = Generator(
                context,
                out_dir,
                db_path=database,
                name=name or out_dir.resolve().name,
                workers=eval_settings.workers,
                notify=notify,
                spending=spending,
            )
            generated = await generator.generate(records, remote=elsewhere.generate if elsewhere else None)
            site_dirs = {
                r.id: (out_dir / g.site if g.site else None)
                for r in records
                if (g := generated.get(r.id)) is not None and g.status == "finished"
            }
            skipped = [r.id for r in records if r.id not in site_dirs]
            if skipped and notify is not None:
                notify(f"not evaluated (generation did not finish; re-run to resume): {', '.join(skipped)}")
            to_evaluate = [r for r in records if r.id in site_dirs]
        else:
            assert sites_dir is not None
            site_dirs = {r.id: Path(sites_dir) / r.id for r in records}
            to_evaluate = records
        await evaluator.evaluate(to_evaluate, site_dirs, remote=elsewhere.evaluation(evaluator) if elsewhere else None)
    summary = summarize(
        records,
        evaluator.cases.load(),  # type: ignore[arg-type]
        evaluator.sites.load(),  # type: ignore[arg-type]
        data=str(data),
        generated=[generated[r.id] for r in records if r.id in generated] if generated is not None else None,
        models=eval_settings.model_names(),
    )
    (out_dir / SUMMARY_FILE).write_text(json.dumps(summary.model_dump(mode="json"), indent=2))
    return summary
