"""Micro-batches: left-padded sequences, and the completion tokens' logprobs from one forward pass."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from webgen_agent.apps.train.encode import Example


class Batch:
    """Sequences left-padded so that every completion ends at the right edge: the logits are then
    needed only for the last ``window`` positions (``logits_to_keep``), not for the whole prompt,
    whose logits would otherwise take most of the memory (prompt length x vocabulary).

    ``mask``, ``old`` and ``has_old`` are laid out like the logprobs: column j scores the token at
    position ``width - window + j``.
    """

    def __init__(self, examples: Sequence[Example], pad_id: int, device: torch.device) -> None:
        width = max(len(e.input_ids) for e in examples)
        self.window = max(e.completion_tokens for e in examples)
        rows = len(examples)
        ids = torch.full((rows, width), pad_id, dtype=torch.long)
        attention = torch.zeros((rows, width), dtype=torch.long)
        mask = torch.zeros((rows, self.window))
        old = torch.zeros((rows, self.window))
        has_old = torch.zeros((rows, self.window), dtype=torch.bool)
        for row, example in enumerate(examples):
            length, tokens = len(example.input_ids), example.completion_tokens
            ids[row, width - length :] = torch.tensor(example.input_ids)
            attention[row, width - length :] = 1
            mask[row, self.window - tokens :] = 1
            if example.old_logprobs is not None:
                old[row, self.window - tokens :] = torch.tensor(example.old_logprobs)
                has_old[row, self.window - tokens :] = True
        self.input_ids = ids.to(device)
        self.attention_mask = attention.to(device)
        # positions count real tokens only, as if each sequence started at the left edge
        self.position_ids = (attention.cumsum(-1) - 1).clamp(min=0).to(device)
        self.mask = mask.to(device)
        self.old = old.to(device)
        self.has_old = has_old.to(device)
        self.advantages = torch.tensor([e.advantage for e in examples], device=device)
        self.tokens = int(mask.sum())

    def logprobs(self, model: Any) -> torch.Tensor:
        """log p(token | tokens before it) for the last ``window`` positions: [rows, window]."""
        inputs = {"input_ids": self.input_ids, "attention_mask": self.attention_mask, "position_ids": self.position_ids}
        try:
            logits = model(**inputs, logits_to_keep=self.window + 1).logits
        except TypeError:  # a model class without logits_to_keep: all logits, then the window
            logits = model(**inputs).logits
        logits = logits[:, -(self.window + 1) : -1].float()
        targets = self.input_ids[:, -self.window :]
        return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
