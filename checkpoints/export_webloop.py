"""The ``webloop`` export: one record per role turn (Generator, Critic, Refiner) with per-role credit.

Generator and Refiner turns are rewarded with their page's check score; a Critic turn with its
discriminability D, its helpfulness H or both (``critic_reward``). Advantages are group-relative
per role: normalised over the turns of the same role in the same instruction group.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from webgen_agent.checkpoints.credit import CriticReward, critic_reward, discriminability, helpfulness
from webgen_agent.checkpoints.rewards import MALFORMED_REWARD, advantages, group_stats, scored_step
from webgen_agent.checkpoints.trajectories import BlobTexts, Trajectory, arrow_friendly_order
from webgen_agent.checkpoints.views import DEFAULT_EXPORT, ChatMessage, ExportOptions, WebloopRecord, WebloopRole
from webgen_agent.core.state import Step
from webgen_agent.core.views import CodeCritique


@dataclass
class _Turn:
    trajectory: Trajectory
    step: Step
    role: WebloopRole
    reward: float
    page_checks: list[str]
    d: float = 0.0
    h: float = 0.0
    score_before: float = 0.0
    score_after: float = 0.0
    critic_verdicts: list[str] = field(default_factory=list)


def _verdicts(texts: BlobTexts, step: Step) -> list[str]:
    checks = step.get("checks")
    return [c["verdict"] for c in texts.json(checks)] if checks else []


def _coder_turn(trajectory: Trajectory, step: Step, texts: BlobTexts) -> _Turn:
    steps = trajectory.steps
    page = scored_step(step, steps)
    malformed = step.get("action") == "malformed" or not step.get("format_ok", True)
    score = float(page.get("check_score", 0.0))
    return _Turn(
        trajectory,
        step,
        step.get("role", "refiner"),
        MALFORMED_REWARD if malformed else score,
        _verdicts(texts, page),
        score_before=score,
        score_after=score,
    )


def _page_after(steps: Sequence[Step], critic_step: Step, target: Step) -> Step | None:
    """The page the Refiner that answered this critique left: its edit, or the criticised page unchanged."""
    refined = next((s for s in steps if s["index"] > critic_step["index"] and s.get("role") == "refiner"), None)
    if refined is None:
        return None
    return refined if refined.get("action") == "edit" and refined.get("files") else target


def _critic_turn(
    trajectory: Trajectory, step: Step, texts: BlobTexts, kind: CriticReward, critique_hash: str
) -> _Turn | None:
    steps = trajectory.steps
    target = next(s for s in steps if s["index"] == step["critic_target"])
    after = _page_after(steps, step, target)
    if after is None:
        return None  # the budget ran out after the critique: no refinement to credit
    critique = CodeCritique.model_validate(texts.json(critique_hash))
    statuses = {v.id: v.status for v in critique.verdicts}
    checks = _verdicts(texts, target)
    d = discriminability(statuses, checks)
    before, after_score = float(target.get("check_score", 0.0)), float(after.get("check_score", 0.0))
    h = helpfulness(before, after_score)
    return _Turn(
        trajectory,
        step,
        "critic",
        critic_reward(d, h, kind),
        checks,
        d=d,
        h=h,
        score_before=before,
        score_after=after_score,
        critic_verdicts=[statuses.get(n, "") for n in range(len(checks))],
    )


def webloop_records(
    trajectories: Sequence[Trajectory], texts: BlobTexts, options: ExportOptions = DEFAULT_EXPORT
) -> Iterator[WebloopRecord]:
    critic = options.critic_reward
    turns: list[_Turn] = []
    for trajectory in trajectories:
        texts.prefetch(
            d
            for s in trajectory.own_steps
            for d in (s.get("checks"), s.get("critique"), s.get("critic_prompt"), s.get("critic_completion"))
        )
        for step in trajectory.own_steps:
            turns.append(_coder_turn(trajectory, step, texts))
            critique = step.get("critique")
            if critique and step.get("critic_target") is not None:
                turn = _critic_turn(trajectory, step, texts, critic, critique)
                if turn is not None:
                    turns.append(turn)
    texts.prefetch_prompts(t.step.get("prompt") for t in turns if t.role != "critic")
    texts.prefetch(t.step.get("completion") for t in turns if t.role != "critic")
    texts.prefetch(t.step.get("critic_logprobs") if t.role == "critic" else t.step.get("logprobs") for t in turns)
    pools: dict[tuple[str, str], list[float]] = defaultdict(list)
    for turn in turns:
        pools[(turn.trajectory.group_id, turn.role)].append(turn.reward)
    normalised = {key: iter(advantages(rewards)) for key, rewards in pools.items()}
    stats = {key: group_stats(rewards) for key, rewards in pools.items()}
    records: list[WebloopRecord] = []
    for turn in turns:
        key = (turn.trajectory.group_id, turn.role)
        mean, std = stats[key]
        step = turn.step
        critic_prompt, critique = step.get("critic_prompt"), step.get("critique")
        if turn.role == "critic" and critic_prompt and critique:
            prompt = [ChatMessage.model_validate(m) for m in texts.json(critic_prompt)]
            # The answer as sampled; runs from before it was kept have only the parsed critique.
            sampled = step.get("critic_completion")
            completion = [ChatMessage(role="assistant", content=texts.text(sampled or critique))]
            logprobs = texts.logprobs(step.get("critic_logprobs"))
        else:
            prompt, completion = texts.prompt(step["prompt"]), [texts.message("assistant", step["completion"])]
            logprobs = texts.logprobs(step.get("logprobs"))
        records.append(
            WebloopRecord(
                group_id=turn.trajectory.group_id,
                trajectory_id=turn.trajectory.trajectory_id,
                step=step["index"],
                role=turn.role,
                prompt=prompt,
                completion=completion,
                reward=turn.reward,
                d=turn.d,
                h=turn.h,
                advantage=next(normalised[key]),
                group_mean=mean,
                group_std=std,
                group_size=len(pools[key]),
                check_score=turn.score_before,
                check_score_after=turn.score_after,
                checks=turn.page_checks,
                critic_verdicts=turn.critic_verdicts,
                critic_model=step.get("critic_model", "") if turn.role == "critic" else "",
                format_ok=bool(step.get("format_ok", True)) if turn.role != "critic" else True,
                has_logprobs=bool(logprobs),
                logprobs=logprobs,
                completion_logprobs=[token.logprob for token in logprobs] if logprobs else None,
            )
        )
    # Front: a Critic record with checks and verdicts, and before it one with logprobs too when there is one.
    records = arrow_friendly_order(records, complete=lambda r: bool(r.checks and r.critic_verdicts))
    yield from arrow_friendly_order(records, complete=lambda r: bool(r.checks and r.critic_verdicts and r.logprobs))
