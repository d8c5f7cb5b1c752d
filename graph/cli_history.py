"""History, fork: time travel over a run's checkpoints (``webgen-agent history`` / ``fork``)."""

from __future__ import annotations
