"""Step-GRPO pools and per-token advantages, against a port of WebGen-RL's own batch loop.

The port below is written here from upstream's code (WebGen-Agent ``WebGen-RL/verl``, at ba86ef1),
independently of the project's: the turn loop of ``workers/agentic/webgen_agent/generation.py``
``run_llm_loop`` (l.249-354: the active rows, the rolling context cut at the prompt budget, the
response side cut at the same length, the positions that close each score entry),
``_postprocess_responses`` (l.62-92: a reply at the response budget ends its row, and drops it unless
repetitive), ``_compose_final_output`` (l.384-389: a dropped row keeps no score and trains no
token), ``execute_predictions`` (l.399-446: the score list, updated for the rows still active),
``workers/reward_manager/webgen.py`` (l.25-30: the reward of an entry) and
``trainer/ppo/core_algos.py`` ``compute_step_level_grpo_advantage`` (l.152-214: the group's mean
and sample std, then each entry's advantage over the response tokens from the previous entry's
position to its own; a token no entry covers keeps the response mask's value, 1).

Tokens are tracked as intervals of the response side (replies trained, observations masked), so a
turn's per-token advantages are the values of the entries its interval meets, plus "uncovered".
The project's records carry one advantage per step: a step must be exported exactly when upstream
trains its tokens with one entry's advantage, and then with that advantage.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from webgen_agent.checkpoints.export import GroupRewards
from webgen_agent.checkpoints.runs import RunRecord
from webgen_agent.checkpoints.trajectories import Trajectory, trainable
from webgen_agent.core.profiles.rules import REPEATS_ITSELF
from webgen_agent.core.state import Step

PROMPT_BUDGET = 23_767  # run script l.48-52: max_prompt_length (the rolling context and the response side)
RESPONSE_BUDGET = 9_000  # max_response_length: one reply
OBSERVATION_BUDGET = 5_000  # max_obs_length
TURNS = 5  # max_turns (N_TURNS)
UNCOVERED = "uncovered"  # a trained token no entry covers: its advantage is the response mask's 1


@dataclass
class Turn:
    kind: str  # edit, validated or finish (what get_feedback reports for the reply)
    shot: int | float  # a grade as the judge wrote it: upstream keeps a fraction
    gui: int | float
    good: bool  # get_feedback's is_good_format
    reply: int  # the reply's tokens, its end-of-turn token included
    feedback: int  # the observation's tokens before the cut
    repetitive: bool = False


class BatchFailed(Exception):
    """Upstream's loop raised on this row (``scores[i][-1]`` of an empty list)."""

    def __init__(self, row: int) -> None:
        super().__init__(row)
        self.row = row


@dataclass
class Row:
    """What upstream's trainer ends with for one trajectory."""

    scores: list[dict[str, Any]] = field(default_factory=list)
    replies: list[tuple[int, int]] = field(default_factory=list)  # each turn's reply interval
    length: int = 0  # response-side tokens before its cut
    dropped: bool = False


def batch_loop(rows: list[list[Turn]], prompts: list[int], turns: int = TURNS) -> list[Row]:
    """run_llm_loop over one batch: every row generates while active; finished rows read nothing."""
    out = [Row() for _ in rows]
    active = [True] * len(rows)
    rolling = list(prompts)
    for t in range(turns):
        if not any(active):
            break
        done = [True] * len(rows)
        for i, row in enumerate(rows):
            if not active[i]:
                continue  # execute_predictions: an inactive row gets no observation and no score
            turn = row[t]
            ended = turn.reply >= RESPONSE_BUDGET  # _postprocess_responses' exceed tag
            if ended and not turn.repetitive:
                out[i].dropped = True
            scores = out[i].scores
            done[i] = turn.kind == "finish" or ended
            if turn.kind == "validated":
                if not scores:
                    raise BatchFailed(i)
                scores[-1]["webvoyager_score"] = turn.gui
                if not turn.good:
                    scores.append({**scores[-1], "is_good_format": False})
            elif turn.kind == "edit":
                scores.append(
                    {"webvoyager_score": 0, "screenshot_score": turn.shot, "position": -1, "is_good_format": turn.good}
                )
            elif not turn.good:
                if not scores:
                    raise BatchFailed(i)
                scores.append({**scores[-1], "is_good_format": False})
        for i, row in enumerate(rows):
            if not active[i]:
                continue
            turn = row[t]
            observation = 0 if done[i] else min(turn.feedback, OBSERVATION_BUDGET)
            out[i].replies.append((out[i].length, out[i].length + turn.reply))
            out[i].length += turn.reply + observation
            rolling[i] = min(rolling[i] + turn.reply + observation, PROMPT_BUDGET)
        active = [a and not d for a, d in zip(active, done, strict=True)]
        for i in range(len(rows)):
            if out[i].scores:
                out[i].scores[-1]["position"] = rolling[i] - prompts[i]
    return out


def entry_reward(score: dict[str, Any]) -> float:
    """reward_manager/webgen.py."""
    if not score.get("is_good_format", True):
        return -1.0
    return float(score["screenshot_score"] + score["webvoyager_score"])


def token_advantages(out: list[Row]) -> list[list[set[float | str] | None]]:
    """compute_step_level_grpo_advantage, read per turn: the values over the turn's trained reply
    tokens (None: no token of the turn is trained)."""
    for row in out:
        if row.dropped:
            row.scores = []  # _compose_final_output
    rewards = [entry_reward(s) for row in out for s in row.scores]
    if len(rewards) == 1:
        mean, std = 0.0, 1.0
    elif rewards:
        mean = math.fsum(rewards) / len(rewards)
        std = math.sqrt(math.fsum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1))  # torch.std: ddof 1
    result: list[list[set[float | str] | None]] = []
    for row in out:
        spans, pre = [], 0
        for score in row.scores:
            end = row.length if score["position"] == -1 else score["position"]
            spans.append((pre, end, (entry_reward(score) - mean) / (std + 1e-6)))
            pre = end if score["position"] != -1 else pre
        kept = min(row.length, PROMPT_BUDGET)  # _update_right_side: the response side is cut there
        per_turn: list[set[float | str] | None] = []
        for start, end in row.replies:
            end = min(end, kept)
            if row.dropped or end <= start:  # a dropped row's loss mask is 0
                per_turn.append(None)
                continue
            values: set[float | str] = set()
            covered = 0
            for lo, hi, value in spans:
                overlap = min(hi, end) - max(lo, start)
                if overlap > 0:
                    values.add(value)
                    covered += overlap
            if covered < end - start:
                values.add(UNCOVERED)
            per_turn.append(values)
        result.append(per_turn)
    return result


# ---- random groups, and the same turns as the project records them ---------------------------------


def random_grade(rng: random.Random) -> int | float:
    """0-5, one grade in five a half (a judge that wrote "3.5": upstream rewards it as written)."""
    return rng.randint(0, 10) / 2 if rng.random() < 0.2 else rng.randint(0, 5)


def random_row(rng: random.Random, crossing: bool) -> list[Turn]:
    """Turns until a finish, a reply at the response budget, or the turn limit; any turn may be a
    control reply, badly formatted or not (also the first)."""
    turns: list[Turn] = []
    for _ in range(TURNS):
        if turns or rng.random() < 0.1:
            kind = rng.choice(["edit", "edit", "validated", "finish"])
        else:
            kind = "edit"
        long_reply = rng.random() < 0.04
        turn = Turn(
            kind=kind,
            shot=random_grade(rng),
            gui=random_grade(rng) if kind == "validated" else 0,
            good=rng.random() > 0.3,
            reply=RESPONSE_BUDGET if long_reply else rng.randint(20, 6_000 if crossing else 2_500),
            feedback=rng.randint(200, 8_000 if crossing else 3_000),
            repetitive=long_reply and rng.random() < 0.5,
        )
        if turn.repetitive:
            turn.good = False  # has_repetition makes the reply badly formatted
        turns.append(turn)
        if kind == "finish" or turn.reply >= RESPONSE_BUDGET:
            break
    return turns


def project_steps(turns: list[Turn], prompt: int) -> list[Step]:
    """The turns as the project's step records, with the token counts the endpoint reports."""
    steps, context = [], prompt
    action = {"edit": "edit", "validated": "screenshot_validated", "finish": "finish"}
    for n, turn in enumerate(turns):
        role = "generator" if n == 0 else "refiner"
        steps.append(
            cast(
                Step,
                {
                    "index": n,
                    "role": role,
                    "action": action[turn.kind],
                    "screenshot_score": turn.shot,
                    "gui_score": turn.gui,
                    "format_ok": turn.good,
                    "problems": [REPEATS_ITSELF] if turn.repetitive else [],
                    "tokens": {role: {"input": context, "output": turn.reply, "calls": 1}},
                },
            )
        )
        context += turn.reply + min(turn.feedback, OBSERVATION_BUDGET)
    return steps


def trajectory(run_id: str, steps: list[Step]) -> Trajectory:
    record = RunRecord(run_id=run_id, requirement="r", out_dir="", group_id="g", status="finished")
    return Trajectory(run=record, values={"steps": steps, "profile": "upstream"})


def upstream_outcome(group: list[list[Turn]], prompts: list[int]) -> tuple[list[int], list[Row]]:
    """The batch loop over the group; rows it fails on are taken out (the batch fails on them) and
    the rest run again. Returns the rows it failed on and the outcome of the others."""
    failed: list[int] = []
    while True:
        rows = [i for i in range(len(group)) if i not in failed]
        try:
            return failed, batch_loop([group[i] for i in rows], [prompts[i] for i in rows])
        except BatchFailed as exc:
            failed.append(rows[exc.row])


def compare_group(rng: random.Random) -> list[str]:
    """One random group through both; the differences found, one line each."""
    crossing = rng.random() < 0.3
    group = [random_row(rng, crossing) for _ in range(rng.randint(1, 5))]
    prompts = [rng.randint(12_000, 20_000) if crossing else rng.randint(500, 4_000) for _ in group]
    failed, out = upstream_outcome(group, prompts)
    values = token_advantages(out)
    # The project's rollout goes on after a reply at the response budget (upstream ends the row).
    extra = [random_row(rng, False)[:1] if turns[-1].reply >= RESPONSE_BUDGET else [] for turns in group]
    trajectories = [
        trajectory(f"t{i}", project_steps(turns + more, prompt))
        for i, (turns, more, prompt) in enumerate(zip(group, extra, prompts, strict=True))
    ]
    kept, _ = trainable(trajectories)
    rewards = GroupRewards.of(kept)
    problems = [
        f"t{i}: upstream's batch fails on it, the project exports it" for i in failed if trajectories[i] in kept
    ]
    for i, per_turn in zip((i for i in range(len(group)) if i not in failed), values, strict=True):
        ours = trajectories[i] if trajectories[i] in kept else None
        for step, upstream in enumerate(per_turn):
            entry = None if ours is None else ours.entry_of.get(step)
            exported = None if entry is None or ours is None else rewards.advantage[(ours.trajectory_id, entry)]
            if upstream is None or UNCOVERED in upstream:
                if exported is not None:
                    problems.append(f"t{i} step {step}: upstream trains it as {upstream}, the project as {exported}")
            elif exported is None or any(abs(exported - float(v)) > 1e-9 for v in upstream):
                problems.append(f"t{i} step {step}: upstream {sorted(map(float, upstream))}, the project {exported}")
        if ours is not None and ours.limits.steps[len(per_turn) :]:
            problems.append(f"t{i}: the pool counts steps past the turn upstream ended the trajectory at")
    return problems


def test_per_token_advantages_equal_webgen_rls_batch_loop_on_random_groups():
    rng = random.Random(31)
    differing = [problems for _ in range(400) if (problems := compare_group(rng))]
    assert not differing, f"{len(differing)} of 400 groups differ, e.g. {differing[0]}"


def test_a_finished_row_adds_no_entry_on_the_turns_the_batch_runs_after_it():
    """The issue's example: an edit graded 4, then a badly formatted finish, in a batch whose other
    row runs all five turns. Upstream's pool is [4, -1]: the finished row is inactive afterwards."""
    finished = [Turn("edit", 4, 0, True, 100, 100), Turn("finish", 0, 0, False, 100, 100)]
    busy = [Turn("edit", n, 0, True, 100, 100) for n in range(TURNS)]
    out = batch_loop([finished, busy], [1_000, 1_000])
    assert [entry_reward(s) for s in out[0].scores] == [4.0, -1.0]
    pool = trajectory("f", project_steps(finished, 1_000)).pool
    assert [e.reward for e in pool] == [4.0, -1.0]


@pytest.mark.parametrize(
    ("turns", "why"),
    [
        ([Turn("finish", 0, 0, True, 50, 0)], "gives its tokens no pool entry"),
        ([Turn("validated", 0, 3, True, 50, 50), Turn("edit", 4, 0, True, 50, 50)], "fails on it"),
        ([Turn("edit", 3, 0, True, RESPONSE_BUDGET, 50), Turn("edit", 4, 0, True, 50, 50)], "drops such"),
    ],
)
def test_what_upstreams_trainer_cannot_train_is_left_out_with_the_reason(turns, why):
    kept, lines = trainable([trajectory("x", project_steps(turns, 1_000))])
    assert not kept and len(lines) == 1 and why in lines[0] and lines[0].startswith("x left out: step ")


def test_steps_past_the_context_cap_are_left_out_and_their_entries_still_count():
    turns = [Turn("edit", 2, 0, True, 3_000, 5_000), Turn("edit", 5, 0, True, 3_000, 100)]
    ours = trajectory("c", project_steps(turns, 17_000))
    kept, lines = trainable([ours])
    assert kept == [ours] and "steps 1-1 left out" in lines[0] and "context cap (23,767)" in lines[0]
    assert [e.reward for e in ours.pool] == [2.0, 5.0] and [e.steps for e in ours.pool] == [[0], []]
