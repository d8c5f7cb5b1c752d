"""How fast the reference trainer (``webgen-agent train``) trains, and that it learns, on this machine's
device: CUDA when there is one (bf16, the trainer's ``auto``), else the CPU.

A random Llama (sized to the device) and a step-grpo file of positive (a web page) and negative (a
refusal) completions; one full fine-tune and one LoRA run through the trainer's own ``train()``.
Figures: optimizer steps and completion tokens per second, peak device memory, and how the mean
completion logprob of the positive and of the negative records moved (the trainer must raise the
first and lower the second). No loss figure: with no exported logprobs every ratio is 1, so the
clipped surrogate's value is fixed by the advantages and token counts; only its gradient moves. Run: .venv/bin/python -m benchmarks.train_throughput
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import run_main, sized

SYSTEM = "You write a complete web page for the requirement."
REQUIREMENT = "A page for a bakery: opening hours, a menu with prices and a contact form."
PAGE = (
    "<!doctype html><html><head><title>Bakery</title><style>body{font-family:sans-serif;margin:2rem}"
    "table{border-collapse:collapse}td{padding:.3rem}</style></head><body><h1>Our bakery</h1>"
    "<h2>Opening hours</h2><p>Monday to Saturday, 7:00 to 18:00.</p><h2>Menu</h2><table>"
    "<tr><td>Sourdough</td><td>4.50</td></tr><tr><td>Croissant</td><td>1.80</td></tr></table>"
    "<h2>Contact</h2><form><input name=email placeholder=Email><button>Send</button></form></body></html>"
)
REFUSAL = "I cannot help with that request. Please ask something else."


def _size(cuda: bool) -> dict[str, int]:
    """Model and data size: what shows throughput on the device without taking minutes."""
    if sized(False, True):
        return {"hidden": 64, "layers": 2, "repeat": 1, "records": 8, "batch": 4, "steps": 2}
    if cuda:  # about 0.2 B parameters, 1-2 k tokens per sequence
        return {"hidden": 1024, "layers": 16, "repeat": 8, "records": 64, "batch": 8, "steps": 16}
    return {"hidden": 128, "layers": 4, "repeat": 2, "records": 32, "batch": 4, "steps": 8}


def _records(count: int, repeat: int) -> list[dict[str, Any]]:
    records = []
    for index in range(count):
        good = index % 2 == 0
        records.append(
            {
                "prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": REQUIREMENT}],
                "completion": [{"role": "assistant", "content": PAGE * repeat if good else REFUSAL * repeat}],
                "advantage": 1.0 if good else -1.0,
            }
        )
    return records


def _mean_logprobs(model_dir: Path, records: list[dict[str, Any]], device: Any) -> tuple[float, float]:
    """Mean completion-token logprob of the positive records, and of the negative ones."""
    import torch

    from webgen_agent.apps.train.chat import load_tokenizer
    from webgen_agent.apps.train.data import TrainRecord
    from webgen_agent.apps.train.encode import encode
    from webgen_agent.apps.train.loss import completion_logprobs
    from webgen_agent.apps.train.trainer import load_model

    tokenizer = load_tokenizer(model_dir)
    model = load_model(model_dir, torch.float32, device).eval()
    sums = {True: [0.0, 0], False: [0.0, 0]}
    with torch.no_grad():
        for record in records[:8]:
            example = encode(TrainRecord.model_validate(record), tokenizer, 4096)
            assert example is not None
            ids = torch.tensor([example.input_ids], device=device)
            logprobs = completion_logprobs(model(input_ids=ids).logits, ids)[0, example.start - 1 :]
            total = sums[record["advantage"] > 0]
            total[0] += float(logprobs.mean())
            total[1] += 1
    return sums[True][0] / sums[True][1], sums[False][0] / sums[False][1]


def _train(model_dir: Path, data: Path, out: Path, size: dict[str, int], *, lora: bool) -> dict[str, float]:
    import torch

    from webgen_agent.apps.train.trainer import TrainConfig, train

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    config = TrainConfig(
        data=data,
        model=model_dir,
        out=out,
        epochs=100,
        max_steps=size["steps"],
        batch_size=size["batch"],
        lr=1e-3 if lora else 3e-4,
        max_length=4096,
        lora=lora,
    )
    started = time.perf_counter()
    report = train(config)
    seconds = time.perf_counter() - started
    tokens = sum(step.tokens for step in report.history)
    return {
        "seconds": seconds,
        "steps_per_s": report.steps / seconds,
        "tokens_per_s": tokens / seconds,
        "tokens": float(tokens),
        "peak_gb": torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0,
    }


async def main() -> dict[str, float]:
    import torch

    from tests.tiny_lm import tiny_causal_lm

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    size = _size(cuda)
    where = torch.cuda.get_device_name(0) if cuda else "CPU"
    print(f"device: {where}; model: hidden {size['hidden']}, {size['layers']} layers", flush=True)
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="train-bench-") as folder:
        base = Path(folder)
        records = _records(size["records"], size["repeat"])
        data = base / "steps.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in records))
        model_dir = tiny_causal_lm(
            base / "model",
            [PAGE, REFUSAL, SYSTEM, REQUIREMENT] * 20,
            hidden=size["hidden"],
            layers=size["layers"],
            positions=8192,
        )
        parameters = sum(p.numel() for p in _load_params(model_dir))
        print(f"parameters: {parameters / 1e6:.1f} M", flush=True)
        before = _mean_logprobs(model_dir, records, device)
        for name, lora in (("full", False), ("lora", True)):
            result = _train(model_dir, data, base / name, size, lora=lora)
            after = _mean_logprobs(base / name, records, device)
            result["positive_gain"] = after[0] - before[0]
            result["negative_gain"] = after[1] - before[1]
            figures.update({f"{name}_{key}": value for key, value in result.items()})
            print(
                f"{name}: {result['steps_per_s']:.2f} steps/s, {result['tokens_per_s']:,.0f} completion tokens/s "
                f"({result['tokens']:,.0f} tokens in {result['seconds']:.1f} s incl. load and save), "
                f"peak {result['peak_gb']:.1f} GiB, "
                f"mean logprob positive {result['positive_gain']:+.3f}, negative {result['negative_gain']:+.3f}",
                flush=True,
            )
    return figures


def _load_params(model_dir: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir).parameters()


if __name__ == "__main__":
    run_main(main)
