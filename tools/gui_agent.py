"""The GUI agent: browser-use drives a real Chromium through the site and answers the test task.

``run_gui_agent`` wraps one browser-use ``Agent`` run with what a test harness needs: an action
budget counted in actions (not steps), a whole-run deadline, no network beyond the site and the
model endpoint, quiet logging, and a structured ``GuiRun`` result whatever happens (dead endpoint,
hanging page, timeout). Only programming errors escape as exceptions.

browser-use is imported lazily, after its environment switches are set, because it reads some of
them at import time (logging setup) and phones home (telemetry, version check) unless told not to.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import contextvars
import functools
import gc
import importlib
import inspect
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field

from webgen_agent.tools.browser import SharedBrowser
from webgen_agent.tools.cdp_scope import ScopedEndpoint, scoped_cdp_endpoint
from webgen_agent.tools.models import HTTP_CLIENT_ERRORS, shared_http_client

if TYPE_CHECKING:
    from browser_use import Agent, BrowserSession

logger = logging.getLogger(__name__)

StoppedReason = Literal["done", "max_actions", "timeout", "error"]

# Set before browser_use is imported: no telemetry, cloud sync, version check or log handlers.
BROWSER_USE_ENV = {
    "ANONYMIZED_TELEMETRY": "false",
    "BROWSER_USE_CLOUD_SYNC": "false",
    "BROWSER_USE_VERSION_CHECK": "false",
    "BROWSER_USE_SETUP_LOGGING": "false",
}
# Actions a site tester has no use for: web search and extraction/file actions call out to the
# internet or to extra LLM calls; PDFs and uploads touch the disk.
EXCLUDED_ACTIONS = [
    "search",
    "extract",
    "upload_file",
    "write_file",
    "replace_file",
    "read_file",
    "save_as_pdf",
    "screenshot",
]
MAX_ACTIONS_PER_STEP = 3
MAX_FAILURES = 3  # consecutive failed steps (model or browser) before browser-use gives up
LLM_RETRIES = 2  # client retries per model call (timeouts, 429, 5xx)
ENDPOINT_FAILURE_LIMIT = 2  # model calls in a row that failed even after retries: stop, the endpoint is down
_TEXT_LIMIT = 300


class GuiAction(BaseModel):
    """One browser action the agent took."""

    step: int = Field(description="Agent step (1-based) the action belongs to.")
    name: str = Field(description="browser-use action name, e.g. click, input, scroll, done.")
    params: dict[str, Any] = Field(default_factory=dict)
    result: str | None = Field(default=None, description="Short result text the agent saw.")
    error: str | None = Field(default=None, description="Short error text, when the action failed.")


class GuiRun(BaseModel):
    """The outcome of one GUI agent run; failures are described here, not raised."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    final_answer: str | None = Field(default=None, description="The agent's done text, if it finished.")
    success: bool | None = Field(default=None, description="The agent's own success flag, if it finished.")
    actions: list[GuiAction] = Field(default_factory=list)
    steps: int = Field(default=0, description="Agent steps taken (model calls that returned or failed).")
    final_screenshot_png: bytes | None = Field(default=None, description="PNG of the page at the end.")
    errors: list[str] = Field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    stopped_reason: StoppedReason = "error"
    prepared: bool = Field(default=False, description="The run used a browser session opened ahead of it.")


def configure_browser_use_env() -> None:
    """Switch off browser-use's network extras and stdout logging; idempotent.

    Run when this module is imported too, so that the switches hold even if something imports
    browser_use before the first GUI run.
    """
    os.environ.update(BROWSER_USE_ENV)
    # Not ~/.config/browseruse: nothing in the user's home. One fixed folder per user, reused by
    # every process, so that runs (and killed runs) do not leave a folder each.
    uid = os.getuid() if hasattr(os, "getuid") else 0
    os.environ.setdefault("BROWSER_USE_CONFIG_DIR", str(Path(tempfile.gettempdir()) / f"webgen-browser-use-{uid}"))
    for name in ("browser_use", "bubus", "cdp_use"):
        logging.getLogger(name).setLevel(logging.WARNING)


configure_browser_use_env()

# Agent() imports the Anthropic client lazily (~1.8 s): it belongs to the warm-up too.
BROWSER_USE_MODULES = (
    "browser_use",
    "browser_use.tools.service",
    "browser_use.llm.openai.chat",
    "browser_use.llm.anthropic.chat",
)


@functools.cache
def import_browser_use() -> None:
    """Import browser-use (about 3 s, once per process), then hide long-lived objects from the collector.

    browser-use's ``Agent.close()`` runs a full ``gc.collect()`` after every run: ~0.25 s of CPU
    with this project's libraries loaded (~300k objects). ``gc.freeze()`` moves everything alive
    now (modules, classes, schemas) out of the collector's sight, and that collection takes a few ms.
    """
    for name in BROWSER_USE_MODULES:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()


# The event lock of the browser-use run in the current task (see _own_event_lock).
_RUN_EVENT_LOCK: contextvars.ContextVar[Any] = contextvars.ContextVar("webgen_browser_use_event_lock", default=None)


@functools.cache
def _scope_event_lock_per_run() -> None:
    """Give each browser-use run its own event lock instead of bubus's one lock per process.

    browser-use drives the browser through bubus event buses, and bubus processes the events of
    *every* bus in the process under one global lock. Its purpose (handlers of one agent and its
    browser session run in order) holds within a run; across concurrent runs it only serialises
    unrelated agents, so four GUI tests at once took as long as four in a row. bubus has no setting
    for this, so its lock getter is replaced by one that returns the lock of the current run
    (a context variable set by ``_own_event_lock``), or the global one outside a run. browser-use
    pins bubus, so the patched name is known; if it is ever missing, runs only lose the overlap.
    """
    try:
        from bubus import service
    except ImportError:
        return
    global_lock = getattr(service, "_get_global_lock", None)
    if global_lock is None or not hasattr(service, "ReentrantLock"):
        logger.warning("bubus has no _get_global_lock; concurrent GUI agents will take turns")
        return

    def lock_of_this_run() -> Any:
        return _RUN_EVENT_LOCK.get() or global_lock()

    service._get_global_lock = lock_of_this_run


# How long a click waits for a file download it may have started (browser-use: 0.5 s on every click).
CLICK_DOWNLOAD_WAIT_S = 0.05


@functools.cache
def _shorten_click_download_wait() -> None:
    """Let a click wait ``CLICK_DOWNLOAD_WAIT_S`` for a download to start, not browser-use's 0.5 s.

    browser-use waits after *every* click in case it started a download, half a second per click
    on a site under test that never downloads anything (the agent has no file actions here). The
    wait is a default argument browser-use never overrides and exposes no setting for, so the
    method is wrapped to pass a shorter one; a download that does start is still followed.
    """
    from browser_use.browser.watchdogs.default_action_watchdog import DefaultActionWatchdog

    original = getattr(DefaultActionWatchdog, "_execute_click_with_download_detection", None)
    if original is None or "download_start_timeout" not in inspect.signature(original).parameters:
        logger.warning("browser-use's click no longer takes download_start_timeout; clicks keep its wait")
        return

    async def click(self: Any, click_coro: Any, *args: Any, **kwargs: Any) -> Any:
        if not args:
            kwargs.setdefault("download_start_timeout", CLICK_DOWNLOAD_WAIT_S)
        return await original(self, click_coro, *args, **kwargs)

    DefaultActionWatchdog._execute_click_with_download_detection = click


def _own_event_lock(lock: Any = None) -> Any:
    """Give the current task (and the tasks it starts) an event lock of its own (or ``lock``)."""
    from bubus.service import ReentrantLock

    _scope_event_lock_per_run()
    _shorten_click_download_wait()
    lock = lock or ReentrantLock()
    _RUN_EVENT_LOCK.set(lock)
    return lock


@dataclass
class _Budget:
    """Run limits checked by the step hooks."""

    max_actions: int
    per_step: int
    deadline: float
    used: int = 0
    cap_reached: bool = False
    deadline_hit: bool = False
    endpoint_down: bool = False
    steps_started: int = 0
    final_png: bytes | None = field(default=None, repr=False)


def _short(text: str | None) -> str | None:
    if text is None:
        return None
    text = " ".join(str(text).split())
    return text if len(text) <= _TEXT_LIMIT else text[: _TEXT_LIMIT - 3] + "..."


def _llm_actions_used(agent: Agent) -> int:
    """Actions executed by model steps so far (the initial navigation is not the model's)."""
    used = 0
    for item in agent.history.history:
        if item.model_output is not None and item.metadata is not None and item.metadata.step_number > 0:
            used += len(item.result)
    return used


async def _capture(agent: Agent, timeout_s: float = 10) -> bytes | None:
    try:
        return await asyncio.wait_for(agent.browser_session.take_screenshot(), timeout=timeout_s)
    except Exception as exc:  # a dead page must not turn a finished run into an error
        logger.debug("final screenshot failed: %s", exc)
        return None


def _step_hooks(budget: _Budget) -> tuple[Any, Any]:
    """on_step_start / on_step_end hooks enforcing the action budget and the deadline."""

    async def on_step_start(agent: Agent) -> None:
        budget.steps_started += 1
        remaining = budget.max_actions - budget.used
        if time.monotonic() >= budget.deadline:
            budget.deadline_hit = True
            agent.stop()
            return
        if getattr(agent.llm, "endpoint_failures", 0) >= ENDPOINT_FAILURE_LIMIT:
            budget.endpoint_down = True
            agent.stop()
            return
        # browser-use truncates a model reply to this many actions, so the total never overshoots.
        agent.settings.max_actions_per_step = max(1, min(budget.per_step, remaining))

    async def on_step_end(agent: Agent) -> None:
        budget.used = _llm_actions_used(agent)
        stopping = False
        if budget.used >= budget.max_actions and not agent.history.is_done():
            budget.cap_reached = stopping = True
        if time.monotonic() >= budget.deadline and not agent.history.is_done():
            budget.deadline_hit = stopping = True
        if stopping or agent.history.is_done():
            budget.final_png = await _capture(agent)
        if stopping:
            agent.stop()

    return on_step_start, on_step_end


def _is_endpoint_failure(exc: BaseException) -> bool:
    """A connection error, timeout, 429 or 5xx from the model endpoint (not a bad model reply)."""
    import openai

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, openai.APIConnectionError):
            return True
        if isinstance(seen, openai.APIStatusError):
            return seen.status_code >= 500 or seen.status_code == 429
        seen = seen.__cause__
    return False


@functools.cache
def _endpoint_watching_chat() -> type:
    """browser-use's ChatOpenAI, counting model calls in a row that failed at the endpoint."""
    from browser_use.llm.openai.chat import ChatOpenAI

    @dataclass
    class EndpointWatchingChatOpenAI(ChatOpenAI):
        endpoint_failures: int = 0

        async def ainvoke(self, messages: Any, output_format: Any = None, **kwargs: Any) -> Any:
            try:
                result = await super().ainvoke(messages, output_format, **kwargs)
            except Exception as exc:
                if _is_endpoint_failure(exc):
                    self.endpoint_failures += 1
                raise
            self.endpoint_failures = 0
            return result

    return EndpointWatchingChatOpenAI


async def _endpoint_problem(base_url: str) -> str | None:
    """None when the model endpoint answers HTTP at all; otherwise why it cannot be reached."""
    try:
        await shared_http_client().get(base_url.rstrip("/") + "/models", timeout=5.0)
    except HTTP_CLIENT_ERRORS as exc:
        return f"model endpoint {base_url} cannot be reached ({type(exc).__name__}: {exc})"
    return None


def _origin_pattern(url: str) -> str:
    parsed = urlparse(url)
    return f"{parsed.scheme}://{parsed.hostname}"


def _collect_history(agent: Agent) -> tuple[list[GuiAction], list[str], int]:
    actions: list[GuiAction] = []
    errors: list[str] = []
    steps = 0
    for item in agent.history.history:
        step = item.metadata.step_number if item.metadata is not None else 0
        if step > 0:
            steps += 1
        for result in item.result:
            if result.error and (item.model_output is None or step == 0):
                errors.append(_short(result.error) or "")
        if item.model_output is None or step == 0:
            continue  # a failed model call, or the initial navigation
        for action, result in zip(item.model_output.action, item.result, strict=False):
            dumped = action.model_dump(exclude_unset=True)
            if not dumped:
                continue
            name, params = next(iter(dumped.items()))
            params = {k: v for k, v in (params or {}).items() if v is not None}
            actions.append(
                GuiAction(
                    step=step,
                    name=name,
                    params=params,
                    result=_short(result.extracted_content or result.long_term_memory),
                    error=_short(result.error),
                )
            )
            if result.error:
                errors.append(f"step {step} {name}: {_short(result.error)}")
    return actions, errors, steps


def _stopped_reason(agent: Agent, budget: _Budget, timed_out: bool, max_steps: int) -> StoppedReason:
    if agent.history.is_done():
        return "done"
    if timed_out or budget.deadline_hit:
        return "timeout"
    if budget.endpoint_down:
        return "error"
    if budget.cap_reached or agent.state.n_steps > max_steps:
        return "max_actions"
    return "error"


def _last_history_png(agent: Agent) -> bytes | None:
    for item in reversed(agent.history.history):
        encoded = item.state.get_screenshot()
        if encoded:
            return base64.b64decode(encoded)
    return None


@dataclass
class _RunFiles:
    """Temporary folders of one run, removed at the end."""

    root: Path
    profile: Path = field(init=False)
    files: Path = field(init=False)

    def __post_init__(self) -> None:
        self.profile = self.root / "profile"
        self.files = self.root / "files"
        self.profile.mkdir()
        self.files.mkdir()


@dataclass(frozen=True)
class _RunSpec:
    """The arguments of one run, after validation."""

    url: str
    task: str
    model: str
    base_url: str
    api_key: str
    max_actions: int
    per_step: int
    timeout_s: float
    viewport: tuple[int, int]
    temperature: float | None

    @property
    def llm_timeout(self) -> int:
        return int(max(10, min(90, self.timeout_s)))

    @property
    def step_timeout(self) -> int:
        return int(max(15, min(120, self.timeout_s)))


@dataclass
class GuiSession:
    """A browser-use session opened before its agent runs: attached through a confined endpoint of
    its own and already showing ``url``. Close it (or hand it to ``run_gui_agent``, which does)."""

    url: str
    viewport: tuple[int, int]
    session: BrowserSession
    endpoint: ScopedEndpoint
    files: _RunFiles
    event_lock: Any
    _stack: contextlib.AsyncExitStack = field(repr=False)

    def fits(self, url: str, viewport: tuple[int, int]) -> bool:
        return self.url == url and tuple(self.viewport) == tuple(viewport)

    async def close(self) -> None:
        """End the session, its endpoint (and so its browser context) and its temporary folder."""
        await self._stack.aclose()


async def open_gui_session(
    *, url: str, cdp_url: str, viewport: tuple[int, int] = (1280, 800), timeout_s: float = 20.0
) -> GuiSession:
    """Attach a browser-use session to ``cdp_url`` (a fresh context of its own) and load ``url``.

    What a GUI agent run does before its first step, done ahead (e.g. while a model grades the
    screenshot). Raises when it cannot; a run without it starts the same way itself.
    """
    configure_browser_use_env()
    import_browser_use()
    stack = contextlib.AsyncExitStack()
    try:
        endpoint = await stack.enter_async_context(scoped_cdp_endpoint(cdp_url))
        files = _RunFiles(Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="webgen-gui-agent-"))))
        # The session's event buses start in this task: give them the lock the agent will share.
        lock = _own_event_lock()
        session = _browser_session(url, endpoint.url, viewport, files)
        stack.push_async_callback(_kill_quietly, session)
        await asyncio.wait_for(session.start(), timeout_s)
        await asyncio.wait_for(session.navigate_to(url), timeout_s)
    except BaseException:
        await stack.aclose()
        raise
    return GuiSession(
        url=url, viewport=viewport, session=session, endpoint=endpoint, files=files, event_lock=lock, _stack=stack
    )


async def _kill_quietly(session: BrowserSession) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(session.kill(), 5)


async def run_gui_agent(
    *,
    url: str,
    task: str,
    model: str,
    base_url: str,
    api_key: str,
    max_actions: int = 15,
    timeout_s: float = 300,
    chromium_path: str,
    cdp_url: str | None = None,
    viewport: tuple[int, int] = (1280, 800),
    temperature: float | None = None,
    max_actions_per_step: int = MAX_ACTIONS_PER_STEP,
    prepared: GuiSession | None = None,
) -> GuiRun:
    """Let a browser-use agent carry out ``task`` on the site at ``url``; never raises for run failures.

    The agent uses browser-use's own OpenAI client against ``base_url``; at most ``max_actions``
    browser actions are taken (the final ``done`` counts), and the whole run ends by ``timeout_s``.
    With ``cdp_url`` (``http://host:port`` or the browser's ``ws://`` address) the agent attaches to
    that running Chromium (and leaves it running); without, a Chromium is started for this run
    alone. Either way the agent sees only a fresh browser context of its own
    (``tools/cdp_scope.py``), so runs can share one Chromium side by side.

    ``prepared`` (from ``open_gui_session``, for the same ``url`` and ``viewport``) saves the
    session start and the first page load; it is closed at the end either way.
    """
    if max_actions < 1 or max_actions_per_step < 1:
        raise ValueError("max_actions and max_actions_per_step must be at least 1")
    if timeout_s <= 0:
        raise ValueError("timeout_s must be positive")
    spec = _RunSpec(
        url=url,
        task=task,
        model=model,
        base_url=base_url,
        api_key=api_key,
        max_actions=max_actions,
        per_step=max_actions_per_step,
        timeout_s=timeout_s,
        viewport=viewport,
        temperature=temperature,
    )
    started = time.monotonic()
    if cdp_url is None and not Path(chromium_path).exists():
        problem: str | None = f"Chromium not found at {chromium_path!r}"
    else:
        problem = await _endpoint_problem(base_url)  # a dead endpoint fails here, before any browser starts
    if problem is not None:
        return GuiRun(errors=[problem], stopped_reason="error", seconds=round(time.monotonic() - started, 3))

    configure_browser_use_env()
    if prepared is not None and not (prepared.fits(url, viewport) and prepared.session.is_cdp_connected):
        await prepared.close()  # made for another page, or the browser went away meanwhile
        prepared = None
    async with contextlib.AsyncExitStack() as stack:
        if prepared is not None:
            stack.push_async_callback(prepared.close)
            endpoint, run_files = prepared.endpoint, prepared.files
        else:
            if cdp_url is None:
                try:
                    cdp_url = (await stack.enter_async_context(SharedBrowser(chromium_path))).ws_url
                except (RuntimeError, OSError) as exc:
                    return GuiRun(
                        errors=[f"Chromium did not start: {_short(str(exc))}"],
                        stopped_reason="error",
                        seconds=round(time.monotonic() - started, 3),
                    )
            # The agent sees one fresh browser context, never the tabs of captures or other agents.
            endpoint = await stack.enter_async_context(scoped_cdp_endpoint(cdp_url))
            run_files = _RunFiles(Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="webgen-gui-agent-"))))
        # A task of its own, so that the event lock set in it stays with this run's tasks.
        return await asyncio.create_task(_run(spec, run_files, started, endpoint, prepared))
    raise AssertionError("unreachable: the block returns")


def _browser_session(url: str, cdp_url: str, viewport: tuple[int, int], run_files: _RunFiles) -> BrowserSession:
    """A browser-use session (not started) attached to ``cdp_url``, kept to ``url``'s site."""
    from browser_use import BrowserProfile, BrowserSession

    width, height = viewport
    size = {"width": width, "height": height}
    profile = BrowserProfile(
        # Attach only: closing a CDP-attached session disconnects, it does not end the browser.
        cdp_url=cdp_url,
        is_local=False,
        enable_default_extensions=False,  # else it downloads extensions
        captcha_solver=False,
        allowed_domains=[_origin_pattern(url)],  # the agent may not wander off the site
        viewport=size,
        window_size=size,
        keep_alive=False,
        # Between two actions of one step (default 0.1 s): the page's own handlers have run by the
        # time an action returns; the next step reads the page after its own settle check anyway.
        wait_between_actions=0.02,
        downloads_path=run_files.files / "downloads",
        # Always our own folder: left unset, browser-use makes one in /tmp that nobody removes.
        user_data_dir=run_files.profile,
    )
    return BrowserSession(browser_profile=profile)


def _build_agent(spec: _RunSpec, run_files: _RunFiles, endpoint_url: str, prepared: GuiSession | None) -> Agent:
    import_browser_use()
    from browser_use import Agent
    from browser_use.tools.service import Tools

    _forget_import_time_downloads_dir()
    llm = _endpoint_watching_chat()(
        model=spec.model,
        base_url=spec.base_url,
        api_key=spec.api_key,
        temperature=spec.temperature,
        timeout=spec.llm_timeout,
        max_retries=LLM_RETRIES,
        http_client=shared_http_client(),
    )
    task = spec.task if spec.url in spec.task else f"{spec.task}\n\nThe site under test is open at {spec.url}."
    return Agent(
        task=task,
        llm=llm,
        browser_session=(
            prepared.session
            if prepared is not None
            else _browser_session(spec.url, endpoint_url, spec.viewport, run_files)
        ),
        tools=Tools(exclude_actions=list(EXCLUDED_ACTIONS)),
        use_vision=True,
        max_actions_per_step=spec.per_step,
        max_failures=MAX_FAILURES,
        # No extra model calls: no judge, no planning, no history compaction.
        use_judge=False,
        enable_planning=False,
        message_compaction=False,
        directly_open_url=False,
        # A prepared session already shows the site.
        initial_actions=None if prepared is not None else [{"navigate": {"url": spec.url, "new_tab": False}}],
        llm_timeout=spec.llm_timeout,
        step_timeout=spec.step_timeout,
        file_system_path=str(run_files.files / "agent"),
        calculate_cost=False,  # would fetch a price list from the internet
        enable_signal_handler=False,  # a library must not take over Ctrl+C
    )


async def _run(
    spec: _RunSpec, run_files: _RunFiles, started: float, endpoint: ScopedEndpoint, prepared: GuiSession | None = None
) -> GuiRun:
    try:
        # The prepared session's event buses already run under its lock: the agent's must share it.
        _own_event_lock(prepared.event_lock if prepared is not None else None)
        agent = _build_agent(spec, run_files, endpoint.url, prepared)
    except Exception as exc:  # bad URL, profile or client settings: report, do not crash the caller
        return GuiRun(errors=[f"GUI agent setup failed: {type(exc).__name__}: {exc}"], stopped_reason="error")

    budget = _Budget(max_actions=spec.max_actions, per_step=spec.per_step, deadline=started + spec.timeout_s)
    on_step_start, on_step_end = _step_hooks(budget)
    # max_steps = max_actions: every step takes at least one action, and browser-use offers only
    # "done" on its last step, so the agent gets a chance to answer within the budget.
    run_task = asyncio.create_task(
        agent.run(max_steps=spec.max_actions, on_step_start=on_step_start, on_step_end=on_step_end)
    )
    errors: list[str] = []
    timed_out = False
    try:
        if not await _finished(run_task, budget.deadline - time.monotonic()):
            timed_out = True
            errors.append(f"GUI agent run exceeded {spec.timeout_s:g}s and was stopped")
            if budget.steps_started == 0:
                errors.append(f"the page at {spec.url} never finished loading, so the agent never started")
            agent.stop()
            budget.final_png = await _capture(agent, timeout_s=2)
            run_task.cancel()  # the step may be waiting on the model or a hung page: do not wait for it
            if not await _finished(run_task, 4):
                # browser-use's own shutdown queues behind the stuck browser event (a page that
                # never loads); cutting its connection makes those events fail at once.
                await endpoint.disconnect()
                await _finished(run_task, 10)
        if run_task.done() and not run_task.cancelled() and run_task.exception() is not None:
            exc = run_task.exception()
            errors.append(f"GUI agent failed: {type(exc).__name__}: {_short(str(exc))}")
    finally:
        if not run_task.done():
            logger.warning("browser-use agent did not stop after cancellation; its task is abandoned")
        await _close(agent)

    if budget.endpoint_down:
        errors.append(f"model endpoint {spec.base_url} failed {ENDPOINT_FAILURE_LIMIT} calls in a row; run stopped")
    actions, history_errors, steps = _collect_history(agent)
    for result in agent.state.last_result or []:
        if result.error and _short(result.error) not in history_errors:
            history_errors.append(_short(result.error) or "")
    usage = await agent.token_cost_service.get_usage_summary()
    final_png = budget.final_png or _last_history_png(agent)
    _remove_agent_directory(agent)
    return GuiRun(
        final_answer=agent.history.final_result() if agent.history.is_done() else None,
        success=agent.history.is_successful(),
        actions=actions,
        steps=steps,
        final_screenshot_png=final_png,
        errors=history_errors + errors,
        input_tokens=usage.total_prompt_tokens,
        output_tokens=usage.total_completion_tokens,
        seconds=round(time.monotonic() - started, 3),
        stopped_reason=_stopped_reason(agent, budget, timed_out, spec.max_actions),
        prepared=prepared is not None,
    )


async def _finished(task: asyncio.Task[Any], timeout_s: float) -> bool:
    """Wait for the task at most this long (never cancels it); True when it is done."""
    done, _ = await asyncio.wait({task}, timeout=max(0.0, timeout_s))
    return bool(done)


async def _close(agent: Agent) -> None:
    """Close the browser session (browser-use's run closes it too; this covers cancelled runs)."""
    try:
        await asyncio.wait_for(agent.browser_session.kill(), timeout=5)
    except Exception as exc:
        logger.debug("browser session close: %s", exc)


@functools.cache
def _forget_import_time_downloads_dir() -> None:
    """browser-use makes an (unused) downloads folder in /tmp when imported; remove it at exit if empty."""
    from browser_use.browser.session import DEFAULT_BROWSER_PROFILE

    path = DEFAULT_BROWSER_PROFILE.downloads_path
    if path is not None:
        atexit.register(_rmdir_if_empty, Path(path))


def _rmdir_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.rmdir()


def _remove_agent_directory(agent: Agent) -> None:
    # browser-use keeps per-agent screenshots in the system temp folder and never removes them.
    directory = getattr(agent, "agent_directory", None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
