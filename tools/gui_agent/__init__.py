"""The GUI agent: browser-use drives a real Chromium through a site under test.

- ``views``: ``GuiAgentSettings`` (how a run goes), ``GuiAction`` and ``GuiRun`` (what it did).
- ``patches``: every adjustment to browser-use, applied when it is first imported, for one version.
- ``session``: browser-use's session, able to read its page ahead of its agent's first step.
- ``service``: the harness (``run_gui_agent``, ``open_gui_session``).

Importing this package imports neither browser-use nor the browser tools and sets no environment
variables: ``service`` is loaded on first use of its names, browser-use on the first session or run.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from webgen_agent.tools.gui_agent.patches import (
    BROWSER_USE_ENV,
    BROWSER_USE_MODULES,
    CLICK_DOWNLOAD_WAIT_S,
    PINNED_BROWSER_USE,
    UnsupportedBrowserUse,
    check_browser_use_version,
    configure_browser_use_env,
    import_browser_use,
)
from webgen_agent.tools.gui_agent.views import (
    MAX_ACTIONS_PER_STEP,
    Answer,
    ElementLocator,
    GuiAction,
    GuiAgentSettings,
    GuiFrame,
    GuiRun,
    StoppedReason,
    leading_answer,
)

if TYPE_CHECKING:
    from webgen_agent.tools.gui_agent.service import GuiSession, open_gui_session, run_gui_agent

_SERVICE_NAMES = ("GuiSession", "open_gui_session", "run_gui_agent")

__all__ = [
    "Answer",
    "BROWSER_USE_ENV",
    "BROWSER_USE_MODULES",
    "CLICK_DOWNLOAD_WAIT_S",
    "ElementLocator",
    "MAX_ACTIONS_PER_STEP",
    "PINNED_BROWSER_USE",
    "GuiAction",
    "GuiAgentSettings",
    "GuiFrame",
    "GuiRun",
    "GuiSession",
    "StoppedReason",
    "UnsupportedBrowserUse",
    "check_browser_use_version",
    "configure_browser_use_env",
    "import_browser_use",
    "leading_answer",
    "open_gui_session",
    "run_gui_agent",
]


def __getattr__(name: str) -> Any:
    # The harness imports the browser tools (playwright, websockets) and the model clients: only
    # when it is used, so that reading GUI runs (reports, exports) stays light.
    if name in _SERVICE_NAMES:
        return getattr(importlib.import_module("webgen_agent.tools.gui_agent.service"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
