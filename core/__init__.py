"""Shared types: graph state, run settings, step records, events, model-answer types."""
