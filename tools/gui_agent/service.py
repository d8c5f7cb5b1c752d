"""The GUI agent: browser-use drives a real Chromium through the site and answers the test task.

``run_gui_agent`` wraps one browser-use ``Agent`` run with what a test harness needs: an action
budget counted in actions (not steps), a whole-run deadline, no network beyond the site and the
model endpoint, quiet logging, and a structured ``GuiRun`` result whatever happens (dead endpoint,
hanging page, timeout, an unsupported browser-use). Only programming errors escape as exceptions.

browser-use is imported lazily, with its environment switches and this project's patches
(``patches.py``), on the first run or session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from webgen_agent.tools.browser import SharedBrowser
from webgen_agent.tools.cdp_scope import ScopedEndpoint, scoped_cdp_endpoint
from webgen_agent.tools.gui_agent.patches import (
    UnsupportedBrowserUse,
    check_browser_use_version,
    configure_agent,
    import_browser_use,
    own_event_lock,
)
from webgen_agent.tools.gui_agent.session import session_class
from webgen_agent.tools.gui_agent.steps import (
    ENDPOINT_FAILURE_LIMIT,
    Budget,
    capture,
    collect_frames,
    collect_history,
    collect_messages,
    endpoint_watching_chat,
    last_history_png,
    short,
    step_hooks,
    why_stopped,
)
from webgen_agent.tools.gui_agent.views import GuiAgentSettings, GuiRun
from webgen_agent.tools.gui_agent.webvoyager_actions import act_as_webvoyager, type_as_webvoyager
from webgen_agent.tools.gui_agent.webvoyager_page import start_as_webvoyager
from webgen_agent.tools.models import http_client_errors, shared_http_client, spend

if TYPE_CHECKING:
    from browser_use import Agent, BrowserSession
    from browser_use.tools.service import Tools

logger = logging.getLogger(__name__)

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
LLM_RETRIES = 2  # client retries per model call (timeouts, 429, 5xx)


async def _endpoint_problem(base_url: str) -> str | None:
    """None when the model endpoint answers HTTP at all; otherwise why it cannot be reached."""
    try:
        await shared_http_client().get(base_url.rstrip("/") + "/models", timeout=5.0)
    except http_client_errors() as exc:
        return f"model endpoint {base_url} cannot be reached ({type(exc).__name__}: {exc})"
    return None


def _is_file(path: str | None) -> bool:
    return bool(path) and Path(path or "").exists()


def _origin_pattern(url: str) -> str:
    parsed = urlparse(url)
    return f"{parsed.scheme}://{parsed.hostname}"


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
    """One run: the site, the task, and how to run it."""

    url: str
    task: str
    settings: GuiAgentSettings


@dataclass
class GuiSession:
    """A browser-use session opened before its agent runs: attached through a confined endpoint of
    its own and already showing ``url``. Close it (or hand it to ``run_gui_agent``, which does)."""

    url: str
    viewport: tuple[int, int]
    offline: bool
    session: BrowserSession
    endpoint: ScopedEndpoint
    files: _RunFiles
    event_lock: Any
    loaded_at: float  # when ``url`` finished loading (time.monotonic), and WebVoyager's start was made
    webvoyager_start: bool  # the page was started on as WebVoyager does (``webvoyager_page``)
    _stack: contextlib.AsyncExitStack = field(repr=False)

    def fits(self, url: str, settings: GuiAgentSettings) -> bool:
        """Whether a run with ``settings`` on ``url`` may take this session as its start."""
        return (
            self.url == url
            and tuple(self.viewport) == tuple(settings.viewport)
            and self.offline == settings.offline_pages
            and self.webvoyager_start == settings.webvoyager_start
        )

    async def close(self) -> None:
        """End the session, its endpoint (and so its browser context) and its temporary folder."""
        await self._stack.aclose()


async def open_gui_session(
    *,
    url: str,
    cdp_url: str,
    viewport: tuple[int, int] = (1280, 800),
    timeout_s: float = 20.0,
    offline: bool = False,
    settle_s: float = 0.0,
    webvoyager_start: bool = False,
) -> GuiSession:
    """Attach a browser-use session to ``cdp_url`` (a fresh context of its own), load ``url`` (and,
    with ``webvoyager_start``, start on it as WebVoyager does), and read the page as the agent's
    first step will, ``settle_s`` after that.

    What a GUI agent run does before its first step, done ahead (e.g. while a model grades the
    screenshot). Raises when it cannot; a run without it starts the same way itself.
    """
    await asyncio.to_thread(import_browser_use)  # a few seconds the first time, once per process
    stack = contextlib.AsyncExitStack()
    try:
        endpoint = await stack.enter_async_context(scoped_cdp_endpoint(cdp_url, confine_to=url, offline=offline))
        files = await _run_files(stack)
        # The session's event buses start in this task: give them the lock the agent will share.
        lock = own_event_lock()
        session = _browser_session(url, endpoint.url, viewport, files)
        stack.push_async_callback(_kill_quietly, session)
        await asyncio.wait_for(session.start(), timeout_s)
        await asyncio.wait_for(session.navigate_to(url), timeout_s)
        if webvoyager_start:
            await asyncio.wait_for(start_as_webvoyager(session), timeout_s)
        loaded_at = time.monotonic()
        session.read_ahead(settle_s)
    except BaseException:
        await stack.aclose()
        raise
    return GuiSession(
        url=url,
        viewport=viewport,
        offline=offline,
        session=session,
        endpoint=endpoint,
        files=files,
        event_lock=lock,
        _stack=stack,
        loaded_at=loaded_at,
        webvoyager_start=webvoyager_start,
    )


async def _kill_quietly(session: BrowserSession) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(session.kill(), 5)


async def run_gui_agent(
    *, url: str, task: str, settings: GuiAgentSettings, prepared: GuiSession | None = None
) -> GuiRun:
    """Let a browser-use agent carry out ``task`` on the site at ``url``; never raises for run failures.

    The agent uses browser-use's own OpenAI client against ``settings.base_url``; at most
    ``settings.max_actions`` browser actions are taken (the final ``done`` counts), and the whole run
    ends by ``settings.timeout_s``. With ``settings.cdp_url`` the agent attaches to that running
    Chromium (and leaves it running); without, ``settings.chromium_path`` is started for this run
    alone. Either way the agent sees only a fresh browser context of its own
    (``tools/cdp_scope.py``), so runs can share one Chromium side by side.

    ``prepared`` (from ``open_gui_session``, for the same ``url`` and viewport) saves the
    session start and the first page load; it is closed at the end either way.
    """
    spec = _RunSpec(url=url, task=task, settings=settings)
    chromium_path, cdp_url = settings.chromium_path, settings.cdp_url
    started = time.monotonic()
    problem: str | None = None
    try:
        check_browser_use_version()
    except UnsupportedBrowserUse as exc:
        problem = str(exc)
    if problem is None and cdp_url is None and not await asyncio.to_thread(_is_file, chromium_path):
        problem = f"Chromium not found at {chromium_path!r}"
    endpoint_down = False
    if problem is None:
        problem = await _endpoint_problem(settings.base_url)  # a dead endpoint fails here, before any browser starts
        endpoint_down = problem is not None
    if problem is not None:
        if prepared is not None:
            await prepared.close()
        return GuiRun(
            errors=[problem],
            stopped_reason="error",
            seconds=round(time.monotonic() - started, 3),
            endpoint_down=endpoint_down,
        )

    if prepared is not None and not (prepared.fits(url, settings) and prepared.session.is_cdp_connected):
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
                        errors=[f"Chromium did not start: {short(str(exc))}"],
                        stopped_reason="error",
                        seconds=round(time.monotonic() - started, 3),
                    )
            # The agent sees one fresh browser context, never the tabs of captures or other agents.
            endpoint = await stack.enter_async_context(
                scoped_cdp_endpoint(cdp_url, confine_to=url, offline=settings.offline_pages)
            )
            run_files = await _run_files(stack)
        # A task of its own, so that the event lock set in it stays with this run's tasks.
        return await asyncio.create_task(_run(spec, run_files, started, endpoint, prepared))
    raise AssertionError("unreachable: the block returns")


async def _run_files(stack: contextlib.AsyncExitStack) -> _RunFiles:
    """A run's temporary folders, removed when ``stack`` closes (made and removed in a worker thread)."""
    holder = await asyncio.to_thread(tempfile.TemporaryDirectory, prefix="webgen-gui-agent-")
    stack.push_async_callback(asyncio.to_thread, holder.cleanup)
    return await asyncio.to_thread(_RunFiles, Path(holder.name))


def _browser_session(url: str, cdp_url: str, viewport: tuple[int, int], run_files: _RunFiles) -> Any:
    """A browser-use session (not started) attached to ``cdp_url``, kept to ``url``'s site: a
    ``BrowserSession`` that can read its page ahead (``session.session_class``)."""
    from browser_use import BrowserProfile
    from browser_use.browser.profile import ViewportSize

    width, height = viewport
    profile = BrowserProfile(
        # Attach only: closing a CDP-attached session disconnects, it does not end the browser.
        cdp_url=cdp_url,
        is_local=False,
        enable_default_extensions=False,  # else it downloads extensions
        captcha_solver=False,
        allowed_domains=[_origin_pattern(url)],  # the agent may not wander off the site
        viewport=ViewportSize(width=width, height=height),
        window_size=ViewportSize(width=width, height=height),
        keep_alive=False,
        # Between two actions of one step (default 0.1 s): the page's own handlers have run by the
        # time an action returns; the next step reads the page after its own settle check anyway.
        wait_between_actions=0.02,
        downloads_path=run_files.files / "downloads",
        # Always our own folder: left unset, browser-use makes one in /tmp that nobody removes.
        user_data_dir=run_files.profile,
    )
    return session_class()(browser_profile=profile)


def agent_tools(settings: GuiAgentSettings) -> Tools:
    """The actions the agent may take: browser-use's, less ``EXCLUDED_ACTIONS``, or WebVoyager's
    (``webvoyager_actions``); typing as the settings ask."""
    import_browser_use()
    from browser_use.tools.service import Tools

    tools: Tools = Tools(exclude_actions=list(EXCLUDED_ACTIONS))
    typing_rules = (settings.click_before_typing_s, settings.enter_after_typing_s)
    if settings.webvoyager_actions or typing_rules != (None, None):
        type_as_webvoyager(
            tools,
            click_pause_s=settings.click_before_typing_s,
            enter_pause_s=settings.enter_after_typing_s,
            space_guard=settings.webvoyager_start,
            selenium_keys=settings.webvoyager_actions,
        )
    if settings.webvoyager_actions:
        act_as_webvoyager(tools, window_height=settings.viewport[1])
    return tools


def _build_agent(
    spec: _RunSpec, run_files: _RunFiles, endpoint_url: str, prepared: GuiSession | None, http_client: Any
) -> Agent:
    import_browser_use()
    from browser_use import Agent

    settings = spec.settings
    llm = endpoint_watching_chat()(
        model=settings.model,
        base_url=settings.base_url,
        api_key=settings.api_key,
        temperature=settings.temperature,
        **({"max_completion_tokens": settings.max_tokens} if settings.max_tokens is not None else {}),
        timeout=settings.llm_timeout,
        max_retries=LLM_RETRIES,
        http_client=http_client,
    )
    task = spec.task if spec.url in spec.task else f"{spec.task}\n\nThe site under test is open at {spec.url}."
    agent: Agent = Agent(
        task=task,
        llm=llm,
        browser_session=(
            prepared.session
            if prepared is not None
            else _browser_session(spec.url, endpoint_url, settings.viewport, run_files)
        ),
        tools=agent_tools(settings),
        use_vision=True,
        max_actions_per_step=settings.max_actions_per_step,
        # Never more than the action budget: an agent that may fail every step runs until that ends.
        max_failures=min(settings.max_failures or settings.max_actions, settings.max_actions),
        # No extra model calls: no judge, no planning, no history compaction.
        use_judge=False,
        enable_planning=False,
        message_compaction=False,
        directly_open_url=False,
        # A prepared session already shows the site; so does one WebVoyager's actions start on (they
        # offer no navigate action to take first: ``_run`` opens the page).
        initial_actions=None
        if prepared is not None or settings.webvoyager_actions
        else [{"navigate": {"url": spec.url, "new_tab": False}}],
        llm_timeout=settings.llm_timeout,
        step_timeout=settings.step_timeout,
        file_system_path=str(run_files.files / "agent"),
        calculate_cost=False,  # would fetch a price list from the internet
        enable_signal_handler=False,  # a library must not take over Ctrl+C
        extend_system_message=settings.system_rule or None,
        # browser-use's nudge after repeated actions; WebVoyager says nothing of the kind.
        loop_detection_enabled=not settings.webvoyager_messages,
    )
    configure_agent(
        agent,
        screenshots_kept=settings.screenshots_kept,
        last_step_prompt=settings.last_step_prompt,
        webvoyager_messages=settings.webvoyager_messages,
    )
    return agent


async def _run(
    spec: _RunSpec, run_files: _RunFiles, started: float, endpoint: ScopedEndpoint, prepared: GuiSession | None = None
) -> GuiRun:
    try:
        # The prepared session's event buses already run under its lock: the agent's must share it.
        own_event_lock(prepared.event_lock if prepared is not None else None)
        # Built in a worker thread (which sees this task's event lock): the constructor makes the
        # agent's file-system and screenshot folders (os.mkdir) and builds its action models, file
        # and CPU work that would stall the event loop. It only sets attributes on the (idle)
        # session and creates loop-agnostic asyncio objects; the one thing bound to this loop, the
        # HTTP client, is fetched here.
        agent = await asyncio.to_thread(_build_agent, spec, run_files, endpoint.url, prepared, shared_http_client())
    except Exception as exc:  # bad URL, profile or client settings: report, do not crash the caller
        return GuiRun(errors=[f"GUI agent setup failed: {type(exc).__name__}: {exc}"], stopped_reason="error")

    settings = spec.settings
    budget = Budget(
        max_actions=settings.max_actions,
        per_step=settings.max_actions_per_step,
        deadline=started + settings.timeout_s,
        settle_after_load_s=settings.settle_after_load_s,
        settle_after_action_s=settings.settle_after_action_s,
        loaded_at=prepared.loaded_at if prepared is not None else None,
        webvoyager_start=settings.webvoyager_start and prepared is None,  # a prepared one made it
    )
    on_step_start, on_step_end = step_hooks(budget)

    async def opened_then_run() -> Any:
        if prepared is None and settings.webvoyager_actions:  # no initial navigate action: open it here
            await agent.browser_session.start()
            await agent.browser_session.navigate_to(spec.url)
            budget.loaded_at = time.monotonic()
        # max_steps = max_actions: every step takes at least one action, and browser-use offers only
        # "done" on its last step, so the agent gets a chance to answer within the budget.
        return await agent.run(max_steps=settings.max_actions, on_step_start=on_step_start, on_step_end=on_step_end)

    run_task = asyncio.create_task(opened_then_run())
    errors: list[str] = []
    timed_out = False
    try:
        if not await _finished(run_task, budget.deadline - time.monotonic()):
            timed_out = True
            errors.append(f"GUI agent run exceeded {settings.timeout_s:g}s and was stopped")
            if budget.steps_started == 0:
                errors.append(f"the page at {spec.url} never finished loading, so the agent never started")
            agent.stop()
            budget.final_png = await capture(agent, timeout_s=2)
            run_task.cancel()  # the step may be waiting on the model or a hung page: do not wait for it
            if not await _finished(run_task, 4):
                # browser-use's own shutdown queues behind the stuck browser event (a page that
                # never loads); cutting its connection makes those events fail at once.
                await endpoint.disconnect()
                await _finished(run_task, 10)
        if run_task.done() and not run_task.cancelled() and run_task.exception() is not None:
            failure = run_task.exception()
            errors.append(f"GUI agent failed: {type(failure).__name__}: {short(str(failure))}")
    finally:
        if not run_task.done():
            logger.warning("browser-use agent did not stop after cancellation; its task is abandoned")
        await _close(agent)

    if budget.endpoint_down:
        errors.append(f"model endpoint {settings.base_url} failed {ENDPOINT_FAILURE_LIMIT} calls in a row; run stopped")
    actions, history_errors, steps = collect_history(agent)
    for result in agent.state.last_result or []:
        if result.error and short(result.error) not in history_errors:
            history_errors.append(short(result.error) or "")
    usage = await agent.token_cost_service.get_usage_summary()
    final_png = budget.final_png or last_history_png(agent)
    frames = await asyncio.to_thread(collect_frames, agent)  # before the agent's folder is removed
    await asyncio.to_thread(_remove_agent_directory, agent)
    run = GuiRun(
        final_answer=agent.history.final_result() if agent.history.is_done() else None,
        success=agent.history.is_successful(),
        actions=actions,
        messages=collect_messages(agent),
        steps=steps,
        final_screenshot_png=final_png,
        frames=frames,
        errors=history_errors + errors,
        input_tokens=usage.total_prompt_tokens,
        output_tokens=usage.total_completion_tokens,
        seconds=round(time.monotonic() - started, 3),
        stopped_reason=why_stopped(agent, budget, timed_out, settings.max_actions),
        prepared=prepared is not None,
        endpoint_down=budget.endpoint_down,
    )
    spend("vlm", run.usage)  # the GUI agent is the vision model's role: its tokens are priced as the vlm's
    return run


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


def _remove_agent_directory(agent: Agent) -> None:
    # browser-use keeps per-agent screenshots in the system temp folder and never removes them.
    directory = getattr(agent, "agent_directory", None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
