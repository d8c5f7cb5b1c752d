"""Recorded GUI tests: a passing GUI-agent run turned into a deterministic test, replayed with no model.

- ``views``: ``Target`` (a Playwright locator), ``ReplayStep``, ``RecordedTest``, ``ReplayVerdict``.
- ``record``: the GUI agent's successful actions as a step list, checked and given assertions on a
  real page (``record_test``).
- ``runner``: replays a test in Python Playwright (``replay_tests``, with one retry: flaky).
- ``spec``: the same step list as a ``@playwright/test`` spec (``spec_js``) and its config.
"""

from __future__ import annotations

from webgen_agent.tools.replay.views import RecordedTest, ReplayStep, ReplayVerdict, Target

__all__ = ["RecordedTest", "ReplayStep", "ReplayVerdict", "Target"]
