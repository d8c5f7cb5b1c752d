"""The reference offline Step-GRPO trainer: a Hugging Face causal LM trained on a step-grpo export.

Imported only by ``webgen-agent train`` (torch, transformers and peft come with the ``[train]`` extra).
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, Field
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from webgen_agent.apps.train.batch import Batch
from webgen_agent.apps.train.chat import load_tokenizer
from webgen_agent.apps.train.data import (
    TrainDataError,
    TrainRecord,
    critic_advantages,
    read_records,
    require_signal,
)
from webgen_agent.apps.train.encode import Example, encode
from webgen_agent.apps.train.loss import policy_loss


class TrainConfig(BaseModel):
    """Options of one training run (the ``webgen-agent train`` flags)."""

    data: Path
    model: Path
    out: Path
    epochs: int = Field(default=1, ge=1)
    batch_size: int = Field(default=4, ge=1, description="Sequences per forward pass.")
    grad_accum: int = Field(default=1, ge=1, description="Forward passes per optimizer step.")
    lr: float = Field(default=1e-6, gt=0)
    max_length: int = Field(default=8192, ge=2)
    clip_eps: float = Field(default=0.2, gt=0, description="PPO clip range below 1 (and above, unless clip_eps_high).")
    clip_eps_high: float | None = Field(default=None, gt=0)
    kl_coef: float = Field(default=0.0, ge=0)
    ref_model: Path | None = Field(default=None, description="Reference for the KL term (default: --model).")
    lora: bool = False
    lora_r: int = Field(default=16, ge=1)
    lora_alpha: int = Field(default=32, ge=1)
    lora_dropout: float = Field(default=0.05, ge=0, lt=1)
    gradient_checkpointing: bool = False
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    device: str = "auto"
    seed: int = 0
    max_steps: int | None = Field(default=None, ge=1, description="Stop after this many optimizer steps.")
    critic_reward_switch: int | None = Field(
        default=None,
        ge=0,
        description="webloop data: the Critic's reward is D alone for this many optimizer steps, then D + H.",
    )
    allow_no_signal: bool = Field(default=False, description="Train even when every advantage is 0.")


class StepFigures(BaseModel):
    step: int
    epoch: int
    loss: float
    mean_ratio: float
    clip_fraction: float
    kl: float
    tokens: int
    lr: float
    critic_reward: Literal["d", "dh"] | None = Field(
        default=None, description="The Critic's reward in this step (with --critic-reward-switch)."
    )


class TrainReport(BaseModel):
    """What a training run did (also written to OUT/training.json)."""

    out: str
    records: int
    examples: int
    skipped: int = Field(description="Records with no completion token left within max_length.")
    truncated: int
    sources: dict[str, int] = Field(description="How many sequences were tokenised each way.")
    with_old_logprobs: int = Field(description="Sequences trained with the clipped ratio against exported logprobs.")
    steps: int
    seconds: float
    history: list[StepFigures]


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def _local_dir(path: Path, what: str) -> Path:
    if not path.is_dir():
        raise TrainDataError(f"{path}: no such directory ({what}: a local Hugging Face model directory)")
    return path


def load_model(path: Path, dtype: torch.dtype, device: torch.device) -> Any:
    from transformers import AutoModelForCausalLM

    try:
        model: Any = AutoModelForCausalLM.from_pretrained(
            _local_dir(path, "--model"), dtype=dtype, local_files_only=True
        )
    except (OSError, ValueError) as exc:
        raise TrainDataError(f"{path}: not a causal language model ({str(exc).splitlines()[0]})") from exc
    return model.to(device)


def _tokenizer(path: Path) -> Any:
    tokenizer = load_tokenizer(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _with_lora(model: Any, config: TrainConfig) -> Any:
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


def _steps(examples: list[Example], config: TrainConfig, rng: random.Random) -> Iterator[list[list[Example]]]:
    """Each optimizer step's micro-batches, epoch after epoch, examples shuffled each epoch."""
    per_step = config.batch_size * config.grad_accum
    for _ in range(config.epochs):
        order = examples[:]
        rng.shuffle(order)
        for start in range(0, len(order), per_step):
            chunk = order[start : start + per_step]
            yield [chunk[i : i + config.batch_size] for i in range(0, len(chunk), config.batch_size)]


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]train[/] epoch {task.fields[epoch]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:+.4f}  ratio {task.fields[ratio]:.3f}  clip {task.fields[clip]:.3f}"),
        TimeElapsedColumn(),
        console=console,
    )


def train(config: TrainConfig, *, console: Console | None = None) -> TrainReport:
    """Train ``config.model`` on ``config.data`` and save the result (model + tokenizer) to ``config.out``."""
    started = time.monotonic()
    console = console or Console(stderr=True)
    records = read_records(config.data)
    if not config.allow_no_signal:
        require_signal(records, config.data, reward_switch=config.critic_reward_switch is not None)
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    device = _device(config.device)
    dtype = _dtype(config.dtype, device)
    tokenizer = _tokenizer(config.model)
    encoded = [encode(r, tokenizer, config.max_length) for r in records]
    if config.critic_reward_switch is not None:
        encoded = _with_reward_switch(records, encoded, config)
    examples = [e for e in encoded if e is not None]
    if not examples:
        raise TrainDataError(f"{config.data}: no record has a completion token within --max-length {config.max_length}")
    model = load_model(config.model, dtype, device)
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    reference = None
    if config.kl_coef and not config.lora:
        reference = load_model(config.ref_model or config.model, dtype, device).eval().requires_grad_(False)
    if config.lora:
        model = _with_lora(model, config)
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=config.lr)
    per_epoch = math.ceil(len(examples) / (config.batch_size * config.grad_accum))
    total = per_epoch * config.epochs if config.max_steps is None else min(config.max_steps, per_epoch * config.epochs)
    history: list[StepFigures] = []
    rng = random.Random(config.seed)
    with _progress(console) as progress:
        task = progress.add_task("train", total=total, epoch=1, loss=0.0, ratio=1.0, clip=0.0)
        for index, micro_batches in enumerate(_steps(examples, config, rng)):
            if index >= total:
                break
            before_switch = config.critic_reward_switch is not None and index < config.critic_reward_switch
            batches = [
                Batch([e.at_step(before_switch) for e in chunk], tokenizer.pad_token_id, device)
                for chunk in micro_batches
            ]
            step_tokens = sum(b.tokens for b in batches)
            loss_sum, ratio_sum, clipped, kl_sum = _backward(batches, model, reference, config, step_tokens)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            epoch = index // per_epoch + 1
            figures = StepFigures(
                step=index + 1,
                epoch=epoch,
                loss=loss_sum,
                mean_ratio=ratio_sum / max(step_tokens, 1),
                clip_fraction=clipped / max(step_tokens, 1),
                kl=kl_sum / max(step_tokens, 1),
                tokens=step_tokens,
                lr=config.lr,
                critic_reward=None if config.critic_reward_switch is None else ("d" if before_switch else "dh"),
            )
            history.append(figures)
            progress.update(
                task, advance=1, epoch=epoch, loss=figures.loss, ratio=figures.mean_ratio, clip=figures.clip_fraction
            )
    save(model, tokenizer, config)
    sources: dict[str, int] = {}
    for example in examples:
        sources[example.source] = sources.get(example.source, 0) + 1
    report = TrainReport(
        out=str(config.out),
        records=len(records),
        examples=len(examples),
        skipped=len(records) - len(examples),
        truncated=sum(e.truncated for e in examples),
        sources=sources,
        with_old_logprobs=sum(e.old_logprobs is not None for e in examples),
        steps=len(history),
        seconds=round(time.monotonic() - started, 3),
        history=history,
    )
    (config.out / "training.json").write_text(
        json.dumps({"config": json.loads(config.model_dump_json()), "report": report.model_dump()}, indent=1)
    )
    return report


def _backward(
    batches: list[Batch], model: Any, reference: Any, config: TrainConfig, step_tokens: int
) -> tuple[float, float, float, float]:
    """One optimizer step's gradients, accumulated over its micro-batches (the loss normalised by the
    step's tokens); its loss, and the ratio, clipped-token and KL sums."""
    loss_sum = ratio_sum = clipped = kl_sum = 0.0
    for batch in batches:
        logprobs = batch.logprobs(model)
        old = torch.where(batch.has_old, batch.old, logprobs.detach())
        ref = _reference_logprobs(batch, model, reference, config) if config.kl_coef else None
        parts = policy_loss(
            logprobs,
            old,
            batch.advantages,
            batch.mask,
            eps_low=config.clip_eps,
            eps_high=config.clip_eps_high or config.clip_eps,
            total_tokens=step_tokens,
            ref_logprobs=ref,
            kl_coef=config.kl_coef,
        )
        parts.loss.backward()
        loss_sum += float(parts.loss.detach())
        ratio_sum += parts.ratio_sum
        clipped += parts.clipped
        kl_sum += parts.kl_sum
    return loss_sum, ratio_sum, clipped, kl_sum


def _with_reward_switch(
    records: list[TrainRecord], encoded: list[Example | None], config: TrainConfig
) -> list[Example | None]:
    """WebLoop's reward switch: each Critic turn carries its advantage from D alone (before the switch)
    and from D + H (after), both normalised over its group's Critic turns; other turns keep theirs."""
    before, after = critic_advantages(records, "d"), critic_advantages(records, "dh")
    if not before:
        raise TrainDataError(
            f"{config.data}: --critic-reward-switch needs a webloop export (Critic turns with d and h); "
            "this file has none"
        )
    return [
        replace(example, switched=(before[i], after[i])) if example is not None and i in before else example
        for i, example in enumerate(encoded)
    ]


def _reference_logprobs(batch: Batch, model: Any, reference: Any, config: TrainConfig) -> torch.Tensor:
    """Logprobs under the reference: the frozen copy, or the LoRA model with its adapter off."""
    context: AbstractContextManager[Any] = model.disable_adapter() if config.lora else nullcontext()
    with torch.no_grad(), context:
        return batch.logprobs(reference if reference is not None else model)


def save(model: Any, tokenizer: Any, config: TrainConfig) -> None:
    """A directory AutoModelForCausalLM and AutoTokenizer load (LoRA weights merged in)."""
    config.out.mkdir(parents=True, exist_ok=True)
    if config.lora:
        model = model.merge_and_unload()
    model.save_pretrained(config.out)
    tokenizer.save_pretrained(config.out)
