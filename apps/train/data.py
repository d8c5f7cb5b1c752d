"""Training records read from a step-grpo or webloop export (JSON lines or parquet); no torch here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from webgen_agent.checkpoints.credit import CriticReward, critic_reward
from webgen_agent.checkpoints.rewards import advantages


class TrainDataError(ValueError):
    """The data file cannot be trained on; the message names the file and the record."""


class Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant", "tool"]
    content: str


class TrainRecord(BaseModel):
    """The columns the trainer reads from a step-grpo record; other columns are ignored."""

    model_config = ConfigDict(extra="ignore")

    prompt: list[Message] | str
    completion: list[Message] | str
    advantage: float
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = Field(default=None, description="Old-policy logprob per completion id.")
    # webloop records: which role's turn, its group, and the Critic's discriminability and helpfulness.
    role: str | None = None
    group_id: str | None = None
    d: float | None = None
    h: float | None = None

    @model_validator(mode="after")
    def _same_kind(self) -> TrainRecord:
        if isinstance(self.prompt, str) != isinstance(self.completion, str):
            raise ValueError("prompt and completion must both be message lists or both be strings")
        if isinstance(self.completion, list) and not self.completion:
            raise ValueError("completion is an empty message list")
        return self

    @property
    def conversational(self) -> bool:
        return not isinstance(self.prompt, str)

    @property
    def completion_content(self) -> str:
        """The assistant's text (the completion string itself for text records)."""
        if isinstance(self.completion, str):
            return self.completion
        return "".join(m.content for m in self.completion)


def _rows(path: Path) -> Iterator[tuple[str, Any]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise TrainDataError(f"{path}: not a readable parquet file ({exc})") from exc
        for index, row in enumerate(table.to_pylist()):
            yield f"{path}: row {index + 1}", row
        return
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as exc:
                raise TrainDataError(f"{where}: not JSON ({exc.msg})") from exc


def read_records(path: str | Path) -> list[TrainRecord]:
    """Every record of a step-grpo or webloop export; raises TrainDataError naming the first bad record."""
    path = Path(path)
    if not path.is_file():
        raise TrainDataError(f"{path}: no such file")
    records = []
    for where, row in _rows(path):
        try:
            records.append(TrainRecord.model_validate(row))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "record"
            raise TrainDataError(f"{where}: {field}: {first['msg']} (expected a step-grpo or webloop record)") from exc
    if not records:
        raise TrainDataError(f"{path}: no records")
    return records


def require_signal(records: list[TrainRecord], path: Path, *, reward_switch: bool) -> None:
    """Refuse data in which every advantage is 0: training on it moves nothing (loss 0) and would
    pass for a run that learned. Webloop Critic records count as signal under the reward switch,
    which recomputes their advantages from d and h."""
    if any(record.advantage != 0 for record in records):
        return
    if reward_switch and any(record.role == "critic" and record.d is not None for record in records):
        return
    groups = len({record.group_id for record in records if record.group_id is not None})
    in_groups = f" in {groups} groups" if groups else ""
    raise TrainDataError(
        f"{path}: every advantage of the {len(records)} records{in_groups} is 0 (each group's rewards are all "
        "equal: see `export`'s warning), so there is nothing to learn; --allow-no-signal trains anyway"
    )


def critic_advantages(records: list[TrainRecord], kind: CriticReward) -> dict[int, float]:
    """Record index -> the advantage of a Critic turn whose reward is ``kind`` (d, h or dh), normalised
    over the Critic turns of its group as the webloop export does; only webloop Critic records."""
    groups: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        if record.role == "critic" and record.d is not None and record.h is not None:
            groups.setdefault(record.group_id or "", []).append(index)
    found: dict[int, float] = {}
    for indices in groups.values():
        rewards = [critic_reward(records[i].d or 0.0, records[i].h or 0.0, kind) for i in indices]
        found.update(zip(indices, advantages(rewards)))
    return found
