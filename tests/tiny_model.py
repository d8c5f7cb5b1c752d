"""A real OpenAI-compatible server for tests: ``transformers serve`` with a tiny random-weight model.

The server and the model builder run in a virtualenv of their own (``.venv-realserver``, made by
scripts/setup.sh --test, or ``WEBGEN_REALSERVER_VENV``): transformers' serving extra pins click,
huggingface-hub and opentelemetry versions that browser-use's exact pins exclude, so the two cannot
share the project's environment. This module runs there as a script (``python tiny_model.py DIR``
builds the model; only the standard library is imported at the top).

The model is built here, offline: a byte-level BPE tokenizer trained in milliseconds on a few
sentences (``tokenizers``), a chat template that keeps the text parts of a message, and a one-layer
Llama with random weights. It answers nonsense bytes, never valid JSON, and ignores
``response_format``: the behaviour of a badly matched local model.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for p in m['content'] %}{% if p['type'] == 'text' %}{{ p['text'] }}{% endif %}{% endfor %}"
    "{% endif %}</s>\n{% endfor %}{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)
CORPUS = [
    "Build a website with a list of tasks, a button to add one and a count of tasks.",
    '{"score": 4, "description": "A page.", "suggestions": ["More colour."]}',
    '<boltArtifact id="site"><boltAction type="file" filePath="index.html"><h1>Hi</h1></boltAction></boltArtifact>',
]
MAX_NEW_TOKENS = 24  # every answer is short: the server's default (1024 tokens) takes ~20 s on a CPU


def server_venv() -> Path:
    return Path(os.environ.get("WEBGEN_REALSERVER_VENV") or Path(__file__).resolve().parent.parent / ".venv-realserver")


def missing() -> str | None:
    """Why the real-server tests cannot run here, or None."""
    venv = server_venv()
    if not (venv / "bin" / "transformers").exists():
        return f"no transformers serve in {venv} (bash scripts/setup.sh --test makes it; or set WEBGEN_REALSERVER_VENV)"
    return None


def build_in_server_venv(folder: Path) -> Path:
    """Build the tiny model with the server's own Python (torch, transformers and tokenizers live there)."""
    python = server_venv() / "bin" / "python"
    done = subprocess.run(
        [str(python), __file__, str(folder)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    if done.returncode != 0:
        raise RuntimeError(f"building the tiny model failed:\n{done.stderr[-3000:]}")
    return folder


def build_tiny_model(folder: Path) -> Path:
    """Save a random-weight tiny Llama with a freshly trained tokenizer and chat template to ``folder``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(CORPUS * 20, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        max_new_tokens=MAX_NEW_TOKENS,
        do_sample=True,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    model.save_pretrained(folder)
    return folder


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TransformersServer:
    """``transformers serve`` pinned to one local model folder, in a process group of its own."""

    def __init__(self, model_dir: Path, log: Path) -> None:
        self.model_dir = model_dir
        self.log = log
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        return str(self.model_dir)  # the server is pinned: requests must name this exact path

    def __enter__(self) -> TransformersServer:
        import httpx  # the test side only (the server's virtualenv runs this file as a script)

        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
        cli = str(server_venv() / "bin" / "transformers")
        command = [
            cli,
            "serve",
            str(self.model_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--device",
            "cpu",
            "--log-level",
            "warning",
        ]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"transformers serve exited:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"transformers serve did not answer in 180 s:\n{self.log.read_text()[-3000:]}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


if __name__ == "__main__":
    build_tiny_model(Path(sys.argv[1]))
