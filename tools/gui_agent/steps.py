"""Per-step bookkeeping of a GUI agent run: the limits the step hooks enforce and what the run did.

The action budget and the deadline are checked by browser-use's step hooks; the model client counts
calls in a row that failed at the endpoint; the run's history is read back into ``GuiAction``s, its
errors, and why it stopped.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from webgen_agent.tools.gui_agent.views import ElementLocator, GuiAction, GuiFrame, StoppedReason
from webgen_agent.tools.gui_agent.webvoyager_page import start_as_webvoyager

if TYPE_CHECKING:
    from browser_use import Agent
    from browser_use.dom.views import DOMInteractedElement

logger = logging.getLogger(__name__)

ENDPOINT_FAILURE_LIMIT = 2  # model calls in a row that failed even after retries: stop, the endpoint is down
_TEXT_LIMIT = 300
_TARGET_LIMIT = 80
# Attributes that name an element when it has no accessible name, in the order tried.
_NAMING_ATTRIBUTES = ("aria-label", "placeholder", "title", "alt", "name", "id", "value", "href")


@dataclass
class Budget:
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
    # The page settles before each read of it (``GuiAgentSettings.settle_after_*``).
    settle_after_load_s: float = 0.0
    settle_after_action_s: dict[str, float] = field(default_factory=dict)
    loaded_at: float | None = None  # when the page was loaded (None: by the run's own first action)
    webvoyager_start: bool = False  # start on the page as WebVoyager does, before the first step's wait


def settle_seconds(agent: Agent, after: dict[str, float]) -> float:
    """How long the page is left to settle after the step that just ended: the longest wait of its
    actions by name, or ``after["failed"]`` when one of them failed."""
    if not after or not agent.history.history:
        return 0.0
    item = agent.history.history[-1]
    if item.model_output is None:  # an unreadable answer: no action was taken
        return 0.0
    if any(result.error for result in item.result):
        return after.get("failed", 0.0)
    names = [name for action in item.model_output.action for name in action.model_dump(exclude_unset=True)]
    return max((after.get(name, 0.0) for name in names), default=0.0)


def short(text: str | None) -> str | None:
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


async def capture(agent: Agent, timeout_s: float = 10) -> bytes | None:
    try:
        return await asyncio.wait_for(agent.browser_session.take_screenshot(), timeout=timeout_s)
    except Exception as exc:  # a dead page must not turn a finished run into an error
        logger.debug("final screenshot failed: %s", exc)
        return None


def step_hooks(budget: Budget) -> tuple[Any, Any]:
    """on_step_start / on_step_end hooks enforcing the action budget and the deadline."""

    async def on_step_start(agent: Agent) -> None:
        budget.steps_started += 1
        remaining = budget.max_actions - budget.used
        if budget.steps_started == 1 and budget.webvoyager_start:
            await start_as_webvoyager(agent.browser_session)
        if budget.steps_started == 1 and budget.settle_after_load_s:
            loaded_at = budget.loaded_at if budget.loaded_at is not None else time.monotonic()
            await _settle(budget, loaded_at + budget.settle_after_load_s - time.monotonic())
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
            budget.final_png = await capture(agent)
        if stopping:
            agent.stop()
        else:
            await _settle(budget, settle_seconds(agent, budget.settle_after_action_s))

    return on_step_start, on_step_end


async def _settle(budget: Budget, seconds: float) -> None:
    """Leave the page ``seconds`` to settle, never past the run's deadline."""
    seconds = min(seconds, budget.deadline - time.monotonic())
    if seconds > 0:
        await asyncio.sleep(seconds)


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
def endpoint_watching_chat() -> type:
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


def element_label(element: DOMInteractedElement | None) -> str | None:
    """An element as a person reads it: its role (or tag) and its accessible name or a naming attribute."""
    if element is None:
        return None
    attributes = element.attributes or {}
    kind = attributes.get("role") or element.node_name.lower()
    if element.ax_name and element.ax_name.strip():
        return f'{kind} "{short(element.ax_name[:_TARGET_LIMIT])}"'
    for name in _NAMING_ATTRIBUTES:
        if attributes.get(name, "").strip():
            return f'{kind} {name}="{short(attributes[name][:_TARGET_LIMIT])}"'
    return kind


# ARIA's implicit roles of the tags a site test acts on (an explicit role attribute wins). Password
# inputs have none: they are found by label or placeholder.
_INPUT_ROLES = {
    **dict.fromkeys(("", "text", "email", "tel", "url"), "textbox"),
    **dict.fromkeys(("button", "submit", "reset", "image"), "button"),
    "checkbox": "checkbox",
    "radio": "radio",
    "number": "spinbutton",
    "search": "searchbox",
    "range": "slider",
}
_TAG_ROLES = {"button": "button", "textarea": "textbox", "li": "listitem", "option": "option", "img": "img"}
_TEXT_ENTRY = {"input", "textarea", "select"}


def implicit_role(tag: str, attributes: dict[str, str]) -> str | None:
    """The element's ARIA role: its role attribute, else the one its tag implies (None if none we use)."""
    if attributes.get("role", "").strip():
        return attributes["role"].split()[0]
    if tag == "input":
        return _INPUT_ROLES.get(attributes.get("type", "").lower())
    if tag == "a":
        return "link" if "href" in attributes else None
    if tag == "select":
        return "listbox" if "multiple" in attributes else "combobox"
    if len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
        return "heading"
    return _TAG_ROLES.get(tag)


def element_locator(element: DOMInteractedElement | None) -> ElementLocator | None:
    """What identifies the element for a replayed test: role and name, test id, label, placeholder, text."""
    if element is None:
        return None
    attributes = element.attributes or {}
    tag = element.node_name.lower()
    name = " ".join((element.ax_name or "").split()) or None

    def attribute(key: str) -> str | None:
        return " ".join(attributes.get(key, "").split()) or None

    return ElementLocator(
        tag=tag,
        role=implicit_role(tag, attributes),
        name=name,
        test_id=attribute("data-testid"),
        label=attribute("aria-label"),
        placeholder=attribute("placeholder"),
        text=name if tag not in _TEXT_ENTRY and name and len(name) <= _TARGET_LIMIT else None,
        element_id=attribute("id"),
    )


def collect_history(agent: Agent) -> tuple[list[GuiAction], list[str], int]:
    actions: list[GuiAction] = []
    errors: list[str] = []
    steps = 0
    for item in agent.history.history:
        step = item.metadata.step_number if item.metadata is not None else 0
        if step > 0:
            steps += 1
        for result in item.result:
            if result.error and (item.model_output is None or step == 0):
                errors.append(short(result.error) or "")
        if item.model_output is None or step == 0:
            continue  # a failed model call, or the initial navigation
        elements = list(item.state.interacted_element or [])
        for position, (action, result) in enumerate(zip(item.model_output.action, item.result, strict=False)):
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
                    target=element_label(elements[position] if position < len(elements) else None),
                    locator=element_locator(elements[position] if position < len(elements) else None),
                    result=short(result.extracted_content or result.long_term_memory),
                    error=short(result.error),
                )
            )
            if result.error:
                errors.append(f"step {step} {name}: {short(result.error)}")
    return actions, errors, steps


def collect_messages(agent: Agent) -> list[str]:
    """The agent's own words at each step that got a model answer: what it judged, kept in mind and
    meant to do next, then the actions it chose (as it wrote them)."""
    messages = []
    for item in agent.history.history:
        step = item.metadata.step_number if item.metadata is not None else 0
        output = item.model_output
        if output is None or step == 0:
            continue
        parts = [
            f"{label}: {text.strip()}"
            for label, text in (
                ("Thinking", output.thinking),
                ("Evaluation of the previous goal", output.evaluation_previous_goal),
                ("Memory", output.memory),
                ("Next goal", output.next_goal),
            )
            if text and text.strip()
        ]
        chosen = [action.model_dump(exclude_unset=True, exclude_none=True) for action in output.action]
        parts.append("Action: " + "; ".join(json.dumps(a, ensure_ascii=False) for a in chosen if a))
        messages.append("\n".join(parts))
    return messages


def why_stopped(agent: Agent, budget: Budget, timed_out: bool, max_steps: int) -> StoppedReason:
    if agent.history.is_done():
        return "done"
    if timed_out or budget.deadline_hit:
        return "timeout"
    if budget.endpoint_down:
        return "error"
    if budget.cap_reached or agent.state.n_steps > max_steps:
        return "max_actions"
    return "error"


def collect_frames(agent: Agent) -> list[GuiFrame]:
    """The screenshot the agent saw before each of its steps (reads files: call in a thread).

    browser-use keeps them as files in the agent's folder, which is removed after the run.
    """
    frames = []
    for item in agent.history.history:
        step = item.metadata.step_number if item.metadata is not None else 0
        encoded = item.state.get_screenshot() if item.model_output is not None and step > 0 else None
        if encoded:
            frames.append(GuiFrame(step=step, url=item.state.url, png=base64.b64decode(encoded)))
    return frames


def last_history_png(agent: Agent) -> bytes | None:
    for item in reversed(agent.history.history):
        encoded = item.state.get_screenshot()
        if encoded:
            return base64.b64decode(encoded)
    return None
