"""``webgen-agent train``: the reference offline Step-GRPO trainer on a step-grpo export."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from webgen_agent.apps.cli.base import CommandApp, console, fail
from webgen_agent.apps.cli.out_paths import check_out_folder

app = CommandApp()


@app.command()
def train(
    data: Annotated[Path, typer.Option(help="A step-grpo or webloop export: JSON lines, or parquet (.parquet).")],
    model: Annotated[Path, typer.Option(help="Local Hugging Face directory of a causal LM and its tokenizer.")],
    out: Annotated[Path, typer.Option(help="Directory for the trained model, tokenizer and training.json.")],
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the data.")] = 1,
    batch_size: Annotated[int, typer.Option(min=1, help="Sequences per forward pass.")] = 4,
    grad_accum: Annotated[int, typer.Option(min=1, help="Forward passes per optimizer step.")] = 1,
    lr: Annotated[float, typer.Option(min=0, help="AdamW learning rate.")] = 1e-6,
    max_length: Annotated[int, typer.Option(min=2, help="Tokens per sequence (prompt start cut first).")] = 8192,
    clip_eps: Annotated[float, typer.Option(min=0, help="PPO clip range: ratios kept in [1 - eps, 1 + eps].")] = 0.2,
    clip_eps_high: Annotated[float | None, typer.Option(min=0, help="Upper clip range (default: --clip-eps).")] = None,
    kl_coef: Annotated[float, typer.Option(min=0, help="Weight of the KL term to the reference model.")] = 0.0,
    ref_model: Annotated[Path | None, typer.Option(help="Reference model for the KL term (default: --model).")] = None,
    lora: Annotated[
        bool, typer.Option(help="Train LoRA adapters on every linear layer (peft), merged on save.")
    ] = False,
    lora_r: Annotated[int, typer.Option(min=1, help="LoRA rank.")] = 16,
    lora_alpha: Annotated[int, typer.Option(min=1, help="LoRA alpha.")] = 32,
    lora_dropout: Annotated[float, typer.Option(min=0, max=0.99, help="LoRA dropout.")] = 0.05,
    gradient_checkpointing: Annotated[bool, typer.Option(help="Recompute activations (less memory).")] = False,
    dtype: Annotated[
        Literal["auto", "float32", "bfloat16", "float16"],
        typer.Option(help="auto: bfloat16 on a GPU that has it, else float32."),
    ] = "auto",
    device: Annotated[str, typer.Option(help="auto, cpu, cuda, cuda:1 ...")] = "auto",
    seed: Annotated[int, typer.Option(help="Shuffling and initialisation seed.")] = 0,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Stop after this many optimizer steps.")] = None,
    critic_reward_switch: Annotated[
        int | None,
        typer.Option(
            min=0,
            metavar="STEPS",
            help="webloop exports: the Critic learns from D alone for STEPS optimizer steps, then from D + H "
            "(WebLoop's reward switch, about 15 updates in the paper).",
        ),
    ] = None,
    allow_no_signal: Annotated[
        bool, typer.Option(help="Train even when every advantage is 0 (refused by default: nothing to learn).")
    ] = False,
) -> None:
    """Train MODEL on a step-grpo or webloop export (PPO clip against exported logprobs, else advantage-weighted)."""
    # The paths first: a typo is answered before torch and transformers load (seconds).
    if not data.is_file():
        fail(f"{data}: no such file (--data: a step-grpo or webloop export)")
    if not model.is_dir():
        fail(f"{model}: no such directory (--model: a local Hugging Face model directory)")
    if ref_model is not None and not ref_model.is_dir():
        fail(f"{ref_model}: no such directory (--ref-model: a local Hugging Face model directory)")
    check_out_folder(out)
    try:
        from webgen_agent.apps.train.chat import ChatTemplateError
        from webgen_agent.apps.train.data import TrainDataError
        from webgen_agent.apps.train.trainer import TrainConfig
        from webgen_agent.apps.train.trainer import train as run_training
    except ImportError as exc:
        fail(f"training needs the train extra of webgen-agent (torch, transformers, peft): {exc}")
    config = TrainConfig(
        data=data,
        model=model,
        out=out,
        epochs=epochs,
        batch_size=batch_size,
        grad_accum=grad_accum,
        lr=lr,
        max_length=max_length,
        clip_eps=clip_eps,
        clip_eps_high=clip_eps_high,
        kl_coef=kl_coef,
        ref_model=ref_model,
        lora=lora,
        lora_r=lora_r,
        lora_alpha=lora_alpha,
        lora_dropout=lora_dropout,
        gradient_checkpointing=gradient_checkpointing,
        dtype=dtype,
        device=device,
        seed=seed,
        max_steps=max_steps,
        critic_reward_switch=critic_reward_switch,
        allow_no_signal=allow_no_signal,
    )
    try:
        report = run_training(config)
    except (TrainDataError, ChatTemplateError) as exc:
        fail(str(exc))
    last = report.history[-1]
    console.print(
        f"trained {report.steps} steps on {report.examples} sequences ({report.with_old_logprobs} with exported "
        f"logprobs, {report.truncated} truncated, {report.skipped} skipped) in {report.seconds:.1f}s; "
        f"last loss {last.loss:+.4f}, mean ratio {last.mean_ratio:.3f}, clip fraction {last.clip_fraction:.3f}; "
        f"saved to {report.out}"
    )
