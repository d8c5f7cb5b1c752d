"""A tiny causal LM built in the test, nothing downloaded: random weights from a config and a byte-level
BPE tokenizer trained on the given texts, with a ChatML-style chat template; saved as a Hugging Face
directory that AutoModelForCausalLM and AutoTokenizer load."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def train_tokenizer(texts: Iterable[str], *, vocab_size: int = 400) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|im_start|>", "<|im_end|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(texts), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|pad|>", chat_template=CHAT_TEMPLATE
    )


def tiny_causal_lm(
    directory: Path, texts: Iterable[str], *, seed: int = 0, hidden: int = 64, layers: int = 2, positions: int = 1024
) -> Path:
    """Save a random Llama (2 layers of width 64 unless told) and a tokenizer trained on ``texts`` to
    ``directory`` (benchmarks/train_throughput.py makes a larger one)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = train_tokenizer(texts)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=max(4, hidden // 64),
        num_key_value_heads=max(4, hidden // 64),
        max_position_embeddings=positions,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    LlamaForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
