"""Pydantic types of the training exports (one JSON line per record; see docs/exports.md).

Every field has one JSON type in every record: Arrow, and so ``datasets.load_dataset("json", ...)``,
infers one schema per column and fails on mixed types. The one exception are the token-id columns,
null when the endpoint did not return ids (a null fits any Arrow type; an empty list would claim the
endpoint sampled nothing).

``prompt`` and ``completion`` are both message lists (the completion one assistant message), the
conversational prompt-completion layout TRL defines; ``export --text`` writes both as strings.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from webgen_agent.checkpoints.credit import CriticReward, RewardKind
from webgen_agent.checkpoints.flat_groups import FlatGroup
from webgen_agent.checkpoints.formats import ExportFormat
from webgen_agent.core.views import Critique, Grade

WebloopRole = Literal["generator", "critic", "refiner"]


class ExportOptions(BaseModel):
    """What ``export`` asks of every builder (checkpoints/formats.py); each reads the options it has a use for."""

    model_config = ConfigDict(frozen=True)

    min_score: float | None = Field(default=None, description="sft: keep trajectories whose reward is at least this.")
    reward: RewardKind = Field(
        default="step", description="The reward of a step (step-grpo, trajectory, rewards, verl)."
    )
    critic_reward: CriticReward = Field(default="dh", description="webloop: the Critic's reward.")


DEFAULT_EXPORT = ExportOptions()


class ChatMessage(BaseModel):
    """One chat message as the model saw it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["system", "user", "assistant"] = Field(description="Who wrote the message.")
    content: str = Field(description="The message text, exactly as sent.")


class TokenLogprob(BaseModel):
    """One sampled token and its log-probability, as the endpoint returned it."""

    model_config = ConfigDict(extra="forbid")

    token: str = Field(description="The token text (tokens join back to the completion).")
    logprob: float = Field(description="Natural-log probability of the token under the sampling model.")


class StepGrpoRecord(BaseModel):
    """One coder step (Generator or Refiner output) with its reward and group-normalised advantage."""

    model_config = ConfigDict(extra="forbid")

    group_id: str = Field(description="Instruction id; advantages are normalised over this group.")
    trajectory_id: str = Field(description="Run id (one checkpoint thread) the step belongs to.")
    step: int = Field(description="Index of the step in its trajectory, from 0.")
    role: Literal["generator", "refiner"] = Field(description="The node that asked the coder.")
    action: str = Field(description="edit, screenshot_validated, finish or malformed.")
    prompt: list[ChatMessage] = Field(description="The exact messages the coder was sent, system message first.")
    completion: list[ChatMessage] = Field(description="One assistant message: the coder's raw output.")
    screenshot_score: Grade = Field(description="Screenshot grade 1-5 of the scored edit (0 when nothing rendered).")
    gui_score: Grade = Field(description="GUI-test grade 1-5 of the scored edit (0 when not run).")
    scored_step: int = Field(
        description="The step whose scores give the reward: itself, or for a control word the code edit it refers to."
    )
    pool_entry: int = Field(
        description="The trajectory's reward-pool entry whose reward and advantage cover this step's tokens."
    )
    profile: str = Field(description="The rules the run followed: upstream or default (how its pool was built).")
    pool_rule: str = Field(
        description="The rule that built the pool: webgen-rl (WebGen-RL's batch loop) or one-per-step (docs/rewards.md)."
    )
    reward: float = Field(description="screenshot_score + gui_score (0-10); -1 for a malformed reply.")
    advantage: float = Field(description="(reward - group_mean) / (group_std + 1e-6).")
    group_mean: float = Field(description="Mean reward of every pool entry of every trajectory of the group.")
    group_std: float = Field(description="Sample standard deviation (ddof=1) of those rewards; 1 for a one-step group.")
    group_size: int = Field(description="Number of pool entries the group statistics cover.")
    group_trajectories: int = Field(description="Number of trajectories in the group.")
    format_ok: bool = Field(description="The reply followed the edit format.")
    model: str = Field(description="Model name the endpoint reported.")
    has_logprobs: bool = Field(description="The endpoint returned token logprobs for this completion.")
    logprobs: list[TokenLogprob] = Field(description="Per-token logprobs of the completion; empty when not returned.")
    prompt_token_ids: list[int] | None = Field(
        description="The prompt as the endpoint tokenised it; null if not returned."
    )
    completion_token_ids: list[int] | None = Field(description="The sampled token ids; null if not returned.")
    completion_logprobs: list[float] | None = Field(
        description="Old-policy logprob of each sampled token (aligned with completion_token_ids); null without logprobs."
    )
    final_site: bool = Field(
        description="This step's files became the trajectory's final site (not named 'chosen': TRL reads that key as preference data)."
    )


class SftRecord(BaseModel):
    """One trajectory as a multi-turn conversation ending with the chosen step's completion."""

    model_config = ConfigDict(extra="forbid")

    messages: list[ChatMessage] = Field(description="System, user and assistant turns; train on the assistant turns.")
    group_id: str = Field(description="Instruction id.")
    trajectory_id: str = Field(description="Run id.")
    step: int = Field(description="The chosen step (the last step when none was chosen).")
    reward: float = Field(description="Reward of that step (screenshot_score + gui_score, -1 if malformed).")
    screenshot_score: Grade = Field(description="Screenshot grade of that step.")
    gui_score: Grade = Field(description="GUI-test grade of that step.")


class CriticRecord(BaseModel):
    """One llm-Critic critique and how much the refinement it led to improved the reward (WebLoop)."""

    model_config = ConfigDict(extra="forbid")

    group_id: str = Field(description="Instruction id.")
    trajectory_id: str = Field(description="Run id.")
    step: int = Field(description="The coder step that was critiqued.")
    next_step: int = Field(description="The Refiner step that answered the critique.")
    prompt: list[ChatMessage] = Field(description="The exact messages the Critic was sent.")
    completion: list[ChatMessage] = Field(description="One assistant message: the critique's JSON text as sampled.")
    critique: Critique = Field(description="The same critique as a structure.")
    reward_before: float = Field(description="Reward of the critiqued step.")
    reward_after: float = Field(description="Reward of the step after the refinement.")
    credit: float = Field(description="reward_after - reward_before.")
    has_logprobs: bool = Field(description="The endpoint returned token logprobs for this completion.")
    logprobs: list[TokenLogprob] = Field(description="Per-token logprobs of the completion; [] when not returned.")
    completion_logprobs: list[float] | None = Field(
        description="The sampling policy's logprob of each completion token (for an importance ratio); null without."
    )


class RewardsRecord(BaseModel):
    """One trajectory's raw step rewards, for normalisations other than Step-GRPO's."""

    model_config = ConfigDict(extra="forbid")

    group_id: str = Field(description="Instruction id.")
    trajectory_id: str = Field(description="Run id.")
    status: str = Field(description="Run status: finished, failed or interrupted.")
    profile: str = Field(description="The rules the run followed: upstream or default.")
    pool_rule: str = Field(description="The rule that built the pool: webgen-rl or one-per-step.")
    chosen_step: int = Field(description="The step whose files became the final site; -1 when none.")
    steps: list[int] = Field(description="Step indices, in order.")
    rewards: list[float] = Field(description="Reward credited to each step: its pool entry's (same order).")
    screenshot_scores: list[Grade] = Field(description="Screenshot grade of each step's pool entry.")
    gui_scores: list[Grade] = Field(description="GUI-test grade of each step's pool entry.")
    replay_scores: list[float | None] = Field(
        default_factory=list,
        description="Share of recorded GUI tests that passed when replayed on each step's pool entry's page "
        "(None: none replayed).",
    )
    format_ok: list[bool] = Field(description="Whether each reply followed the edit format.")
    pool_rewards: list[float] = Field(
        description="The trajectory's reward pool (the R Step-GRPO normalises): one reward per entry."
    )
    pool_steps: list[list[int]] = Field(description="For each pool entry, the steps whose tokens it covers.")


class WebloopRecord(BaseModel):
    """One role turn of a WebLoop trajectory with its per-role credit (docs/rewards.md)."""

    model_config = ConfigDict(extra="forbid")

    group_id: str = Field(description="Instruction id; advantages are normalised per role over this group.")
    trajectory_id: str = Field(description="Run id.")
    step: int = Field(description="The coder step of the turn; for a Critic turn, the step it ran after.")
    role: WebloopRole = Field(description="generator, critic or refiner.")
    prompt: list[ChatMessage] = Field(description="The exact messages the role's model was sent.")
    completion: list[ChatMessage] = Field(
        description="One assistant message: the model's output (the critique as JSON for the Critic)."
    )
    reward: float = Field(description="Generator/Refiner: check score of its page (-1 malformed); Critic: D, H or D+H.")
    d: float = Field(
        description="Critic discriminability: share of requirements its verdict matched the check (0 otherwise)."
    )
    h: float = Field(description="Critic helpfulness: check score after its refinement minus before (0 otherwise).")
    advantage: float = Field(
        description="(reward - group_mean) / (group_std + 1e-6), over this role's turns in the group."
    )
    group_mean: float = Field(description="Mean reward of the role's turns in the group.")
    group_std: float = Field(description="Sample std (ddof=1) of those rewards; 1 for a lone turn.")
    group_size: int = Field(description="Number of the role's turns in the group.")
    check_score: float = Field(description="Check score of the turn's page (for a Critic: the page it criticised).")
    check_score_after: float = Field(description="For a Critic: check score of the refined page; else check_score.")
    checks: list[str] = Field(description="The check verdicts (YES/PARTIAL/NO) behind check_score, by requirement id.")
    critic_verdicts: list[str] = Field(description="Critic: its status per requirement id (met/partly/unmet, '' none).")
    critic_model: str = Field(description="Critic: coder (shared policy) or feedback; '' for other roles.")
    format_ok: bool = Field(description="The coder's reply followed the edit format (true for Critic turns).")
    has_logprobs: bool = Field(description="The endpoint returned token logprobs for this completion.")
    logprobs: list[TokenLogprob] = Field(description="Per-token logprobs of the completion; [] when not returned.")
    completion_logprobs: list[float] | None = Field(
        description="The sampling policy's logprob of each completion token (for an importance ratio); null without."
    )


class TurnRecord(BaseModel):
    """One assistant turn of a trajectory record and the credit of the step that wrote it."""

    model_config = ConfigDict(extra="forbid")

    message: int = Field(description="Position of the assistant message in ``messages``.")
    step: int = Field(description="The coder step that wrote it; -1 when no step of this trajectory did.")
    reward: float = Field(description="The reward of the pool entry covering that step (0 when none does).")
    advantage: float = Field(description="That entry's group-normalised advantage, as in the step-grpo export.")
    train: bool = Field(description="Train on this turn: a pool entry covers its step.")


class TrajectoryRecord(BaseModel):
    """One trajectory as the coder's conversation, with a reward and advantage per assistant turn."""

    model_config = ConfigDict(extra="forbid")

    group_id: str = Field(description="Instruction id; advantages are normalised over this group.")
    trajectory_id: str = Field(description="Run id.")
    status: str = Field(description="Run status: finished, failed or interrupted.")
    messages: list[ChatMessage] = Field(
        description="The last step's prompt and completion: system, user, then assistant and feedback turns."
    )
    turns: list[TurnRecord] = Field(description="One entry per assistant message, in order.")
    chosen_step: int = Field(description="The step whose files became the final site; -1 when none.")
    group_trajectories: int = Field(description="Number of trajectories in the group.")


VERL_DATA_SOURCE = "webgen-agent"
VERL_ABILITY = "web-generation"


class VerlReward(BaseModel):
    """verl's ``reward_model`` column: how the prompt is scored and against what."""

    model_config = ConfigDict(extra="forbid")

    style: Literal["model"] = Field(
        default="model", description="Scored by models (screenshot judge, GUI test), not by a rule."
    )
    ground_truth: str = Field(
        description="The instruction's UI test cases as JSON text ([{task, expected_result}], [] when none)."
    )


class VerlExtraInfo(BaseModel):
    """verl's ``extra_info`` column: the index verl reads, and the trajectory's credit per turn."""

    model_config = ConfigDict(extra="forbid")

    split: str = Field(default="train", description="Always train (exports are training data).")
    index: int = Field(description="Row number in the file (verl reads extra_info.index).")
    group_id: str = Field(description="Instruction id; advantages are normalised over this group.")
    trajectory_id: str = Field(description="Run id.")
    instruction: str = Field(description="The instruction (the user's requirement).")
    status: str = Field(description="Run status.")
    turns: list[TurnRecord] = Field(description="One entry per assistant message of ``messages``, as in trajectory.")
    chosen_step: int = Field(description="The step whose files became the final site; -1 when none.")
    group_trajectories: int = Field(description="Number of trajectories in the group.")


class VerlRecord(BaseModel):
    """One trajectory in verl's dataset layout: ``prompt`` for its RL dataset (RLHFDataset), the whole
    conversation as ``messages`` for its multi-turn SFT dataset, the credit in ``extra_info``."""

    model_config = ConfigDict(extra="forbid")

    data_source: str = Field(default=VERL_DATA_SOURCE, description="Picks the reward function in verl.")
    prompt: list[ChatMessage] = Field(description="The coder's first prompt: system message and instruction.")
    ability: str = Field(default=VERL_ABILITY, description="Task category (verl's convention).")
    reward_model: VerlReward
    extra_info: VerlExtraInfo
    messages: list[ChatMessage] = Field(description="The whole conversation, as the trajectory format's.")


class ExportReport(BaseModel):
    """What an export wrote."""

    format: ExportFormat
    path: str
    records: int = Field(description="JSON lines written.")
    trajectories: int = Field(description="Trajectories read.")
    groups: int = Field(description="Groups read.")
    flat_groups: list[FlatGroup] = Field(
        default_factory=list, description="Groups read whose rewards are all equal (no training signal)."
    )
    dropped_groups: int = Field(default=0, description="Flat groups left out (drop_flat_groups).")
    left_out: list[str] = Field(
        default_factory=list,
        description="Trajectories and steps the trainer's pool rule cannot train as recorded, and why: one line each.",
    )
    from_folder: list[str] = Field(
        default_factory=list,
        description="Runs started from a folder (run --from) that a format training every assistant turn "
        "leaves out: their first assistant turn is the user's project, not a model completion.",
    )
    mixed_groups: list[str] = Field(
        default_factory=list,
        description="Groups whose trajectories' pools were built by different rules (profiles): one line each.",
    )
    lone_groups: list[str] = Field(
        default_factory=list,
        description="Groups of one pool entry, whose advantage is the raw reward (mean 0, std 1): one line each.",
    )
    seconds: float = 0.0
