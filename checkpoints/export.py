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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from webgen_agent.checkpoints.credit import CriticReward, RewardKind, replay_score
from webgen_agent.checkpoints.database import Database
from webgen_agent.checkpoints.flat_groups import flat_groups, lone_groups, mixed_rule_groups
from webgen_agent.checkpoints.formats import ExportFormat, format_entry, text_formats_words
from webgen_agent.checkpoints.rewards import advantages, group_stats
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.checkpoints.trajectories import (
    BlobTexts,
    Trajectory,
    arrow_friendly_order,
    load_trajectories,
    trainable,
)
from webgen_agent.checkpoints.views import (
    DEFAULT_EXPORT,
    ChatMessage,
    CriticRecord,
    ExportOptions,
    ExportReport,
    RewardsRecord,
    SftRecord,
    StepGrpoRecord,
    TrajectoryRecord,
    TurnRecord,
    VerlExtraInfo,
    VerlRecord,
    VerlReward,
)
from webgen_agent.checkpoints.writers import ChatRender, write_records
from webgen_agent.core.state import Step
from webgen_agent.core.views import Critique


def _token_ids(texts: BlobTexts, digest: str | None) -> tuple[list[int] | None, list[int] | None]:
    """(prompt ids, completion ids) the endpoint returned; None for what it did not."""
    if not digest:
        return None, None
    ids = texts.json(digest)
    return ids.get("prompt"), ids.get("completion")


# A format's builder (checkpoints/formats.py): the trajectories, their texts and the options -> records.
Builder = Callable[[Sequence[Trajectory], BlobTexts, ExportOptions], Iterator[BaseModel]]

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


def step_grpo_records(
    trajectories: Sequence[Trajectory], texts: BlobTexts, options: ExportOptions = DEFAULT_EXPORT
) -> Iterator[StepGrpoRecord]:
    """One record per coder step covered by a pool entry; its reward and advantage are the entry's,
    normalised over the entries of the whole group."""
    kind = options.reward
    pairs = [(t, step) for t in trajectories for step in t.steps if step["index"] in t.entry_of]
    texts.prefetch_prompts(step["prompt"] for _, step in pairs)
    texts.prefetch(d for _, step in pairs for d in (step["completion"], step.get("logprobs"), step.get("token_ids")))
    groups = GroupRewards.of(trajectories, kind)
    stats = {group: group_stats(rewards) for group, rewards in groups.rewards.items()}
    # Front: a record with logprobs, and before it one with token ids too when there is one.
    pairs = arrow_friendly_order(pairs, complete=lambda pair: bool(pair[1].get("logprobs")))
    pairs = arrow_friendly_order(
        pairs, complete=lambda pair: bool(pair[1].get("logprobs") and pair[1].get("token_ids"))
    )
    for trajectory, step in pairs:
        group = trajectory.group_id
        mean, std = stats[group]
        n = trajectory.entry_of[step["index"]]
        entry = trajectory.pool[n]
        logprobs = texts.logprobs(step.get("logprobs"))
        prompt_ids, completion_ids = _token_ids(texts, step.get("token_ids"))
        yield StepGrpoRecord(
            group_id=group,
            trajectory_id=trajectory.trajectory_id,
            step=step["index"],
            role=step["role"],
            action=step["action"],
            prompt=texts.prompt(step["prompt"]),
            completion=[texts.message("assistant", step["completion"])],
            screenshot_score=entry.screenshot_score,
            gui_score=entry.gui_score,
            scored_step=entry.scored_step,
            pool_entry=n,
            profile=trajectory.profile,
            pool_rule=trajectory.pool_rule,
            reward=trajectory.entry_reward(entry, kind),
            advantage=groups.advantage[(trajectory.trajectory_id, n)],
            group_mean=mean,
            group_std=std,
            group_size=len(groups.rewards[group]),
            group_trajectories=groups.trajectories[group],
            format_ok=bool(step["format_ok"]),
            model=step["model"],
            has_logprobs=bool(logprobs),
            logprobs=logprobs,
            prompt_token_ids=prompt_ids,
            completion_token_ids=completion_ids,
            completion_logprobs=[token.logprob for token in logprobs] if logprobs else None,
            final_site=step["index"] == trajectory.chosen_step,
        )


def _final_step(trajectory: Trajectory) -> Step:
    chosen = trajectory.chosen_step
    steps = trajectory.steps
    return next((s for s in steps if s["index"] == chosen), steps[-1])


def sft_records(
    trajectories: Sequence[Trajectory], texts: BlobTexts, options: ExportOptions = DEFAULT_EXPORT
) -> Iterator[SftRecord]:
    """The conversation up to and including the chosen (else the last) step's completion."""
    min_score = options.min_score
    finals = [(t, _final_step(t)) for t in trajectories]
    texts.prefetch_prompts(step["prompt"] for _, step in finals)
    texts.prefetch(step["completion"] for _, step in finals)
    for trajectory, step in finals:
        reward = trajectory.reward(step)
        if min_score is not None and reward < min_score:
            continue
        entry = trajectory.entry(step)
        yield SftRecord(
            messages=[*texts.prompt(step["prompt"]), texts.message("assistant", step["completion"])],
            group_id=trajectory.group_id,
            trajectory_id=trajectory.trajectory_id,
            step=step["index"],
            reward=reward,
            screenshot_score=entry.screenshot_score if entry is not None else 0,
            gui_score=entry.gui_score if entry is not None else 0,
        )


def critic_records(
    trajectories: Sequence[Trajectory], texts: BlobTexts, options: ExportOptions = DEFAULT_EXPORT
) -> Iterator[CriticRecord]:
    """One record per llm critique that a Refiner step answered; credit = its reward gain."""
    critiqued = [
        (t, s, critique_hash, prompt_hash)
        for t in trajectories
        for s in t.own_steps
        if (critique_hash := s.get("critique")) and (prompt_hash := s.get("critic_prompt"))
    ]
    texts.prefetch(
        d
        for _, step, critique_hash, prompt_hash in critiqued
        for d in (critique_hash, prompt_hash, step.get("critic_completion"), step.get("critic_logprobs"))
    )
    records: list[CriticRecord] = []
    for trajectory, step, critique_hash, prompt_hash in critiqued:
        steps = trajectory.steps
        # The Refiner answers the critic right away, so its step is the next one.
        after = next((s for s in steps if s["index"] == step["index"] + 1 and s["role"] == "refiner"), None)
        if after is None:
            continue  # the step budget ran out after the critique: no refinement to credit
        critique = Critique.model_validate(texts.json(critique_hash))
        before_reward, after_reward = trajectory.reward(step), trajectory.reward(after)
        # The answer as sampled; runs from before it was kept have only the parsed critique.
        sampled = step.get("critic_completion")
        logprobs = texts.logprobs(step.get("critic_logprobs"))
        records.append(
            CriticRecord(
                group_id=trajectory.group_id,
                trajectory_id=trajectory.trajectory_id,
                step=step["index"],
                next_step=after["index"],
                prompt=[ChatMessage.model_validate(m) for m in texts.json(prompt_hash)],
                completion=[
                    ChatMessage(
                        role="assistant", content=texts.text(sampled) if sampled else critique.model_dump_json()
                    )
                ],
                critique=critique,
                reward_before=before_reward,
                reward_after=after_reward,
                credit=after_reward - before_reward,
                has_logprobs=bool(logprobs),
                logprobs=logprobs,
                completion_logprobs=[token.logprob for token in logprobs] if logprobs else None,
            )
        )
    # Critiques are small: collecting them first costs little and allows the Arrow-friendly order.
    records = arrow_friendly_order(records, complete=lambda r: bool(r.critique.checks and r.critique.plan))
    # ... and before it one with logprobs too when there is one.
    yield from arrow_friendly_order(
        records, complete=lambda r: bool(r.critique.checks and r.critique.plan and r.logprobs)
    )


def _branch(trajectory: Trajectory, last: Step) -> list[Step]:
    """The steps ``last`` built on (its parent chain), first to last."""
    by_index = {step["index"]: step for step in trajectory.steps}
    chain = [last]
    while (parent := chain[-1]["parent"]) is not None and parent in by_index and len(chain) <= len(by_index):
        chain.append(by_index[parent])
    return chain[::-1]


def trajectory_records(
    trajectories: Sequence[Trajectory], texts: BlobTexts, options: ExportOptions = DEFAULT_EXPORT
) -> Iterator[TrajectoryRecord]:
    """One record per trajectory: its last step's conversation, each assistant turn credited with the
    reward and advantage of the pool entry covering the step that wrote it (as in the step-grpo
    export; steps a backtrack left behind are not in the conversation)."""
    kind = options.reward
    lasts = [(t, t.steps[-1]) for t in trajectories]
    texts.prefetch_prompts(step["prompt"] for _, step in lasts)
    texts.prefetch(step["completion"] for _, step in lasts)
    groups = GroupRewards.of(trajectories, kind)
    for trajectory, last in lasts:
        writers: dict[str, list[Step]] = defaultdict(list)
        for step in _branch(trajectory, last):
            writers[step["completion"]].append(step)
        refs = [*texts.refs(last["prompt"]), {"role": "assistant", "hash": last["completion"]}]
        turns: list[TurnRecord] = []
        for position, ref in enumerate(refs):
            if ref["role"] != "assistant":
                continue
            writer = writers[ref["hash"]].pop(0) if writers.get(ref["hash"]) else None
            n = None if writer is None else trajectory.entry_of.get(writer["index"])
            turns.append(
                TurnRecord(
                    message=position,
                    step=-1 if writer is None else writer["index"],
                    reward=0.0 if n is None else trajectory.pool[n].reward,
                    advantage=0.0 if n is None else groups.advantage[(trajectory.trajectory_id, n)],
                    train=n is not None,
                )
            )
        chosen = trajectory.chosen_step
        yield TrajectoryRecord(
            group_id=trajectory.group_id,
            trajectory_id=trajectory.trajectory_id,
            status=trajectory.run.status,
            messages=[texts.message(ref["role"], ref["hash"]) for ref in refs],
            turns=turns,
            chosen_step=-1 if chosen is None else chosen,
            group_trajectories=groups.trajectories[trajectory.group_id],
        )


def _test_cases(trajectory: Trajectory, texts: BlobTexts) -> str:
    """The run's requirement list (a WebGen-Bench record's UI test cases) as JSON text."""
    cases = trajectory.values.get("requirements") or []
    if isinstance(cases, str):  # runs recorded before the state held the list itself kept its blob hash
        cases = texts.json(cases)
    return json.dumps(cases, ensure_ascii=False)


def verl_records(
    trajectories: Sequence[Trajectory], texts: BlobTexts, options: ExportOptions = DEFAULT_EXPORT
) -> Iterator[VerlRecord]:
    """The trajectory records in verl's layout (data_source, prompt, ability, reward_model, extra_info)
    plus the multi-turn ``messages``; ``prompt`` is the conversation up to the first assistant turn."""
    by_id = {t.trajectory_id: t for t in trajectories}
    for index, record in enumerate(trajectory_records(trajectories, texts, options)):
        trajectory = by_id[record.trajectory_id]
        first_answer = next((n for n, m in enumerate(record.messages) if m.role == "assistant"), len(record.messages))
        yield VerlRecord(
            prompt=record.messages[:first_answer],
            reward_model=VerlReward(ground_truth=_test_cases(trajectory, texts)),
            extra_info=VerlExtraInfo(
                index=index,
                group_id=record.group_id,
                trajectory_id=record.trajectory_id,
                instruction=trajectory.run.requirement,
                status=record.status,
                turns=record.turns,
                chosen_step=record.chosen_step,
                group_trajectories=record.group_trajectories,
            ),
            messages=record.messages,
        )


def rewards_records(
    trajectories: Sequence[Trajectory], texts: BlobTexts | None = None, options: ExportOptions = DEFAULT_EXPORT
) -> Iterator[RewardsRecord]:
    """Every step's reward and scores (no texts read)."""
    kind = options.reward
    for trajectory in trajectories:
        steps = trajectory.own_steps
        entries = [trajectory.entry(s) for s in steps]
        by_index = {s["index"]: s for s in trajectory.steps}
        chosen = trajectory.chosen_step
        yield RewardsRecord(
            group_id=trajectory.group_id,
            trajectory_id=trajectory.trajectory_id,
            status=trajectory.run.status,
            profile=trajectory.profile,
            pool_rule=trajectory.pool_rule,
            chosen_step=-1 if chosen is None else chosen,
            steps=[s["index"] for s in steps],
            rewards=[trajectory.reward(s, kind) for s in steps],
            screenshot_scores=[e.screenshot_score if e is not None else 0 for e in entries],
            gui_scores=[e.gui_score if e is not None else 0 for e in entries],
            replay_scores=[replay_score(by_index[e.scored_step]) if e is not None else None for e in entries],
            format_ok=[bool(s["format_ok"]) for s in steps],
            pool_rewards=[trajectory.entry_reward(e, kind) for e in trajectory.pool],
            pool_steps=[list(e.steps) for e in trajectory.pool],
        )


def build_records(
    export_format: ExportFormat, trajectories: Sequence[Trajectory], store: BlobStore, options: ExportOptions
) -> Iterator[BaseModel]:
    """The records of ``export_format`` (its builder in checkpoints/formats.py)."""
    builder: Builder = format_entry(export_format).build()
    return builder(trajectories, BlobTexts(store), options)


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
    parquet: bool = False,
    render: ChatRender | None = None,
    drop_flat_groups: bool = False,
) -> ExportReport:
    """Read the trajectories and write ``out`` (JSON lines, or parquet) in ``export_format``; with
    ``render``, a prompt-completion format's messages become the chat template's strings."""
    if render is not None and not format_entry(export_format).text:
        raise ValueError(f"the text layout is for the {text_formats_words()} formats, not {export_format}")
    entry = format_entry(export_format)  # an unknown format fails before anything is read
    started = time.monotonic()
    read = await load_trajectories(db_path, groups=groups, include_unfinished=include_unfinished)
    trajectories, left_out = trainable(read)
    from_folder = [t.trajectory_id for t in trajectories if entry.whole_messages and t.imported]
    trajectories = [t for t in trajectories if t.trajectory_id not in from_folder]
    flat = flat_groups(trajectories, reward)
    kept = trajectories
    if drop_flat_groups:
        dropped = {group.group_id for group in flat}
        kept = [t for t in trajectories if t.group_id not in dropped]
    store = BlobStore(db_path)
    try:
        options = ExportOptions(min_score=min_score, reward=reward, critic_reward=critic_reward)
        records = build_records(export_format, kept, store, options)
        count = write_records(records, Path(out), parquet=parquet, render=render)
    finally:
        store.close()
    return ExportReport(
        format=export_format,
        path=str(out),
        records=count,
        trajectories=len(read),
        groups=len({t.group_id for t in read}),
        flat_groups=flat,
        dropped_groups=len(flat) if drop_flat_groups else 0,
        left_out=left_out,
        from_folder=from_folder,
        lone_groups=lone_groups(kept, reward),
        mixed_groups=mixed_rule_groups(kept),
        seconds=round(time.monotonic() - started, 3),
    )
