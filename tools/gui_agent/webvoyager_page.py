"""What WebVoyager does to the page it tests, besides the agent's own actions.

Once the page has loaded it clicks the page's body (Selenium's click of the ``<body>`` element, a
failure passed over) and sets a guard against the space key on ``window.onkeydown``, which replaces
the page's own handler set there; before each typing it sets the guard again, search boxes spared
too (A ``webvoyager/run.py`` l.502-510 and l.410-415; WebGen-RL's and WebGen-Bench's copies do the
same). The profile's ``gui_webvoyager_start`` asks for it.

Its actions act on the page too: before each click it sets the clicked element's ``target`` to
``_self`` (l.377-380), so a link meant for a new tab opens in the agent's own tab; its Scroll moves
the window by two thirds of its height, or focuses an element and presses Alt and an arrow key on it
(l.422-451). The profile's ``gui_webvoyager_actions`` asks for them (``webvoyager_actions.py``).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

logger = logging.getLogger(__name__)

# The field types whose keydowns the guard lets through: on the first page, and before typing.
START_SPARED = ("text", "textarea")
TYPING_SPARED = ("text", "textarea", "search")

# Where Selenium clicks an element (WebDriver's "in-view centre point"): the centre of the part of
# the element's first box that is inside the viewport, rounded down; null when no part is in view,
# where Selenium's click fails.
_BODY_CLICK_POINT = """(() => {
  const box = document.body && document.body.getClientRects()[0];
  if (!box) return null;
  const left = Math.max(0, Math.min(box.x, box.x + box.width));
  const right = Math.min(window.innerWidth, Math.max(box.x, box.x + box.width));
  const top = Math.max(0, Math.min(box.y, box.y + box.height));
  const bottom = Math.min(window.innerHeight, Math.max(box.y, box.y + box.height));
  if (right <= left || bottom <= top) return null;
  return [Math.floor((left + right) / 2), Math.floor((top + bottom) / 2)];
})()"""


def space_key_guard(spared: tuple[str, ...]) -> str:
    """The script that sets WebVoyager's guard: a space pressed outside the ``spared`` field types does nothing."""
    let_through = " && ".join(f"event.target.type != '{kind}'" for kind in spared)
    return f"window.onkeydown = function (event) {{ if (event.keyCode == 32 && {let_through}) {{ event.preventDefault(); }} }};"


async def _evaluate(cdp: Any, expression: str) -> Any:
    answer = await cdp.cdp_client.send.Runtime.evaluate(
        params={"expression": expression, "returnByValue": True}, session_id=cdp.session_id
    )
    return (answer.get("result") or {}).get("value")


async def start_as_webvoyager(session: Any) -> None:
    """Click the body of the page ``session`` (a started browser-use session) shows, then guard the
    space key, as WebVoyager does once its page has loaded. Never raises: upstream passes over a
    failed click, and a page that cannot take the guard is read as it is."""
    try:
        cdp = await session.get_or_create_cdp_session()
        point = await _evaluate(cdp, _BODY_CLICK_POINT)
        if isinstance(point, list) and len(point) == 2:
            x, y = point
            # Selenium's click: the pointer moved there, pressed and released, with no pause.
            for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
                params: dict[str, Any] = {"type": kind, "x": x, "y": y}
                if kind != "mouseMoved":
                    params |= {"button": "left", "clickCount": 1}
                await cdp.cdp_client.send.Input.dispatchMouseEvent(params=params, session_id=cdp.session_id)
        await _evaluate(cdp, space_key_guard(START_SPARED))
    except Exception as exc:
        logger.debug("WebVoyager's start on the page failed: %s", exc)


async def guard_before_typing(session: Any) -> None:
    """Set WebVoyager's typing guard on the page ``session`` shows (a failure passed over, as upstream)."""
    with contextlib.suppress(Exception):
        await _evaluate(await session.get_or_create_cdp_session(), space_key_guard(TYPING_SPARED))


# WebVoyager's script before each click (A webvoyager/run.py l.378), on the element clicked.
_TARGET_SELF = "function () { this.setAttribute('target', '_self'); }"


async def _call_on(session: Any, node: Any, declaration: str) -> Any:
    """Call ``declaration`` (a JavaScript function) with ``node``, an element of the page ``session``
    shows, as ``this``; the DevTools session of the node's frame is returned, for what follows."""
    cdp = await session.cdp_client_for_node(node)
    resolved = await cdp.cdp_client.send.DOM.resolveNode(
        params={"backendNodeId": node.backend_node_id}, session_id=cdp.session_id
    )
    await cdp.cdp_client.send.Runtime.callFunctionOn(
        params={"functionDeclaration": declaration, "objectId": resolved["object"]["objectId"]},
        session_id=cdp.session_id,
    )
    return cdp


async def open_in_same_tab(session: Any, node: Any) -> None:
    """Set the ``target`` of ``node`` (an element of the page ``session`` shows) to ``_self``, as
    WebVoyager does before each click. Never raises: the click goes on, as upstream's would."""
    try:
        await _call_on(session, node, _TARGET_SELF)
    except Exception as exc:
        logger.debug("Setting the clicked element's target failed: %s", exc)


# Alt held while an arrow key is pressed, as Selenium's ActionChains sends them: the Alt key (its bit
# in CDP's modifiers is 1), the arrow with Alt's bit, the arrow up, Alt up.
_ALT = {"key": "Alt", "code": "AltLeft", "windowsVirtualKeyCode": 18}
_ARROWS = {True: ("ArrowDown", 40), False: ("ArrowUp", 38)}


async def scroll_window(session: Any, pixels: int) -> None:
    """Scroll the window of the page ``session`` shows by ``pixels`` (up when negative), as
    WebVoyager's ``window.scrollBy`` does."""
    await _evaluate(await session.get_or_create_cdp_session(), f"window.scrollBy(0, {int(pixels)});")


async def scroll_element(session: Any, node: Any, *, down: bool) -> None:
    """Focus ``node`` and press Alt+ArrowDown (``down``) or Alt+ArrowUp on it, as WebVoyager scrolls an
    element. Raises as upstream's does when the element cannot be focused or keys cannot be sent."""
    cdp = await _call_on(session, node, "function () { this.focus(); }")
    key, code = _ARROWS[down]
    arrow = {"key": key, "code": key, "windowsVirtualKeyCode": code, "modifiers": 1}
    for event in (
        {"type": "rawKeyDown", **_ALT, "modifiers": 1},
        {"type": "rawKeyDown", **arrow},
        {"type": "keyUp", **arrow},
        {"type": "keyUp", **_ALT, "modifiers": 0},
    ):
        await cdp.cdp_client.send.Input.dispatchKeyEvent(params=event, session_id=cdp.session_id)


def _key_of(char: str) -> dict[str, Any]:
    """The key a US keyboard types ``char`` with, as CDP names it (key, code, virtual key code, Shift).
    Written here: browser-use keeps its table private, and Playwright's is in its JavaScript."""
    if char == " ":
        return {"key": " ", "code": "Space", "windowsVirtualKeyCode": 32}
    if char.isascii() and char.isalpha():
        return {
            "key": char,
            "code": f"Key{char.upper()}",
            "windowsVirtualKeyCode": ord(char.upper()),
            "modifiers": 8 if char.isupper() else 0,
        }
    if char.isascii() and char.isdigit():
        return {"key": char, "code": f"Digit{char}", "windowsVirtualKeyCode": ord(char)}
    return {"key": char}


async def type_keys(session: Any, text: str) -> None:
    """Type ``text`` into the focused element of the page ``session`` shows as Selenium's send_keys
    does: each character one key press whose keydown carries its text, so a page that prevents the
    keydown (WebVoyager's guard against the space key, a field that filters keys) stops the character
    as it stops Selenium's; a newline is the Enter key. (browser-use sends the text in an event of its
    own after the keydown, which no handler can prevent.)"""
    cdp = await session.get_or_create_cdp_session()
    for char in text:
        if char == "\n":
            key = {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13}
            typed = "\r"
        else:
            key, typed = _key_of(char), char
        await cdp.cdp_client.send.Input.dispatchKeyEvent(
            params={"type": "keyDown", **key, "text": typed, "unmodifiedText": typed}, session_id=cdp.session_id
        )
        await cdp.cdp_client.send.Input.dispatchKeyEvent(params={"type": "keyUp", **key}, session_id=cdp.session_id)
