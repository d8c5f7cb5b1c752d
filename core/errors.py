"""Errors every layer raises, free of pydantic: modules the command line imports when it starts
(the run database, the runs table) raise them without importing the settings models."""

from __future__ import annotations


class ConfigError(ValueError):
    """A setting is missing or wrong; the message is one line meant for the user."""


class DatabaseUnavailable(RuntimeError):
    """The run database stayed unreachable for the whole patience; the run stops resumable. One line."""
