"""The Step-GRPO policy loss: token-level PPO clip against the sampling policy's logprobs (torch)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class LossParts:
    loss: torch.Tensor  # to backpropagate: token sums divided by the optimizer step's token count
    ratio_sum: float
    clipped: float  # tokens whose ratio left [1 - eps_low, 1 + eps_high]
    kl_sum: float
    tokens: int


def completion_logprobs(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """log p(token t | tokens < t) for t = 1..T-1: shape [batch, T - 1]."""
    logprobs = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    return logprobs.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float,
    eps_high: float,
    total_tokens: int,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> LossParts:
    """PPO's clipped surrogate per completion token, advantage per sequence, averaged over tokens.

    ``old_logprobs`` equal to ``logprobs.detach()`` (no exported logprobs) makes every ratio 1:
    the loss is then the advantage-weighted negative log-likelihood. ``total_tokens`` is the
    completion-token count of the whole optimizer step, so gradient accumulation averages the
    same way one big batch would. KL to the reference uses the k3 estimator (always >= 0).
    """
    ratio = torch.exp(logprobs - old_logprobs)
    adv = advantages.unsqueeze(-1)
    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * adv)
    per_token = -surrogate
    kl_sum = 0.0
    if ref_logprobs is not None and kl_coef:
        delta = ref_logprobs - logprobs
        kl = torch.exp(delta) - delta - 1
        per_token = per_token + kl_coef * kl
        kl_sum = float((kl.detach() * mask).sum())
    loss = (per_token * mask).sum() / max(total_tokens, 1)
    with torch.no_grad():
        outside = ((ratio < 1 - eps_low) | (ratio > 1 + eps_high)).float()
        return LossParts(
            loss=loss,
            ratio_sum=float((ratio * mask).sum()),
            clipped=float((outside * mask).sum()),
            kl_sum=kl_sum,
            tokens=int(mask.sum()),
        )
