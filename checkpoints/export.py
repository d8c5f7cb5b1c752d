"""Training exports from the checkpoints: Step-GRPO steps, SFT conversations, Critic credit, raw rewards.

Trajectories are read as each run's final checkpoint state (runs listed from the runs table,
grouped by ``group_id``); prompts, completions and critiques are rebuilt from the blob store. Blob
reads are batched and cached: the steps of one trajectory share most of their prompt (system
message, requirement, earlier turns), so each message is read and decoded once.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from webgen_agent.checkpoints.credit import CriticReward, RewardKind, cascaded_reward
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.rewards import PoolEntry, advantages, group_stats, reward_pool
from webgen_agent.checkpoints.runs import RunIndex, RunRecord
from webgen_agent.checkpoints.saver import final_values, open_checkpointer
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.checkpoints.views import (
    ChatMessage,
    CriticRecord,
    ExportFormat,
    ExportReport,
    RewardsRecord,
    SftRecord,
    StepGrpoRecord,
    TokenLogprob,
)
from webgen_agent.core.state import Step
from webgen_agent.core.views import Critique

T = TypeVar("T")


@dataclass(frozen=True)
class Trajectory:
    """One run's record and final state."""

    run: RunRecord
    values: dict[str, Any]

    @property
    def trajectory_id(self) -> str:
        return self.run.run_id

    @property
    def group_id(self) -> str:
        """The instruction id; a run started without one is a group of its own."""
        return self.run.group_id or self.run.run_id

    @property
    def steps(self) -> list[Step]:
        return self.values.get("steps") or []

    @property
    def profile(self) -> str:
        """The rules the run followed (runs from before profiles existed followed the default)."""
        return str(self.values.get("profile") or "default")

    @cached_property
    def pool(self) -> list[PoolEntry]:
        """The trajectory's reward pool under its profile's rules."""
        return reward_pool(self.steps, self.profile)

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
        return cascaded_reward(entry.format_ok, scored)

    @property
    def chosen_step(self) -> int | None:
        return self.values.get("chosen_step")


async def load_trajectories(
    db_path: str | Path | Database, *, groups: Sequence[str] | None = None, include_unfinished: bool = False
) -> list[Trajectory]:
    """Final states of the runs (finished ones unless ``include_unfinished``), ordered by group."""
    wanted = set(groups or [])
    runs = [
        run
        for run in RunIndex(db_path).list()
        if (not wanted or run.group_id in wanted) and (include_unfinished or run.status == "finished")
    ]
    async with open_checkpointer(db_path) as saver:
        values = await final_values(saver, [run.run_id for run in runs])
    trajectories = [
        Trajectory(run=run, values=values[run.run_id]) for run in runs if values.get(run.run_id, {}).get("steps")
    ]
    trajectories.sort(key=lambda t: (t.group_id, t.run.created_at, t.trajectory_id))
    return trajectories


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
            cached = self._prompts[digest] = [
                self._message(ref["role"], ref["hash"]) for ref in self._chat_refs(digest)
            ]
        return cached

    def _chat_refs(self, digest: str) -> list[dict[str, str]]:
        refs = self._refs.get(digest)
        if refs is None:
            refs = self._refs[digest] = self.json(digest)
        return refs

    def _message(self, role: str, digest: str) -> ChatMessage:
        key = (role, digest)
        message = self._messages.get(key)
        if message is None:
            message = self._messages[key] = ChatMessage(role=role, content=self.text(digest))  # type: ignore[arg-type]
        return message


def _logprobs(texts: BlobTexts, digest: str | None) -> list[TokenLogprob]:
    if not digest:
        return []
    return [TokenLogprob(token=entry["token"], logprob=float(entry["logprob"])) for entry in texts.json(digest)]


EntryKey = tuple[str, int]  # (trajectory id, pool entry)


@dataclass(frozen=True)
class GroupRewards:
    """Every pool entry's reward of every trajectory of each group (the R of the advantage formula)."""

    rewards: dict[str, list[float]]
    advantage: dict[EntryKey, float]
    trajectories: dict[str, int]

    @classmethod
    def of(cls, trajectories: Sequence[Trajectory], kind: RewardKind = "step") -> GroupRewards:
        rewards: dict[str, list[float]] = defaultdict(list)
        keys: dict[str, list[EntryKey]] = defaultdict(list)
        counts: dict[str, int] = defaultdict(int)
        for trajectory in trajectories:
            counts[trajectory.group_id] += 1
            for n, entry in enumerate(trajectory.pool):
                keys[trajectory.group_id].append((trajectory.trajectory_id, n))
                rewards[trajectory.group_id].append(trajectory.entry_reward(entry, kind))
        advantage = {
            key: value for group in rewards for key, value in zip(keys[group], advantages(rewards[group]), strict=True)
        }
        return cls(rewards=dict(rewards), advantage=advantage, trajectories=dict(counts))


def arrow_friendly_order(items: Sequence[T], *, complete: Callable[[T], bool]) -> list[T]:
    """The items with the first ``complete`` one (every nested list non-empty) moved to the front.

    ``datasets`` infers a JSON file's schema from its first block and casts later blocks to it: a
    first block whose lists are all empty (type list<null>) makes a later non-empty list fail.
    """
    first = next((i for i, item in enumerate(items) if complete(item)), None)
    if not first:
        return list(items)
    return [items[first], *items[:first], *items[first + 1 :]]


def step_grpo_records(
    trajectories: Sequence[Trajectory], texts: BlobTexts, *, kind: RewardKind = "step"
) -> Iterator[StepGrpoRecord]:
    """One record per coder step covered by a pool entry; its reward and advantage are the entry's,
    normalised over the entries of the whole group."""
    pairs = [(t, step) for t in trajectories for step in t.steps if step["index"] in t.entry_of]
    texts.prefetch_prompts(step["prompt"] for _, step in pairs)
    texts.prefetch(d for _, step in pairs for d in (step["completion"], step.get("logprobs")))
    groups = GroupRewards.of(trajectories, kind)
    stats = {group: group_stats(rewards) for group, rewards in groups.rewards.items()}
    for trajectory, step in arrow_friendly_order(pairs, complete=lambda pair: bool(pair[1].get("logprobs"))):
        group = trajectory.group_id
        mean, std = stats[group]
        n = trajectory.entry_of[step["index"]]
        entry = trajectory.pool[n]
        yield StepGrpoRecord(
            group_id=group,
            trajectory_id=trajectory.trajectory_id,
            step=step["index"],
            role=step["role"],
            action=step["action"],
            prompt=texts.prompt(step["prompt"]),
            completion=texts.text(step["completion"]),
            screenshot_score=entry.screenshot_score,
            gui_score=entry.gui_score,
            scored_step=entry.scored_step,
            pool_entry=n,
            profile=trajectory.profile,
            reward=trajectory.entry_reward(entry, kind),
            advantage=groups.advantage[(trajectory.trajectory_id, n)],
            group_mean=mean,
            group_std=std,
            group_size=len(groups.rewards[group]),
            group_trajectories=groups.trajectories[group],
            format_ok=bool(step["format_ok"]),
            model=step["model"],
            has_logprobs=bool(step.get("logprobs")),
            logprobs=_logprobs(texts, step.get("logprobs")),
            chosen=step["index"] == trajectory.chosen_step,
        )


def _final_step(trajectory: Trajectory) -> Step:
    chosen = trajectory.chosen_step
    steps = trajectory.steps
    return next((s for s in steps if s["index"] == chosen), steps[-1])


def sft_records(
    trajectories: Sequence[Trajectory], texts: BlobTexts, *, min_score: float | None = None
) -> Iterator[SftRecord]:
    """The conversation up to and including the chosen (else the last) step's completion."""
    finals = [(t, _final_step(t)) for t in trajectories]
    texts.prefetch_prompts(step["prompt"] for _, step in finals)
    texts.prefetch(step["completion"] for _, step in finals)
    for trajectory, step in finals:
        reward = trajectory.reward(step)
        if min_score is not None and reward < min_score:
            continue
        entry = trajectory.entry(step)
        answer = ChatMessage(role="assistant", content=texts.text(step["completion"]))
        yield SftRecord(
            messages=[*texts.prompt(step["prompt"]), answer],
            group_id=trajectory.group_id,
            trajectory_id=trajectory.trajectory_id,
            step=step["index"],
            reward=reward,
            screenshot_score=entry.screenshot_score if entry is not None else 0,
            gui_score=entry.gui_score if entry is not None else 0,
        )


def critic_records(trajectories: Sequence[Trajectory], texts: BlobTexts) -> Iterator[CriticRecord]:
    """One record per llm critique that a Refiner step answered; credit = its reward gain."""
    critiqued = [
        (t, s, critique_hash, prompt_hash)
        for t in trajectories
        for s in t.steps
        if (critique_hash := s.get("critique")) and (prompt_hash := s.get("critic_prompt"))
    ]
    texts.prefetch(d for _, _, critique_hash, prompt_hash in critiqued for d in (critique_hash, prompt_hash))
    records: list[CriticRecord] = []
    for trajectory, step, critique_hash, prompt_hash in critiqued:
        steps = trajectory.steps
        # The Refiner answers the critic right away, so its step is the next one.
        after = next((s for s in steps if s["index"] == step["index"] + 1 and s["role"] == "refiner"), None)
        if after is None:
            continue  # the step budget ran out after the critique: no refinement to credit
        critique = Critique.model_validate(texts.json(critique_hash))
        before_reward, after_reward = trajectory.reward(step), trajectory.reward(after)
        records.append(
            CriticRecord(
                group_id=trajectory.group_id,
                trajectory_id=trajectory.trajectory_id,
                step=step["index"],
                next_step=after["index"],
                prompt=[ChatMessage.model_validate(m) for m in texts.json(prompt_hash)],
                completion=critique.model_dump_json(),
                critique=critique,
                reward_before=before_reward,
                reward_after=after_reward,
                credit=after_reward - before_reward,
            )
        )
    # Critiques are small: collecting them first costs little and allows the Arrow-friendly order.
    yield from arrow_friendly_order(records, complete=lambda r: bool(r.critique.checks and r.critique.plan))


def rewards_records(trajectories: Sequence[Trajectory], *, kind: RewardKind = "step") -> Iterator[RewardsRecord]:
    for trajectory in trajectories:
        steps = trajectory.steps
        entries = [trajectory.entry(s) for s in steps]
        chosen = trajectory.chosen_step
        yield RewardsRecord(
            group_id=trajectory.group_id,
            trajectory_id=trajectory.trajectory_id,
            status=trajectory.run.status,
            profile=trajectory.profile,
            chosen_step=-1 if chosen is None else chosen,
            steps=[s["index"] for s in steps],
            rewards=[trajectory.reward(s, kind) for s in steps],
            screenshot_scores=[e.screenshot_score if e is not None else 0 for e in entries],
            gui_scores=[e.gui_score if e is not None else 0 for e in entries],
            format_ok=[bool(s["format_ok"]) for s in steps],
            pool_rewards=[trajectory.entry_reward(e, kind) for e in trajectory.pool],
            pool_steps=[list(e.steps) for e in trajectory.pool],
        )


class JsonLines:
    """Record -> one JSON line (UTF-8 bytes); a chat message shared by many records is encoded once.

    The steps of a trajectory repeat its conversation in their prompts, so most of an export's
    bytes are messages already encoded for an earlier record.
    """

    def __init__(self) -> None:
        self._fragments: dict[ChatMessage, bytes] = {}
        self._message_fields: dict[type[BaseModel], tuple[str, ...]] = {}

    def line(self, record: BaseModel) -> bytes:
        return b"".join(self.chunks(record))

    def chunks(self, record: BaseModel) -> list[bytes]:
        """The line in pieces (no newline): written as they are, the shared ones are never copied."""
        fields = self._fields_of(type(record))
        if not fields:
            return [record.__pydantic_serializer__.to_json(record)]
        body = record.__pydantic_serializer__.to_json(record, exclude=set(fields))
        chunks = [body[:-1]]
        for position, name in enumerate(fields):
            separator = b"," if position or body != b"{}" else b""
            chunks.append(b'%s"%s":[' % (separator, name.encode()))
            for index, message in enumerate(getattr(record, name)):
                if index:
                    chunks.append(b",")
                chunks.append(self._fragment(message))
            chunks.append(b"]")
        chunks.append(b"}")
        return chunks

    def _fragment(self, message: ChatMessage) -> bytes:
        fragment = self._fragments.get(message)
        if fragment is None:
            fragment = self._fragments[message] = message.__pydantic_serializer__.to_json(message)
        return fragment

    def _fields_of(self, cls: type[BaseModel]) -> tuple[str, ...]:
        fields = self._message_fields.get(cls)
        if fields is None:
            fields = tuple(name for name, f in cls.model_fields.items() if f.annotation == list[ChatMessage])
            self._message_fields[cls] = fields
        return fields


def write_jsonl(records: Iterable[BaseModel], path: Path) -> int:
    """Write one JSON object a line (via a temporary file, so a failed export leaves no half file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    encoder = JsonLines()
    count = 0
    with partial.open("wb") as handle:
        for record in records:
            handle.writelines(encoder.chunks(record))
            handle.write(b"\n")
            count += 1
    partial.replace(path)
    return count


def build_records(
    export_format: ExportFormat,
    trajectories: Sequence[Trajectory],
    store: BlobStore,
    *,
    min_score: float | None = None,
    reward: RewardKind = "step",
    critic_reward: CriticReward = "dh",
) -> Iterator[BaseModel]:
    texts = BlobTexts(store)
    if export_format == "step-grpo":
        return step_grpo_records(trajectories, texts, kind=reward)
    if export_format == "webloop":
        # Imported here: the webloop export builds on this module's readers.
        from webgen_agent.checkpoints.export_webloop import webloop_records

        return webloop_records(trajectories, texts, critic=critic_reward)
    if export_format == "sft":
        return sft_records(trajectories, texts, min_score=min_score)
    if export_format == "critic":
        return critic_records(trajectories, texts)
    if export_format == "rewards":
        return rewards_records(trajectories, kind=reward)
    raise ValueError(f"unknown export format {export_format!r}")


async def export_trajectories(
    export_format: ExportFormat,
    out: str | Path,
    *,
    db_path: str | Path | Database,
    groups: Sequence[str] | None = None,
    min_score: float | None = None,
    include_unfinished: bool = False,
    reward: RewardKind = "step",
    critic_reward: CriticReward = "dh",
) -> ExportReport:
    """Read the trajectories and write ``out`` (JSON lines) in ``export_format``."""
    started = time.monotonic()
    trajectories = await load_trajectories(db_path, groups=groups, include_unfinished=include_unfinished)
    store = BlobStore(db_path)
    try:
        records = build_records(
            export_format, trajectories, store, min_score=min_score, reward=reward, critic_reward=critic_reward
        )
        count = write_jsonl(records, Path(out))
    finally:
        store.close()
    return ExportReport(
        format=export_format,
        path=str(out),
        records=count,
        trajectories=len(trajectories),
        groups=len({t.group_id for t in trajectories}),
        seconds=round(time.monotonic() - started, 3),
    )
