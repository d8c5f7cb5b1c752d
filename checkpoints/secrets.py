"""No API key in a checkpoint's metadata.

LangGraph's server copies a run's context, the API keys typed into Studio's settings form included,
into the metadata of every checkpoint it saves (and LangGraph copies the plain values of a run's
``configurable`` there too). The savers drop every entry named ``*api_key`` first, at any depth,
and hide the password of any URL there (``https://user:key@gateway/v1``, a key some gateways take).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata


def is_secret_name(name: object) -> bool:
    """Whether a settings entry of this name holds an API key (``api_key``, ``fallback_api_key``, ...)."""
    return isinstance(name, str) and name.lower().endswith("api_key")


def without_secrets(value: Any) -> Any:
    """``value`` with every mapping entry that holds an API key left out and every URL's password
    hidden, at any depth."""
    if isinstance(value, Mapping):
        return {key: without_secrets(item) for key, item in value.items() if not is_secret_name(key)}
    if isinstance(value, (list, tuple)):
        return [without_secrets(item) for item in value]
    if isinstance(value, str) and "@" in value and "://" in value:
        return _password_hidden(value)
    return value


def _password_hidden(url: str) -> str:
    """``url`` with the password of its user part replaced by ``***`` (unchanged without one)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    if not password:
        return url
    user, _, host = parts.netloc.rpartition("@")
    name = user.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{name}:***@{host}"))


class KeepsNoSecrets:
    """Mixin for a LangGraph checkpointer: no API key reaches a saved checkpoint's metadata."""

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        # The saver merges the config's metadata and plain configurable values into the metadata.
        clean_config = cast(
            RunnableConfig,
            {
                **config,
                "configurable": without_secrets(config.get("configurable") or {}),
                "metadata": without_secrets(config.get("metadata") or {}),
            },
        )
        clean_metadata = cast(CheckpointMetadata, without_secrets(metadata))
        return await super().aput(clean_config, checkpoint, clean_metadata, new_versions)  # type: ignore[misc]
