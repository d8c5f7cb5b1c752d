"""Trajectories read back for the exports: each run's final state, and its blobs decoded once.

Shared by every export format (checkpoints/export.py, checkpoints/export_webloop.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from webgen_agent.checkpoints.credit import RewardKind, cascaded_reward, replay_function
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.pool_limits import PoolLimits, pool_limits
from webgen_agent.checkpoints.rewards import PoolEntry, reward_pool
from webgen_agent.checkpoints.runs import RunIndex, RunRecord
from webgen_agent.checkpoints.saver import final_values, open_checkpointer
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.checkpoints.views import ChatMessage, TokenLogprob
from webgen_agent.core.profiles import profile_rules
from webgen_agent.core.profiles.rules import RewardPool
from webgen_agent.core.state import Step
from webgen_agent.core.steps import imported_start

T = TypeVar("T")

# The name each reward-pool rule goes by in the exports (docs/exports.md).
POOL_RULES: dict[RewardPool, str] = {"every-step": "webgen-rl", "code-edits": "one-per-step"}


@dataclass(frozen=True)
class Trajectory:
    """One run's record and final state."""

    run: RunRecord
    values: dict[str, Any]
    root_run: str = ""  # for a fork: the run it descends from that is no fork itself

    @property
    def trajectory_id(self) -> str:
        return self.run.run_id

    @property
    def group_id(self) -> str:
        """The instruction id; a run started without one is a group of its own, with its forks."""
        return self.run.group_id or self.root_run or self.run.run_id

    @property
    def steps(self) -> list[Step]:
        """Every step of the run's state, a fork's inherited ones included (the context its own built on)."""
        return self.values.get("steps") or []

    @property
    def inherited(self) -> int | None:
        """A fork's steps up to this index came from its parent run (which made and exports them); a
        run started from a folder (``run --from``) got its step 0 from the user, not from a model."""
        if self.run.parent_run:
            return self.run.fork_step
        return 0 if imported_start(self.steps) else None

    @property
    def imported(self) -> bool:
        """The run (or the run it was forked from) started from a folder: its first assistant turn is
        the user's project, not a model completion."""
        return imported_start(self.steps) is not None

    @property
    def own_steps(self) -> list[Step]:
        """The steps this run made: all of them, or a fork's after its fork step."""
        cut = self.inherited
        return self.steps if cut is None else [s for s in self.steps if s["index"] > cut]

    @cached_property
    def limits(self) -> PoolLimits:
        """The trainer's budgets applied to the steps (upstream profile; docs/rewards.md)."""
        return pool_limits(self.steps, self.profile)

    @property
    def refusal(self) -> str:
        """Why the trajectory cannot be training data under its profile's pool rule ("" when it can)."""
        return self.limits.dropped

    @property
    def profile(self) -> str:
        """The rules the run followed (runs from before profiles existed followed the default)."""
        return str(self.values.get("profile") or "default")

    @cached_property
    def pool(self) -> list[PoolEntry]:
        """The trajectory's reward pool under its profile's rules, built over every step (a fork's
        inherited ones too), less a fork's entries that cover inherited steps only (its parent's) and
        less the steps past the trainer's context cap (their entries stay: they count in the group)."""
        entries = reward_pool(self.limits.steps, self.profile)
        cut = self.inherited
        if cut is not None:
            entries = [replace(e, steps=[s for s in e.steps if s > cut]) for e in entries if max(e.steps) > cut]
        withheld = self.limits.withheld_from
        if withheld is not None:
            entries = [replace(e, steps=[s for s in e.steps if s < withheld]) for e in entries]
        return entries

    @property
    def pool_rule(self) -> str:
        """The rule that built the pool: WebGen-RL's batch loop, or one entry per coder step."""
        return POOL_RULES[profile_rules(self.profile).reward_pool]

    @cached_property
    def entry_of(self) -> dict[int, int]:
        """Step index -> the pool entry whose reward covers its tokens (a step may be in none)."""
        return {index: n for n, entry in enumerate(self.pool) for index in entry.steps}

    def entry(self, step: Step) -> PoolEntry | None:
        n = self.entry_of.get(step["index"])
        return None if n is None else self.pool[n]

    def reward(self, step: Step, kind: RewardKind = "step") -> float:
        """The reward credited to a step: its pool entry's (0 when no entry covers it)."""
        entry = self.entry(step)
        return self.entry_reward(entry, kind) if entry is not None else 0.0

    def entry_reward(self, entry: PoolEntry, kind: RewardKind = "step") -> float:
        """An entry's reward: Step-GRPO's, or WebGen-R1's cascaded reward of the page it is credited with."""
        if kind == "step":
            return entry.reward
        scored = next(s for s in self.steps if s["index"] == entry.scored_step)
        if kind == "step-replay":
            if not entry.format_ok:
                return entry.reward
            return float(entry.screenshot_score) + replay_function(scored, float(entry.gui_score))
        return cascaded_reward(entry.format_ok, scored, replay=kind == "cascaded-replay")

    @property
    def chosen_step(self) -> int | None:
        return self.values.get("chosen_step")


async def load_trajectories(
    db_path: str | Path | Database, *, groups: Sequence[str] | None = None, include_unfinished: bool = False
) -> list[Trajectory]:
    """Final states of the runs (finished ones unless ``include_unfinished``), ordered by group."""
    wanted = set(groups or [])
    everyone = RunIndex(db_path).list()
    roots = fork_roots(everyone)
    runs = [
        run
        for run in everyone
        if (not wanted or (run.group_id or roots.get(run.run_id) or run.run_id) in wanted)
        and (include_unfinished or run.status == "finished")
    ]
    async with open_checkpointer(db_path, record_runs=False) as saver:
        values = await final_values(saver, [run.run_id for run in runs])
    trajectories = [
        Trajectory(run=run, values=values[run.run_id], root_run=roots.get(run.run_id, ""))
        for run in runs
        if values.get(run.run_id, {}).get("steps")
    ]
    trajectories.sort(key=lambda t: (t.group_id, t.run.created_at, t.trajectory_id))
    return trajectories


def trainable(trajectories: Sequence[Trajectory]) -> tuple[list[Trajectory], list[str]]:
    """The trajectories the pool rule can train, and one line per trajectory or step it cannot."""
    kept, lines = [], []
    for trajectory in trajectories:
        if trajectory.refusal:
            lines.append(f"{trajectory.trajectory_id} left out: {trajectory.refusal}")
            continue
        kept.append(trajectory)
        lines.extend(f"{trajectory.trajectory_id}: {note}" for note in trajectory.limits.notes)
    return kept, lines


def fork_roots(runs: Sequence[RunRecord]) -> dict[str, str]:
    """Each fork's first ancestor that is no fork (as far as the runs table still holds its ancestors)."""
    parent = {run.run_id: run.parent_run for run in runs}
    roots = {}
    for run in runs:
        seen, root = {run.run_id}, run.run_id
        while parent.get(root) and parent[root] not in seen:
            root = parent[root]
            seen.add(root)
        if root != run.run_id:
            roots[run.run_id] = root
    return roots


class BlobTexts:
    """Decoded blobs read in batches and kept, so shared prompt prefixes are read once."""

    def __init__(self, store: BlobStore) -> None:
        self.store = store
        self._raw: dict[str, bytes] = {}
        self._texts: dict[str, str] = {}
        self._refs: dict[str, list[dict[str, str]]] = {}
        self._messages: dict[tuple[str, str], ChatMessage] = {}
        self._prompts: dict[str, list[ChatMessage]] = {}

    def prefetch(self, digests: Iterable[str | None]) -> None:
        missing = {d for d in digests if d and d not in self._raw}
        if missing:
            self._raw.update(self.store.get_many(missing))

    def raw(self, digest: str) -> bytes:
        if digest not in self._raw:
            self._raw[digest] = self.store.get(digest)  # raises KeyError naming the blob
        return self._raw[digest]

    def text(self, digest: str) -> str:
        text = self._texts.get(digest)
        if text is None:
            text = self._texts[digest] = self.raw(digest).decode("utf-8")
        return text

    def json(self, digest: str) -> Any:
        return json.loads(self.raw(digest))

    def prefetch_prompts(self, prompt_digests: Iterable[str | None]) -> None:
        """Read prompt lists, then every message they name, in two batched rounds."""
        digests = {d for d in prompt_digests if d}
        self.prefetch(digests)
        self.prefetch(ref["hash"] for d in digests for ref in self._chat_refs(d))

    def prompt(self, digest: str) -> list[ChatMessage]:
        """The coder messages a step's ``prompt`` blob (a JSON list of ChatRef) names, texts filled in."""
        cached = self._prompts.get(digest)
        if cached is None:
            cached = self._prompts[digest] = [self.message(ref["role"], ref["hash"]) for ref in self._chat_refs(digest)]
        return cached

    def refs(self, digest: str) -> list[dict[str, str]]:
        """The ChatRef list (role, hash) a prompt blob names."""
        return self._chat_refs(digest)

    def _chat_refs(self, digest: str) -> list[dict[str, str]]:
        refs = self._refs.get(digest)
        if refs is None:
            refs = self._refs[digest] = self.json(digest)
        return refs

    def logprobs(self, digest: str | None) -> list[TokenLogprob]:
        """The token logprobs a step stored (OpenAI's entries, of which ``token`` and ``logprob`` are
        kept); ``[]`` when none were returned."""
        if not digest:
            return []
        return [TokenLogprob(token=entry["token"], logprob=float(entry["logprob"])) for entry in self.json(digest)]

    def message(self, role: str, digest: str) -> ChatMessage:
        key = (role, digest)
        message = self._messages.get(key)
        if message is None:
            message = self._messages[key] = ChatMessage(role=role, content=self.text(digest))  # type: ignore[arg-type]
        return message


def arrow_friendly_order(items: Sequence[T], *, complete: Callable[[T], bool]) -> list[T]:
    """The items with the first ``complete`` one (every nested list non-empty) moved to the front.

    ``datasets`` infers a JSON file's schema from its first block and casts later blocks to it: a
    first block whose lists are all empty (type list<null>) makes a later non-empty list fail.
    """
    first = next((i for i, item in enumerate(items) if complete(item)), None)
    if not first:
        return list(items)
    return [items[first], *items[:first], *items[first + 1 :]]
