"""Records -> token ids: chat template (or the exported ids when they match), prompt masked."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from webgen_agent.apps.train.chat import split_rendering
from webgen_agent.apps.train.data import TrainRecord

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class Example:
    """One training sequence: prompt then completion ids; only the completion is trained on."""

    input_ids: list[int]
    start: int  # position of the first completion token
    advantage: float
    old_logprobs: list[float] | None  # one per completion token, from the sampling policy
    source: Literal["exported ids", "chat template", "text"]
    truncated: bool
    # A webloop Critic turn under a reward switch: its advantage before the switch (D alone) and after.
    switched: tuple[float, float] | None = None

    def at_step(self, before_switch: bool) -> Example:
        """This example with the advantage its phase of the reward switch gives it."""
        if self.switched is None:
            return self
        return replace(self, advantage=self.switched[0 if before_switch else 1])

    @property
    def completion_tokens(self) -> int:
        return len(self.input_ids) - self.start


def render(record: TrainRecord, tokenizer: PreTrainedTokenizerBase) -> tuple[str, str]:
    """(prompt text with the generation prompt, completion text): as they are for text records, through
    the chat template (split as TRL splits them) for message records."""
    if isinstance(record.prompt, str) or isinstance(record.completion, str):
        return str(record.prompt), str(record.completion)
    prompt = [m.model_dump() for m in record.prompt]
    completion = [m.model_dump() for m in record.completion]
    return split_rendering(tokenizer, prompt, completion)


def _ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def exported_ids_match(record: TrainRecord, prompt_ids: list[int], tokenizer: PreTrainedTokenizerBase) -> bool:
    """The endpoint's ids belong to this tokenizer: same prompt ids, completion ids decode to the text."""
    ids = record.completion_token_ids
    if record.prompt_token_ids != prompt_ids or not ids:
        return False
    if max(ids) >= len(tokenizer) or min(ids) < 0:
        return False
    decoded = tokenizer.decode(ids, skip_special_tokens=True)
    if not isinstance(decoded, str):
        return False
    content = record.completion_content
    return decoded == content if record.conversational else content.startswith(decoded)


def encode(record: TrainRecord, tokenizer: PreTrainedTokenizerBase, max_length: int) -> Example | None:
    """The record's training sequence, or None when no completion token fits in ``max_length``.

    Too long a sequence loses the start of its prompt first (the completion and the turns just
    before it matter most), then the end of its completion.
    """
    prompt_text, completion_text = render(record, tokenizer)
    prompt_ids = _ids(tokenizer, prompt_text)
    old: list[float] | None = None
    source: Literal["exported ids", "chat template", "text"]
    if exported_ids_match(record, prompt_ids, tokenizer):
        completion_ids = list(record.completion_token_ids or [])
        logprobs = record.completion_logprobs
        old = list(logprobs) if logprobs is not None and len(logprobs) == len(completion_ids) else None
        source = "exported ids"
    else:
        completion_ids = _ids(tokenizer, completion_text)
        source = "chat template" if record.conversational else "text"
    if not completion_ids:
        return None
    truncated = len(prompt_ids) + len(completion_ids) > max_length
    if truncated:
        completion_ids = completion_ids[: max_length - 1]
        prompt_ids = prompt_ids[max(0, len(prompt_ids) - (max_length - len(completion_ids))) :]
        if old is not None:
            old = old[: len(completion_ids)]
    if not prompt_ids:
        return None  # a completion needs at least one token before it to be predicted from
    return Example(
        input_ids=prompt_ids + completion_ids,
        start=len(prompt_ids),
        advantage=record.advantage,
        old_logprobs=old,
        source=source,
        truncated=truncated,
    )
