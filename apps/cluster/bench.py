"""WebGen-Bench on Ray: each record's generation, then each record's evaluation, is a job of a ``RayPool``.

The actors run the in-process benchmark's own pieces (``Generator.generate_one``,
``Evaluator.evaluate_record``) around their resources; their results come back to the driver,
which writes every output file (generation.jsonl, results.jsonl, sites.jsonl, summary.json) and
prints every progress line, as in-process. Run folders (runs/, sites/, eval/) are written by the
actor on its machine: on several machines, give ``--out`` on a filesystem they share.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Hashable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from webgen_agent.apps.bench.config import BenchSetup
from webgen_agent.apps.bench.evaluate import Evaluator, Notify, RemoteSite
from webgen_agent.apps.bench.service import Generator, RemoteBenchFactory, bench_run_id
from webgen_agent.apps.bench.views import CaseResult, GenerationRecord, SiteResult
from webgen_agent.apps.cluster.actor import Item, emit
from webgen_agent.apps.cluster.driver import GIVEN_UP, RayPool
from webgen_agent.apps.cluster.settings import RaySettings
from webgen_agent.checkpoints.database import Database
from webgen_agent.core.context import dump_with_secrets
from webgen_agent.core.costs import Spending
from webgen_agent.nodes.resources import Resources
from webgen_agent.tools.webgen_bench import BenchRecord


class BenchJob(BaseModel):
    """Generate one record's site, or evaluate it (its results so far say what is left)."""

    kind: Literal["generate", "evaluate"]
    record: dict[str, Any] = Field(description="The BenchRecord, as in the data file.")
    site_dir: str | None = None
    done_cases: list[CaseResult] = Field(default_factory=list)
    done_site: SiteResult | None = None


def _notify(message: str) -> None:
    emit({"kind": "notify", "message": message})


def _send_event(event: dict[str, Any]) -> None:
    emit({"kind": "event", "event": event})


def _send_result(result: CaseResult | SiteResult) -> None:
    emit({"kind": "case" if isinstance(result, CaseResult) else "site", "result": result.model_dump(mode="json")})


class BenchWork:
    """Inside an actor: one Generator and one Evaluator (its browser kept) for all its jobs."""

    def __init__(self, setup_json: str, runs_per_actor: int, resources: Resources) -> None:
        self.setup = BenchSetup.model_validate_json(setup_json)
        self.resources = resources
        self.runs_per_actor = runs_per_actor
        self._evaluator: Evaluator | None = None

    @functools.cached_property
    def generator(self) -> Generator:
        assert self.setup.context is not None, "generation jobs need the agent's context"
        out_dir, database = Path(self.setup.out_dir), self.resources.database
        return Generator(
            self.setup.context,
            out_dir,
            db_path=database,
            name=self.setup.name,
            workers=1,
            notify=_notify,
            on_progress=_send_event,  # the driver counts them against the benchmark's budget
        )

    def evaluator(self) -> Evaluator:
        if self._evaluator is None:
            self._evaluator = Evaluator(
                self.setup.eval_settings.model_copy(update={"workers": self.runs_per_actor}),
                Path(self.setup.out_dir),
                deps_cache_dir=self.resources.deps_cache_dir,
                retry_errors=self.setup.retry_errors,
                notify=_notify,
                registry=self.resources.registry,  # reaped with the actor's other processes if it dies
                sink=_send_result,
            )
        return self._evaluator

    async def run(self, job_json: str) -> Any:
        job = BenchJob.model_validate_json(job_json)
        record = BenchRecord.model_validate(job.record)
        if job.kind == "generate":
            return (await self.generator.generate_one(record)).model_dump(mode="json")
        done_sites: dict[Hashable, SiteResult] = {job.done_site.key: job.done_site} if job.done_site else {}
        site_dir = Path(job.site_dir) if job.site_dir else None
        await self.evaluator().evaluate_record(record, site_dir, {c.key: c for c in job.done_cases}, done_sites)
        return None

    async def close(self) -> None:
        if self._evaluator is not None:
            await self._evaluator.close()


class BenchOnRay:
    """The driver's side: sends records to the pool, writes what comes back."""

    def __init__(self, pool: RayPool, *, name: str, notify: Notify, spending: Spending | None = None) -> None:
        self.pool = pool
        self.name = name
        self.notify = notify
        self.spending = spending

    def _on_notify(self, item: Item) -> None:
        if item["kind"] == "notify":
            self.notify(item["message"])

    def _on_generation_item(self, item: Item) -> None:
        if item["kind"] == "event":
            if self.spending is not None:
                self.spending.add(item["event"])
        else:
            self._on_notify(item)

    async def generate(self, record: BenchRecord) -> GenerationRecord | None:
        """One record's generation on an actor; None when the budget was spent before its turn."""
        job = BenchJob(kind="generate", record=record.model_dump(mode="json", by_alias=True)).model_dump_json()
        run_id = bench_run_id(self.name, record.id)
        may_start = self.spending.has_room if self.spending is not None else None
        ran = await self.pool.run(lambda: job, on_item=self._on_generation_item, run_id=run_id, may_start=may_start)
        if ran is None:
            return None
        done, value = ran
        if done:
            return GenerationRecord.model_validate(value)
        return GenerationRecord(record_id=record.id, run_id=run_id, status="failed", error=GIVEN_UP)

    def evaluation(self, evaluator: Evaluator) -> RemoteSite:
        """The evaluator's ``remote``: one record's site evaluated on an actor, its results written here."""

        async def evaluate(record: BenchRecord, site_dir: Path | None) -> None:
            def job() -> str:  # built at each attempt: a retry skips what an earlier attempt finished
                cases = [c for c in evaluator.cases.load().values() if c.record_id == record.id]
                return BenchJob(
                    kind="evaluate",
                    record=record.model_dump(mode="json", by_alias=True),
                    site_dir=str(Path(site_dir).resolve()) if site_dir else None,
                    done_cases=cases,
                    done_site=evaluator.sites.load().get(record.id),
                ).model_dump_json()

            def on_item(item: Item) -> None:
                if item["kind"] == "case":
                    evaluator.store_result(CaseResult.model_validate(item["result"]))
                elif item["kind"] == "site":
                    evaluator.store_result(SiteResult.model_validate(item["result"]))
                else:
                    self._on_notify(item)

            ran = await self.pool.run(job, on_item=on_item)
            if ran is None or not ran[0]:
                self.notify(f"{record.id}: evaluation not finished - {GIVEN_UP}")

        return evaluate


def on_ray(settings: RaySettings) -> RemoteBenchFactory:
    """``run_bench``'s ``remote``: generation and evaluation on the Ray actors ``settings`` describe."""
    return functools.partial(bench_on_ray, settings)


@contextlib.asynccontextmanager
async def bench_on_ray(
    settings: RaySettings,
    *,
    setup: BenchSetup,
    db: Database,
    notify: Notify,
    spending: Spending | None = None,
) -> AsyncIterator[BenchOnRay]:
    """Start the actors of one benchmark invocation (closed, with their servers, at the end);
    ``spending``: the benchmark's budget, counted here from the events the actors send."""
    work = functools.partial(BenchWork, dump_with_secrets(setup), settings.runs_per_actor)
    chromium = setup.context.chromium if setup.context else setup.eval_settings.chromium
    async with RayPool(settings, work=work, db=db, chromium=chromium) as pool:
        yield BenchOnRay(pool, name=setup.name, notify=notify, spending=spending)
