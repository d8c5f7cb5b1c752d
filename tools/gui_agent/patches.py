"""Every adjustment this project makes to browser-use, in one place, for one browser-use version.

browser-use has no settings for these, so they touch its environment, its import, or private
names of it (and of bubus, which it pins). Each is applied only when the GUI agent is used
(``import_browser_use``), never when this package is imported, and each first checks that the
installed browser-use is the one they were written for (``PINNED_BROWSER_USE``, as pinned in
pyproject.toml): another version gets a clear error instead of a patch that may no longer fit.

- Environment, before the import: no telemetry, cloud sync, version check or log handlers, and a
  config folder of our own.
- After the import: long-lived objects frozen out of the collector (``gc.freeze``); the
  downloads folder it makes at import removed at exit.
- bubus's one event lock per process made one lock per run (``own_event_lock``).
- A click waits ``CLICK_DOWNLOAD_WAIT_S`` for a download to start, not 0.5 s.
- Its config folders made once, at import, not on every config read (``_make_config_dirs_once``).
- Per agent's actions, when asked: WebVoyager's typing, clicking and scrolling
  (``tools/gui_agent/webvoyager_actions.py``).
- Per agent, when asked (``configure_agent``): the latest screenshots kept in each request
  (``_keep_recent_screenshots``), a prompt of our own added to the last step
  (``_add_last_step_prompt``), and WebVoyager's messages only: no step-budget warning
  (``_no_budget_warning``), and no page shown at the last step or after a failed one
  (``_keep_recent_screenshots``).
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import functools
import gc
import importlib
import importlib.metadata
import inspect
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

PINNED_BROWSER_USE = "0.13.14"

# Set before browser_use is imported: no telemetry, cloud sync, version check or log handlers.
BROWSER_USE_ENV = {
    "ANONYMIZED_TELEMETRY": "false",
    "BROWSER_USE_CLOUD_SYNC": "false",
    "BROWSER_USE_VERSION_CHECK": "false",
    "BROWSER_USE_SETUP_LOGGING": "false",
}
# Agent() imports the Anthropic client lazily (~1.8 s): it belongs to the warm-up too.
BROWSER_USE_MODULES = (
    "browser_use",
    "browser_use.tools.service",
    "browser_use.llm.openai.chat",
    "browser_use.llm.anthropic.chat",
)
# How long a click waits for a file download it may have started (browser-use: 0.5 s on every click).
CLICK_DOWNLOAD_WAIT_S = 0.05


class UnsupportedBrowserUse(RuntimeError):
    """The installed browser-use is not the version the GUI agent's patches were written for."""


def check_browser_use_version(installed: str | None = None) -> None:
    """Raise ``UnsupportedBrowserUse`` unless browser-use ``PINNED_BROWSER_USE`` is installed."""
    installed = installed or _installed_browser_use()
    if installed != PINNED_BROWSER_USE:
        raise UnsupportedBrowserUse(
            f"browser-use {installed} is installed, but the GUI agent supports only browser-use "
            f"{PINNED_BROWSER_USE} (pip install browser-use=={PINNED_BROWSER_USE})"
        )


@functools.cache
def _installed_browser_use() -> str:
    try:
        return importlib.metadata.version("browser-use")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def configure_browser_use_env() -> None:
    """Switch off browser-use's network extras and stdout logging; idempotent, before its import."""
    os.environ.update(BROWSER_USE_ENV)
    # Not ~/.config/browseruse: nothing in the user's home. One fixed folder per user, reused by
    # every process, so that runs (and killed runs) do not leave a folder each.
    uid = os.getuid() if hasattr(os, "getuid") else 0
    os.environ.setdefault("BROWSER_USE_CONFIG_DIR", str(Path(tempfile.gettempdir()) / f"webgen-browser-use-{uid}"))
    for name in ("browser_use", "bubus", "cdp_use"):
        logging.getLogger(name).setLevel(logging.WARNING)


# The warm-up thread and a GUI test may import at the same time; functools.cache does not keep two
# threads out of the body, and a patch applied twice would wrap its own wrapper.
_IMPORT_LOCK = threading.Lock()


@functools.cache
def import_browser_use() -> None:
    """Import browser-use (about 3 s, once per process) with every patch applied.

    Afterwards long-lived objects are hidden from the collector: browser-use's ``Agent.close()``
    runs a full ``gc.collect()`` after every run, ~0.25 s of CPU with this project's libraries loaded
    (~300k objects). ``gc.freeze()`` moves everything alive now (modules, classes, schemas) out of
    the collector's sight, and that collection takes a few ms.
    """
    with _IMPORT_LOCK:
        _import_browser_use()


def _import_browser_use() -> None:
    check_browser_use_version()
    configure_browser_use_env()
    for name in BROWSER_USE_MODULES:
        importlib.import_module(name)
    _scope_event_lock_per_run()
    _shorten_click_download_wait()
    _forget_import_time_downloads_dir()
    _make_config_dirs_once()
    _keep_recent_screenshots()
    _add_last_step_prompt()
    _no_budget_warning()
    gc.collect()
    gc.freeze()


# The event lock of the browser-use run in the current task (see own_event_lock).
_RUN_EVENT_LOCK: contextvars.ContextVar[Any] = contextvars.ContextVar("webgen_browser_use_event_lock", default=None)


def own_event_lock(lock: Any = None) -> Any:
    """Give the current task (and the tasks it starts) an event lock of its own (or ``lock``)."""
    import_browser_use()
    from bubus.service import ReentrantLock

    lock = lock or ReentrantLock()
    _RUN_EVENT_LOCK.set(lock)
    return lock


@functools.cache
def _scope_event_lock_per_run() -> None:
    """Give each browser-use run its own event lock instead of bubus's one lock per process.

    browser-use drives the browser through bubus event buses, and bubus processes the events of
    *every* bus in the process under one global lock. Its purpose (handlers of one agent and its
    browser session run in order) holds within a run; across concurrent runs it only serialises
    unrelated agents, so four GUI tests at once took as long as four in a row. bubus has no setting
    for this, so its lock getter is replaced by one that returns the lock of the current run
    (a context variable set by ``own_event_lock``), or the global one outside a run.
    """
    check_browser_use_version()
    from bubus import service

    global_lock = getattr(service, "_get_global_lock", None)
    if global_lock is None or not hasattr(service, "ReentrantLock"):
        raise UnsupportedBrowserUse("bubus has no _get_global_lock or ReentrantLock: the event lock cannot be scoped")

    def lock_of_this_run() -> Any:
        return _RUN_EVENT_LOCK.get() or global_lock()

    service._get_global_lock = lock_of_this_run


@functools.cache
def _shorten_click_download_wait() -> None:
    """Let a click wait ``CLICK_DOWNLOAD_WAIT_S`` for a download to start, not browser-use's 0.5 s.

    browser-use waits after *every* click in case it started a download, half a second per click
    on a site under test that never downloads anything (the agent has no file actions here). The
    wait is a default argument browser-use never overrides and exposes no setting for, so the
    method is wrapped to pass a shorter one; a download that does start is still followed.
    """
    check_browser_use_version()
    from browser_use.browser.watchdogs.default_action_watchdog import DefaultActionWatchdog

    original = getattr(DefaultActionWatchdog, "_execute_click_with_download_detection", None)
    if original is None or "download_start_timeout" not in inspect.signature(original).parameters:
        raise UnsupportedBrowserUse("browser-use's click takes no download_start_timeout: its wait cannot be shortened")

    async def click(self: Any, click_coro: Any, *args: Any, **kwargs: Any) -> Any:
        if not args:
            kwargs.setdefault("download_start_timeout", CLICK_DOWNLOAD_WAIT_S)
        return await original(self, click_coro, *args, **kwargs)

    DefaultActionWatchdog._execute_click_with_download_detection = click  # type: ignore[method-assign]


@functools.cache
def _forget_import_time_downloads_dir() -> None:
    """browser-use makes an (unused) downloads folder in /tmp when imported; remove it at exit if empty."""
    check_browser_use_version()
    from browser_use.browser.session import DEFAULT_BROWSER_PROFILE

    path = DEFAULT_BROWSER_PROFILE.downloads_path
    if path is not None:
        atexit.register(_rmdir_if_empty, Path(path))


@functools.cache
def _make_config_dirs_once() -> None:
    """Make browser-use's config folders now (on the importing thread) and never again.

    browser-use means to create them once per process (``OldConfig._dirs_created``), but its
    ``CONFIG`` proxy builds a fresh config object on every attribute read, so each read of a profile
    path (every ``BrowserProfile`` validation, on the event loop, several per GUI test) calls
    ``mkdir`` three times: blocking calls that LangGraph's server rejects. The folders only matter
    for the default profile and extensions, which the GUI agent never uses (it passes its own).
    """
    check_browser_use_version()
    from browser_use import config

    old_config = getattr(config, "OldConfig", None)
    if old_config is None or not hasattr(old_config, "_dirs_created") or not hasattr(old_config, "_ensure_dirs"):
        raise UnsupportedBrowserUse(
            "browser-use's config has no OldConfig._ensure_dirs: its folders cannot be made once"
        )
    old_config()._ensure_dirs()
    old_config._dirs_created = True  # every config object made from now on finds them made


def _rmdir_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.rmdir()


# Screenshots of earlier steps for the request being built (see _keep_recent_screenshots), and why
# it shows no current page ("": it shows it).
_EARLIER_SCREENSHOTS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "webgen_browser_use_earlier_screenshots", default=()
)
_PAGE_HIDDEN: contextvars.ContextVar[str] = contextvars.ContextVar("webgen_browser_use_page_hidden", default="")
# What the request's browser state says instead of the page, where the page is not shown: WebVoyager
# shows none at its last iteration, nor after a failed one (only its error then).
PAGE_NOT_SHOWN = "The page is not shown at this step: the maximum number of interactions has been reached."
PAGE_NOT_SHOWN_AFTER_FAILURE = "The page is not shown at this step: the last step failed (its error is in the history)."
# Attributes this project sets on a browser-use agent and its message manager (configure_agent).
_KEPT_ATTRIBUTE = "webgen_screenshots_kept"
_SEEN_ATTRIBUTE = "webgen_screenshots_seen"
_LAST_STEP_ATTRIBUTE = "webgen_last_step_prompt"
_WEBVOYAGER_ATTRIBUTE = "webgen_webvoyager_messages"


def configure_agent(
    agent: Any, *, screenshots_kept: int = 1, last_step_prompt: str = "", webvoyager_messages: bool = False
) -> None:
    """Ask one agent for the latest ``screenshots_kept`` screenshots in each request, for
    ``last_step_prompt`` on its last step (where browser-use offers only ``done``), and, with
    ``webvoyager_messages``, for WebVoyager's messages only: no budget warning, no page at the last
    step or after a failed one (browser-use's loop nudges are its own setting, ``loop_detection_enabled``)."""
    import_browser_use()
    setattr(agent._message_manager, _KEPT_ATTRIBUTE, screenshots_kept)
    setattr(agent._message_manager, _SEEN_ATTRIBUTE, [])
    setattr(agent._message_manager, _WEBVOYAGER_ATTRIBUTE, webvoyager_messages)
    setattr(agent, _LAST_STEP_ATTRIBUTE, last_step_prompt)
    setattr(agent, _WEBVOYAGER_ATTRIBUTE, webvoyager_messages)


@functools.cache
def _keep_recent_screenshots() -> None:
    """Let a request carry the screenshots of the latest steps, not only the current one.

    browser-use's request prompt can show several screenshots ("Previous screenshot:", then
    "Current screenshot:"), but its message manager passes it only the current one and has no
    setting for more. Its state-message builder is wrapped: for an agent that asked
    (``configure_agent``) the screenshots it saw at its latest steps are handed to the prompt
    before the current one, through a context variable read by a subclass of the prompt.
    """
    check_browser_use_version()
    from browser_use.agent.message_manager import service
    from browser_use.agent.prompts import AgentMessagePrompt
    from browser_use.llm.messages import ContentPartTextParam

    original = getattr(service.MessageManager, "create_state_messages", None)
    if original is None or "screenshots" not in inspect.signature(AgentMessagePrompt.__init__).parameters:
        raise UnsupportedBrowserUse("browser-use's state message takes no screenshots: earlier ones cannot be kept")

    class PromptWithEarlierScreenshots(AgentMessagePrompt):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if kwargs.get("screenshots"):
                current = [] if _PAGE_HIDDEN.get() else kwargs["screenshots"]
                kwargs["screenshots"] = [*_EARLIER_SCREENSHOTS.get(), *current]
            super().__init__(*args, **kwargs)

        def _get_browser_state_description(self) -> str:
            return _PAGE_HIDDEN.get() or super()._get_browser_state_description()

        def get_user_message(self, use_vision: bool = True) -> Any:
            message = super().get_user_message(use_vision)
            if _PAGE_HIDDEN.get() and isinstance(message.content, list):  # every screenshot is an earlier one
                for part in message.content:
                    if isinstance(part, ContentPartTextParam) and part.text == "Current screenshot:":
                        part.text = "Previous screenshot:"
            return message

    @functools.wraps(original)
    def create_state_messages(self: Any, browser_state_summary: Any, *args: Any, **kwargs: Any) -> Any:
        kept = getattr(self, _KEPT_ATTRIBUTE, 1)
        seen: list[str] = getattr(self, _SEEN_ATTRIBUTE, [])
        hidden = _page_not_shown(self, kwargs.get("step_info"), kwargs.get("result"))
        # The latest kept - 1 beside the current page; where it is not shown, the latest kept.
        earlier = seen[-kept:] if hidden else seen[len(seen) - kept + 1 :] if kept > 1 else []
        tokens = _EARLIER_SCREENSHOTS.set(tuple(earlier)), _PAGE_HIDDEN.set(hidden)
        try:
            return original(self, browser_state_summary, *args, **kwargs)
        finally:
            _EARLIER_SCREENSHOTS.reset(tokens[0])
            _PAGE_HIDDEN.reset(tokens[1])
            if browser_state_summary.screenshot and not hidden:  # a page not shown was not seen
                seen.append(browser_state_summary.screenshot)
                del seen[:-kept]

    service.AgentMessagePrompt = PromptWithEarlierScreenshots  # type: ignore[misc]
    service.MessageManager.create_state_messages = create_state_messages  # type: ignore[method-assign]


def _page_not_shown(manager: Any, step_info: Any, result: Any) -> str:
    """Why this step's request shows no page ("" when it shows it): only for an agent asked for
    WebVoyager's messages (A webvoyager/run.py 545-595), at its last step, or after a failed step (an
    unreadable answer, an action that failed), where WebVoyager sends the error alone."""
    if not getattr(manager, _WEBVOYAGER_ATTRIBUTE, False):
        return ""
    if step_info is not None and step_info.is_last_step():
        return PAGE_NOT_SHOWN
    if result and any(getattr(r, "error", None) for r in result):
        return PAGE_NOT_SHOWN_AFTER_FAILURE
    return ""


@functools.cache
def _add_last_step_prompt() -> None:
    """Add an agent's own prompt to its last step, after browser-use's last-step message.

    browser-use's last step offers only ``done`` and asks for a summary of what was found; a test
    harness needs the answer in its own terms (e.g. YES / PARTIAL / NO against the expected
    result). There is no setting for that message, so the method that adds it is wrapped.
    """
    check_browser_use_version()
    from browser_use.agent.service import Agent
    from browser_use.llm.messages import UserMessage

    original = getattr(Agent, "_force_done_after_last_step", None)
    if original is None:
        raise UnsupportedBrowserUse("browser-use has no _force_done_after_last_step: the last step cannot be added to")

    @functools.wraps(original)
    async def force_done_after_last_step(self: Any, step_info: Any = None) -> None:
        await original(self, step_info)
        prompt = getattr(self, _LAST_STEP_ATTRIBUTE, "")
        if prompt and step_info is not None and step_info.is_last_step():
            self._message_manager._add_context_message(UserMessage(content=prompt))

    Agent._force_done_after_last_step = force_done_after_last_step  # type: ignore[method-assign]


@functools.cache
def _no_budget_warning() -> None:
    """No step-budget warning for an agent asked for WebVoyager's messages only (``configure_agent``).

    browser-use adds a warning to each step once 75 % of its steps are used; WebVoyager's loop says
    nothing until its last iteration's limit prompt. The method that adds it is wrapped. (The pages
    not shown are the state-message builder's part: ``_keep_recent_screenshots``.)
    """
    check_browser_use_version()
    from browser_use.agent.service import Agent

    original = getattr(Agent, "_inject_budget_warning", None)
    if original is None:
        raise UnsupportedBrowserUse("browser-use has no _inject_budget_warning: its budget warning cannot be left out")

    @functools.wraps(original)
    async def inject_budget_warning(self: Any, step_info: Any = None) -> None:
        if not getattr(self, _WEBVOYAGER_ATTRIBUTE, False):
            await original(self, step_info)

    Agent._inject_budget_warning = inject_budget_warning  # type: ignore[method-assign]
