"""Group rollouts for Step-GRPO: ``samples`` independent trajectories per instruction.

Each trajectory is its own run (one checkpoint thread) with ``group_id`` = the instruction id and a
deterministic run id (``<name>-<record id>-s<k>``), so running the same rollout again finds them:
finished trajectories are skipped, interrupted or failed ones continue from their last checkpoint.
Several run at a time and all share one bound ``Resources`` (one Chromium, one blob store). A
trajectory that fails is recorded as failed (runs table) and never stops the others. A budget for
the whole rollout (``Spending``) stops it from starting trajectories once spent (docs/costs.md).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from webgen_agent.apps.rollout.settings import (
    ROLLOUT_MAX_STEPS,
    ROLLOUT_TEMPERATURE,
    ROLLOUT_TOP_P,
)
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.runs import RunIndex
from webgen_agent.checkpoints.saver import open_checkpointer
from webgen_agent.core.context import AgentContext
from webgen_agent.core.costs import Spending
from webgen_agent.core.errors import ResumableStop
from webgen_agent.graph.api import COST_SETTINGS, RunResult, resume_run, run_requirement
from webgen_agent.nodes.resources import Resources, use_resources
from webgen_agent.tools.webgen_bench import BenchRecord

_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9._-]+")

OutcomeStatus = Literal["finished", "failed", "skipped", "busy"]


class TrajectorySpec(BaseModel):
    """One planned trajectory: which instruction, which sample, under which run id."""

    run_id: str = Field(description="Deterministic run id: <name>-<record id>-s<k>.")
    group_id: str = Field(description="The instruction (record) id; trajectories of one group are normalised together.")
    sample: int = Field(ge=0, description="Sample number k within the group.")
    requirement: str
    test_cases: list[dict[str, str]] = Field(
        default_factory=list, description="The record's UI test cases (task, expected_result): what checks test."
    )


class TrajectoryOutcome(BaseModel):
    """What happened to one trajectory in this rollout invocation."""

    run_id: str
    group_id: str
    status: OutcomeStatus = Field(
        description="finished; failed (error recorded); skipped (already finished); busy (another live process runs it)."
    )
    resumed: bool = Field(default=False, description="Continued from an earlier interrupted or failed attempt.")
    error: str = ""
    steps: int = 0
    seconds: float = 0.0


class RolloutListener(Protocol):
    """Receives rollout progress (the CLI's live view implements it)."""

    def started(self, spec: TrajectorySpec, *, resumed: bool) -> None: ...

    def event(self, spec: TrajectorySpec, event: dict[str, Any]) -> None: ...

    def ended(self, outcome: TrajectoryOutcome) -> None: ...


def trajectory_run_id(name: str, record_id: str, sample: int) -> str:
    """``<name>-<record id>-s<k>``, with characters unsafe in folder names replaced."""
    return _UNSAFE_ID_CHARS.sub("-", f"{name}-{record_id}-s{sample}")


def plan_rollout(records: Sequence[BenchRecord], *, samples: int, name: str) -> list[TrajectorySpec]:
    """Sample-major order (every instruction's s0, then every s1, ...), so that an interrupted
    rollout has already started every group instead of finishing a few groups completely."""
    if samples < 1:
        raise ValueError("samples must be at least 1")
    return [
        TrajectorySpec(
            run_id=trajectory_run_id(name, record.id, k),
            group_id=record.id,
            sample=k,
            requirement=record.instruction,
            test_cases=[{"task": c.task, "expected_result": c.expected_result} for c in record.test_cases],
        )
        for k in range(samples)
        for record in records
    ]


def rollout_context(
    context: AgentContext,
    *,
    max_steps: int = ROLLOUT_MAX_STEPS,
    temperature: float = ROLLOUT_TEMPERATURE,
    top_p: float | None = ROLLOUT_TOP_P,
    logprobs: bool = False,
    token_ids: bool = False,
) -> AgentContext:
    """The run context for rollouts: no backtracking or best-step selection (the trajectory as
    sampled is the training signal), a short step budget, the coder sampled hot, and the
    profile's rollout environment.

    Under a profile with a response budget (upstream: 9,000 tokens) the coder's reply is also
    sampled up to that budget, as WebGen-RL's sampler stops it (its ``max_response_length``): a
    longer reply would be dropped or cut there anyway, and its repetition is judged on what the
    sampler returned (docs/fidelity.md). A smaller cap the run already sets is kept.
    """
    budget = context.rules.profile.pool_response_tokens
    caps = [cap for cap in (context.coder.max_tokens, budget) if cap is not None]
    coder = context.coder.model_copy(
        update={
            "temperature": temperature,
            "top_p": top_p,
            "logprobs": logprobs,
            "token_ids": token_ids,
            "max_tokens": min(caps) if caps else None,
        }
    )
    update: dict[str, Any] = {"coder": coder, "max_steps": max_steps, "backtrack": False, "select_best": False}
    separate_critic = context.rules.loop.trains_every_role and not context.shared_policy
    if logprobs and (separate_critic or context.critic == "llm"):
        # The feedback model's critiques are training data too (the webloop and critic exports): its
        # logprobs as well, and so those of its other turns (the GUI verdict), kept on the step.
        update["feedback"] = context.feedback.model_copy(update={"logprobs": True})
    # Observations as the profile's rollout environment makes them (docs/fidelity.md).
    update["environment"] = "rollout"
    return context.model_copy(update=update)


class TrajectoryDriver:
    """Runs specs inside the bound Resources: in-process workers, or a Ray actor (apps.cluster)."""

    def __init__(
        self,
        *,
        context: AgentContext,
        db_path: Database,
        out_dir: Path,
        listener: RolloutListener | None,
        spending: Spending | None = None,
    ) -> None:
        self.context = context
        self.db_path = db_path
        self.out_dir = out_dir
        self.listener = listener
        self.spending = spending
        self.runs = RunIndex(db_path)

    async def has_checkpoint(self, run_id: str) -> bool:
        async with open_checkpointer(self.db_path, record_runs=False) as saver:
            return await saver.aget_tuple({"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}) is not None

    async def plan_action(self, spec: TrajectorySpec) -> Literal["start", "resume", "skip", "busy"]:
        record = await self.runs.aget(spec.run_id)
        if record is None:
            return "start"
        if record.status == "finished":
            return "skip"
        if record.status == "running":  # the liveness check says its process is still alive
            return "busy"
        if await self.has_checkpoint(spec.run_id):
            return "resume"
        # Killed before LangGraph wrote its first checkpoint: nothing to continue, start it over.
        await self.runs.adelete(spec.run_id)
        return "start"

    async def run_one(self, spec: TrajectorySpec) -> TrajectoryOutcome:
        """Start, continue or skip one trajectory; any failure becomes a ``failed`` outcome."""
        started = time.monotonic()
        resumed = False
        try:
            action = await self.plan_action(spec)
            if action in ("skip", "busy"):
                return self._ended(self._left_alone(spec, action))
            resumed = action == "resume"
            if self.listener is not None:
                self.listener.started(spec, resumed=resumed)
            result = await self._drive(spec, resumed=resumed)
        except ResumableStop:
            raise  # every trajectory needs the database and the disk: the rollout stops, resumable
        except Exception as exc:
            return self._ended(
                TrajectoryOutcome(
                    run_id=spec.run_id,
                    group_id=spec.group_id,
                    status="failed",
                    resumed=resumed,
                    error=f"{exc.__class__.__name__}: {exc}"[:2000],
                    seconds=round(time.monotonic() - started, 3),
                )
            )
        finished = result.status == "finished"
        return self._ended(
            TrajectoryOutcome(
                run_id=spec.run_id,
                group_id=spec.group_id,
                status="finished" if finished else "failed",
                resumed=resumed,
                error="" if finished else f"run ended with status {result.status}",
                steps=len(result.summary.steps),
                seconds=round(time.monotonic() - started, 3),
            )
        )

    def _left_alone(self, spec: TrajectorySpec, action: Literal["skip", "busy"]) -> TrajectoryOutcome:
        record = self.runs.get(spec.run_id)
        return TrajectoryOutcome(
            run_id=spec.run_id,
            group_id=spec.group_id,
            status="skipped" if action == "skip" else "busy",
            steps=record.steps if record else 0,
        )

    async def _drive(self, spec: TrajectorySpec, *, resumed: bool) -> RunResult:
        def on_progress(event: dict[str, Any]) -> None:
            if self.spending is not None:
                self.spending.add(event)
            if self.listener is not None:
                self.listener.event(spec, event)

        if resumed:
            # The trajectory keeps the settings it was started with; prices and budgets are this
            # rollout's (its budget is the whole rollout's).
            return await resume_run(
                spec.run_id,
                context=self.context,
                changes=self.context.model_dump(include=set(COST_SETTINGS)),
                db_path=self.db_path,
                on_progress=on_progress,
            )
        return await run_requirement(
            spec.requirement,
            context=self.context,
            run_id=spec.run_id,
            out_dir=self.out_dir / spec.run_id,
            group_id=spec.group_id,
            db_path=self.db_path,
            on_progress=on_progress,
            requirements=spec.test_cases or None,
        )

    def _ended(self, outcome: TrajectoryOutcome) -> TrajectoryOutcome:
        if self.listener is not None:
            self.listener.ended(outcome)
        return outcome


async def run_rollout(
    specs: Sequence[TrajectorySpec],
    *,
    context: AgentContext,
    db_path: str | Path | Database,
    out_dir: str | Path,
    workers: int = 2,
    listener: RolloutListener | None = None,
    spending: Spending | None = None,
) -> list[TrajectoryOutcome]:
    """Run (or continue) every planned trajectory, ``workers`` at a time; outcomes in plan order.

    ``context`` is used as given; build it with ``rollout_context`` for upstream's settings. With
    ``spending`` (the whole rollout's budget), no trajectory is started once it is spent (those in
    flight finish); the ones never started have no outcome.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    database, out_dir = Database.of(db_path), Path(out_dir)
    # Servers and browsers of an earlier rollout process that was killed would otherwise linger.
    Resources.reap_orphans(database)
    driver = TrajectoryDriver(context=context, db_path=database, out_dir=out_dir, listener=listener, spending=spending)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for position in range(len(specs)):
        queue.put_nowait(position)
    outcomes: list[TrajectoryOutcome | None] = [None] * len(specs)

    async def worker() -> None:
        while not queue.empty():
            if spending is not None and not spending.has_room():
                return  # the rollout's budget is spent: start nothing more
            position = queue.get_nowait()
            outcomes[position] = await driver.run_one(specs[position])

    try:
        async with use_resources(Resources(database, chromium=context.chromium)), asyncio.TaskGroup() as group:
            for _ in range(min(workers, len(specs))):
                group.create_task(worker())
    except* ResumableStop as stopped:
        raise stopped.exceptions[0] from None
    return [outcome for outcome in outcomes if outcome is not None]
