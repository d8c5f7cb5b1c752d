"""Chat-template rendering shared by ``export --text`` and the trainer (transformers imported lazily).

The split follows TRL's ``apply_chat_template`` for prompt-completion records, so a record rendered
here equals what TRL renders: the prompt with the generation prompt, and as completion what the
template adds after it, from the longest prefix the two renderings share.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class ChatTemplateError(ValueError):
    """A tokenizer or chat template that cannot render the records; the message is for the user."""


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    """A tokenizer from a local Hugging Face directory (nothing is downloaded)."""
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise ChatTemplateError("this needs transformers: install the train extra of webgen-agent") from exc
    path = Path(path)
    if not path.is_dir():
        raise ChatTemplateError(f"{path}: no such directory (a local Hugging Face model or tokenizer directory)")
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ChatTemplateError(f"{path}: no tokenizer ({str(exc).splitlines()[0]})") from exc
    return tokenizer


def split_rendering(
    tokenizer: PreTrainedTokenizerBase, prompt: list[dict[str, Any]], completion: list[dict[str, Any]]
) -> tuple[str, str]:
    """(prompt text ending with the generation prompt, completion text) as the chat template renders them."""
    if not tokenizer.chat_template:
        raise ChatTemplateError(
            f"the tokenizer {tokenizer.name_or_path!r} has no chat template: use one that has, "
            "or train on a --text export rendered with a tokenizer that has one"
        )
    try:
        prompt_text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        full = tokenizer.apply_chat_template(prompt + completion, tokenize=False)
    except Exception as exc:  # a template is the user's code: any error it raises is theirs to fix
        raise ChatTemplateError(f"the chat template failed: {exc.__class__.__name__}: {exc}") from exc
    if not isinstance(prompt_text, str) or not isinstance(full, str):
        raise ChatTemplateError("the chat template did not render text")
    shared = len(os.path.commonprefix([prompt_text, full]))
    return prompt_text[:shared], full[shared:]


class ChatTemplateRender:
    """``export --text``: records rendered with one tokenizer's chat template."""

    def __init__(self, tokenizer_path: str | Path) -> None:
        self.tokenizer = load_tokenizer(tokenizer_path)
        if not self.tokenizer.chat_template:
            raise ChatTemplateError(f"{tokenizer_path}: the tokenizer has no chat template")

    def __call__(self, prompt: list[dict[str, Any]], completion: list[dict[str, Any]]) -> tuple[str, str]:
        return split_rendering(self.tokenizer, prompt, completion)
