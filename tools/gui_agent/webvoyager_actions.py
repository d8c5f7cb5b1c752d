"""WebVoyager's actions, made of browser-use's: what the upstream profile's GUI agent may do and how
it types, clicks, scrolls and waits (A ``webvoyager/run.py`` 377-451, 631-708; WebGen-RL's and
WebGen-Bench's copies are the same). Each changes a browser-use ``Tools`` before an agent is built on
it, as ``GuiAgentSettings`` asks (the profile's rules): ``type_as_webvoyager`` for typing,
``act_as_webvoyager`` for the rest.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Any

from pydantic import BaseModel, Field

from webgen_agent.tools.gui_agent.patches import UnsupportedBrowserUse, check_browser_use_version
from webgen_agent.tools.gui_agent.webvoyager_page import (
    guard_before_typing,
    open_in_same_tab,
    scroll_element,
    scroll_window,
    type_keys,
)

# What WebVoyager's system prompt says of its Type action, added to the input action's description.
ENTER_AFTER_TYPING = "After typing, the system automatically hits the Enter key."
# The input types WebVoyager takes for text boxes (A webvoyager/run.py 390-392); typing into anything
# else (a textarea excepted) goes on, with a note in the next observation.
_TEXT_BOX_TYPES = ("text", "search", "password", "email", "tel")


def not_a_text_box_note(tag: str, attributes: dict[str, str]) -> str | None:
    """The note WebVoyager's observation carries after typing into an element that may not be a text
    box (its tag and its ``type`` as the DOM reports them); None for a text box."""
    kind = attributes.get("type", "text").lower() if tag == "input" else attributes.get("type")
    if tag == "textarea" or (tag == "input" and kind in _TEXT_BOX_TYPES):
        return None
    return f"Note: the element typed into may not be a text box (its tag is <{tag}>, its type {kind})."


def type_as_webvoyager(
    tools: Any,
    *,
    click_pause_s: float | None,
    enter_pause_s: float | None,
    space_guard: bool = False,
    selenium_keys: bool = False,
) -> None:
    """Make the input action of ``tools`` (a browser-use ``Tools``, before an agent is built on it)
    type as WebVoyager's Type does (A webvoyager/run.py 383-419): a click on the field and
    ``click_pause_s`` before the text (browser-use only focuses it, so a field that reacts to clicks,
    such as a combobox opening its options, did not react), then ``enter_pause_s`` and Enter in the
    field (a form that submits on Enter is submitted by typing alone); the description then says
    so, as WebVoyager's system prompt does. None leaves that part browser-use's. Typing into what
    may not be a text box adds WebVoyager's note to the action's result (``not_a_text_box_note``).
    ``space_guard``: WebVoyager's typing guard against the space key is set first (``webvoyager_page``).
    ``selenium_keys``: the field is cleared (browser-use's clearing), then the text is typed as
    Selenium types it (``type_keys``), so a key the page prevents (the guard's space) is not typed;
    WebVoyager always clears first, so the action's ``clear`` is not read. An index that names no
    element is left to browser-use's own answer, with nothing clicked or pressed."""
    check_browser_use_version()
    from browser_use.agent.views import ActionResult
    from browser_use.browser.events import ClickElementEvent, SendKeysEvent

    registered = tools.registry.registry.actions.get("input")
    if registered is None or "browser_session" not in inspect.signature(registered.function).parameters:
        raise UnsupportedBrowserUse("browser-use's input action is not the one typing can be extended for")
    typing = registered.function

    async def send(session: Any, event: Any) -> None:
        dispatched = session.event_bus.dispatch(event)
        await dispatched
        await dispatched.event_result(raise_if_any=True, raise_if_none=False)

    async def typed_as_webvoyager(**kwargs: Any) -> Any:
        session = kwargs["browser_session"]
        node = await session.get_element_by_index(kwargs["params"].index)
        if node is None:
            return await typing(**kwargs)
        if space_guard:
            await guard_before_typing(session)
        if click_pause_s is not None:
            try:
                await send(session, ClickElementEvent(node=node))
            except Exception as exc:  # WebVoyager's click failing fails its Type: the agent is told
                return ActionResult(error=f"Clicking the field before typing failed: {type(exc).__name__}: {exc}")
            await asyncio.sleep(click_pause_s)
        if selenium_keys:
            params = kwargs["params"]
            result = await typing(**{**kwargs, "params": params.model_copy(update={"text": "", "clear": True})})
            if result.error is not None:
                return result
            try:
                await type_keys(session, params.text)
            except Exception as exc:
                return ActionResult(error=f"Typing failed: {type(exc).__name__}: {exc}")
            said = f"Typed '{params.text}'"
        else:
            result = await typing(**kwargs)
            if result.error is not None:
                return result
            said = result.extracted_content
        if enter_pause_s is not None:
            await asyncio.sleep(enter_pause_s)
            try:
                await send(session, SendKeysEvent(keys="Enter"))
            except Exception as exc:
                return ActionResult(error=f"Typed, but pressing Enter failed: {type(exc).__name__}: {exc}")
            said = f"{said}, then pressed Enter"
        note = not_a_text_box_note(node.tag_name, node.attributes or {})
        said = f"{said}\n{note}" if note is not None else said
        return result.model_copy(update={"extracted_content": said, "long_term_memory": said})

    registered.function = functools.wraps(typing)(typed_as_webvoyager)
    if enter_pause_s is not None:
        registered.description = f"{registered.description} {ENTER_AFTER_TYPING}"


# WebVoyager's actions as browser-use names them: Click, Type, Scroll, Wait, GoBack and ANSWER. Its
# Google (a visit to google.com) is not offered: the agent may not leave the site.
WEBVOYAGER_ACTIONS = ("click", "input", "scroll", "wait", "go_back", "done")
WEBVOYAGER_WAIT_S = 5.0  # A webvoyager/run.py 669-670


def act_as_webvoyager(tools: Any, *, window_height: int) -> None:
    """Leave ``tools`` (a browser-use ``Tools``) WebVoyager's actions only (``WEBVOYAGER_ACTIONS``; no
    JavaScript, page search, key presses, tabs, dropdown helpers or visits to a URL), each taken as
    WebVoyager takes it: clicks in the same tab, its scroll and its 5 s wait."""
    check_browser_use_version()
    for name in list(tools.registry.registry.actions):
        if name not in WEBVOYAGER_ACTIONS:
            tools.registry.exclude_action(name)
    missing = set(WEBVOYAGER_ACTIONS) - set(tools.registry.registry.actions)
    if missing:
        raise UnsupportedBrowserUse(f"browser-use has no {', '.join(sorted(missing))} action to make WebVoyager's")
    click_in_same_tab(tools)
    scroll_as_webvoyager(tools, window_height=window_height)
    wait_as_webvoyager(tools)


def wait_as_webvoyager(tools: Any) -> None:
    """Make the wait action of ``tools`` WebVoyager's Wait: ``WEBVOYAGER_WAIT_S`` seconds, no choice of
    how long (browser-use's takes a number of seconds and sleeps one less)."""
    from browser_use.agent.views import ActionResult
    from browser_use.tools.views import NoParamsAction

    registered = tools.registry.registry.actions["wait"]

    async def waited_as_webvoyager(**_: Any) -> Any:
        await asyncio.sleep(WEBVOYAGER_WAIT_S)
        said = f"Waited for {WEBVOYAGER_WAIT_S:g} seconds"
        return ActionResult(extracted_content=said, long_term_memory=said)

    registered.function = waited_as_webvoyager
    registered.param_model = NoParamsAction
    registered.description = f"Wait {WEBVOYAGER_WAIT_S:g} seconds."


def click_in_same_tab(tools: Any) -> None:
    """Make each click by index of ``tools`` (a browser-use ``Tools``) set the clicked element's
    ``target`` to ``_self`` first, as WebVoyager's click does (A webvoyager/run.py 377-380): a link
    meant for a new tab opens in the agent's tab. browser-use keeps the handler both forms of its
    click action call (with and without coordinates) on the ``Tools``, so that is what is wrapped:
    the action survives being registered again. An index that names no element is left to
    browser-use's own answer."""
    check_browser_use_version()
    clicking = getattr(tools, "_click_by_index", None)
    if clicking is None or "browser_session" not in inspect.signature(clicking).parameters:
        raise UnsupportedBrowserUse("browser-use's click has no handler by index to set the target before")

    async def clicked_in_same_tab(params: Any, browser_session: Any) -> Any:
        node = await browser_session.get_element_by_index(params.index) if params.index else None
        if node is not None:
            await open_in_same_tab(browser_session, node)
        return await clicking(params, browser_session)

    tools._click_by_index = functools.wraps(clicking)(clicked_in_same_tab)


# WebVoyager's Scroll takes a direction and the window or an element, no amount (its system prompt:
# "Scroll [Numerical_Label or WINDOW]; [up or down]"); the description is this project's words.
SCROLL_DESCRIPTION = (
    "Scroll the window (no index) down or up by two thirds of its height, or scroll within an element "
    "(its index): the element is focused and Alt+ArrowDown or Alt+ArrowUp is pressed on it."
)


class WebVoyagerScroll(BaseModel):
    """The parameters of WebVoyager's Scroll (a ``pages`` from browser-use's own form is ignored)."""

    down: bool = Field(default=True, description="True: scroll down; False: scroll up.")
    index: int | None = Field(default=None, description="An element to scroll within; none (or 0): the window.")


def scroll_as_webvoyager(tools: Any, *, window_height: int) -> None:
    """Make the scroll action of ``tools`` (a browser-use ``Tools``) scroll as WebVoyager's Scroll does
    (A webvoyager/run.py 422-451): the window by ``window_height * 2 // 3`` pixels (WebVoyager's window
    height, the agent's viewport here), or an element focused and Alt with an arrow key pressed on it.
    browser-use's own scrolls by pages of the viewport, as many as the model asks for; WebVoyager's
    takes a direction only, so the action's parameters become a direction and an optional element."""
    check_browser_use_version()
    from browser_use.agent.views import ActionResult

    registered = tools.registry.registry.actions.get("scroll")
    if registered is None:
        raise UnsupportedBrowserUse("browser-use has no scroll action to make WebVoyager's")
    delta = window_height * 2 // 3

    async def scrolled_as_webvoyager(params: WebVoyagerScroll, browser_session: Any, **_: Any) -> Any:
        direction = "down" if params.down else "up"
        try:
            if not params.index:
                await scroll_window(browser_session, delta if params.down else -delta)
                said = f"Scrolled the window {direction} by {delta}px"
            else:
                node = await browser_session.get_element_by_index(params.index)
                if node is None:
                    return ActionResult(error=f"Element index {params.index} not found in browser state")
                await scroll_element(browser_session, node, down=params.down)
                said = f"Scrolled within element {params.index} {direction} (Alt+Arrow{direction.title()})"
        except Exception as exc:  # upstream's scroll raising is a failed action: the agent is told
            return ActionResult(error=f"Scrolling failed: {type(exc).__name__}: {exc}")
        return ActionResult(extracted_content=said, long_term_memory=said)

    registered.function = scrolled_as_webvoyager
    registered.param_model = WebVoyagerScroll
    registered.description = SCROLL_DESCRIPTION
