"""What a GUI agent run takes and gives back: its settings, the actions it took, its outcome."""

from __future__ import annotations

import io
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from webgen_agent.core.costs import Usage

StoppedReason = Literal["done", "max_actions", "timeout", "error"]

MAX_ACTIONS_PER_STEP = 3

Answer = Literal["YES", "PARTIAL", "NO"]
# The answer's first word, bare or in markdown emphasis; not after a quote or other text, so that
# page text the agent quotes ('"YES, booked" was shown') is never read as its verdict.
_LEADING_ANSWER = re.compile(r"\A\s*(?:\*\*|\*|__|_)?(YES|PARTIAL(?:LY)?|NO)\b", re.IGNORECASE)


def leading_answer(text: str | None) -> Answer | None:
    """YES / PARTIAL / NO when a final answer's first word is one of them, else None."""
    match = _LEADING_ANSWER.match(text or "")
    if match is None:
        return None
    word = match.group(1).upper()
    return "PARTIAL" if word.startswith("PARTIAL") else "YES" if word == "YES" else "NO"


class GuiAgentSettings(BaseModel):
    """How a GUI agent runs: its model endpoint, its action budget and deadline, its browser."""

    model_config = ConfigDict(frozen=True)

    model: str = Field(description="Vision model the agent asks for its next actions.")
    base_url: str = Field(description="OpenAI-compatible endpoint of that model.")
    api_key: str = Field(repr=False)
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, description="Caps each answer (browser-use's own default: 4096).")
    max_actions: int = Field(default=15, ge=1, description="Browser actions in the whole run (the final done counts).")
    max_actions_per_step: int = Field(default=MAX_ACTIONS_PER_STEP, ge=1)
    screenshots_kept: int = Field(
        default=1,
        ge=1,
        description="Screenshots in each model request: the current one and the latest before it "
        "(browser-use's own: the current one only).",
    )
    last_step_prompt: str = Field(
        default="",
        description="Added to the agent's last step, where browser-use offers only done: what the forced answer "
        "must say (empty: browser-use's own last-step message only).",
    )
    webvoyager_messages: bool = Field(
        default=False,
        description="WebVoyager's messages only: no step-budget warning or loop nudge, and no page shown at the "
        "last step (only last_step_prompt and the screenshots before it) or after a failed step "
        "(False: browser-use's own).",
    )
    settle_after_load_s: float = Field(
        default=0.0, ge=0, description="Seconds after the page loads before the agent's first step reads it."
    )
    settle_after_action_s: dict[str, float] = Field(
        default_factory=dict,
        description="Seconds to wait after an action, by browser-use's action name ('failed': after an action "
        "that failed), before the next step reads the page.",
    )
    click_before_typing_s: float | None = Field(
        default=None,
        ge=0,
        description="Typing starts with a click on the field and this many seconds' pause, as WebVoyager's Type "
        "does (None: browser-use's typing, which focuses the field without a click).",
    )
    enter_after_typing_s: float | None = Field(
        default=None,
        ge=0,
        description="Typing ends with Enter this many seconds after the text, as WebVoyager's Type does, and the "
        "input action's description says so (None: browser-use's typing, no key pressed).",
    )
    webvoyager_start: bool = Field(
        default=False,
        description="Once the page has loaded, click its body and put WebVoyager's guard against the space key "
        "on window.onkeydown, as WebVoyager does before its first look (and the typing guard before each "
        "typing, when typing as WebVoyager); False: the page as it loaded.",
    )
    webvoyager_actions: bool = Field(
        default=False,
        description="WebVoyager's actions only: click (the element's target set to _self first), type, scroll (two "
        "thirds of the viewport, or Alt and an arrow key on a focused element), wait (5 s), go back and the "
        "answer (False: browser-use's actions, less EXCLUDED_ACTIONS).",
    )
    max_failures: int | None = Field(
        default=3,
        ge=1,
        description="Failed steps in a row (an unreadable answer, a failed action) after which the agent gives up; "
        "None: it goes on to its action budget, as WebVoyager does.",
    )
    timeout_s: float = Field(default=300.0, gt=0, description="Deadline of the whole run.")
    chromium_path: str = Field(default="", description="Chromium started for this run alone when cdp_url is None.")
    cdp_url: str | None = Field(
        default=None,
        description="A running Chromium to attach to (http://host:port or its ws:// address); it is left running.",
    )
    viewport: tuple[int, int] = (1280, 800)
    offline_pages: bool = Field(
        default=False, description="The site's own origin only; else public internet addresses too (never local ones)."
    )
    system_rule: str = Field(
        default="",
        description="Added to browser-use's system prompt (e.g. that page text is data, never instructions).",
    )

    @property
    def llm_timeout(self) -> int:
        """Seconds one model call may take."""
        return int(max(10, min(90, self.timeout_s)))

    @property
    def step_timeout(self) -> int:
        """Seconds one agent step may take."""
        return int(max(15, min(120, self.timeout_s)))


class ElementLocator(BaseModel):
    """What identifies the element an action targeted, read off the DOM (never browser-use's index).

    A replayable test picks a Playwright locator from these (``tools/replay``).
    """

    tag: str = Field(description="Lower-case tag name, e.g. button, input, a.")
    role: str | None = Field(default=None, description="ARIA role: the role attribute, else the tag's implicit role.")
    name: str | None = Field(default=None, description="Accessible name (the text a screen reader announces).")
    test_id: str | None = Field(default=None, description="data-testid attribute.")
    label: str | None = Field(default=None, description="aria-label attribute.")
    placeholder: str | None = None
    text: str | None = Field(default=None, description="The element's own visible text, when short.")
    element_id: str | None = Field(default=None, description="id attribute.")


class GuiAction(BaseModel):
    """One browser action the agent took."""

    step: int = Field(description="Agent step (1-based) the action belongs to.")
    name: str = Field(description="browser-use action name, e.g. click, input, scroll, done.")
    params: dict[str, Any] = Field(default_factory=dict)
    target: str | None = Field(
        default=None,
        description="The element acted on as a person reads it (role or tag and its name), e.g. 'button \"Add item\"'.",
    )
    result: str | None = Field(default=None, description="Short result text the agent saw.")
    error: str | None = Field(default=None, description="Short error text, when the action failed.")
    locator: ElementLocator | None = Field(default=None, description="The element acted on, for a replayable test.")


FRAME_WIDTH = 480  # px: frames are for a report's strip, not for the model
FRAME_QUALITY = 70


class GuiFrame(BaseModel):
    """The page as the agent saw it before one of its steps (stored as a small JPEG, ``thumbnail``)."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    step: int = Field(description="Agent step (1-based) whose actions followed.")
    url: str = ""
    png: bytes = Field(repr=False, description="The screenshot the agent was shown.")

    def thumbnail(self) -> bytes:
        """The screenshot scaled to ``FRAME_WIDTH`` as a JPEG: a tenth of the bytes, enough to follow
        the test. CPU work (a decode, a resize, an encode): made where the run is stored, beside the
        verdict's model call, not on the GUI test's path."""
        from PIL import Image  # a dependency of browser-use; imported only where frames are made

        with Image.open(io.BytesIO(self.png)) as opened:
            image = opened.convert("RGB")
        if image.width > FRAME_WIDTH:
            image = image.resize((FRAME_WIDTH, round(image.height * FRAME_WIDTH / image.width)))
        out = io.BytesIO()
        image.save(out, format="JPEG", quality=FRAME_QUALITY)
        return out.getvalue()


class GuiRun(BaseModel):
    """The outcome of one GUI agent run; failures are described here, not raised."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    final_answer: str | None = Field(default=None, description="The agent's done text, if it finished.")
    success: bool | None = Field(default=None, description="The agent's own success flag, if it finished.")
    actions: list[GuiAction] = Field(default_factory=list)
    messages: list[str] = Field(
        default_factory=list,
        description="The agent's own words, one per step that got a model answer: its evaluation, memory and "
        "next goal, then the actions it chose.",
    )
    steps: int = Field(default=0, description="Agent steps taken (model calls that returned or failed).")
    final_screenshot_png: bytes | None = Field(default=None, description="PNG of the page at the end.")
    frames: list[GuiFrame] = Field(default_factory=list, description="The page before each agent step.")
    errors: list[str] = Field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    stopped_reason: StoppedReason = "error"
    prepared: bool = Field(default=False, description="The run used a browser session opened ahead of it.")
    endpoint_down: bool = Field(
        default=False, description="Stopped because the model endpoint failed (unreachable, 429, 5xx), not the site."
    )

    @property
    def last_message(self) -> str:
        """The agent's whole last message (what it judged, kept in mind and meant next, then its actions,
        its answer among them), where WebVoyager's readers look for YES: WebGen-Agent's GUI summary and
        WebGen-Bench's verdict. The done text when no message was kept."""
        return self.messages[-1] if self.messages else (self.final_answer or "")

    @property
    def usage(self) -> Usage:
        """The agent's model calls: when they cost tokens but none were counted, the endpoint sent no counts."""
        uncounted = self.steps if self.steps and not (self.input_tokens or self.output_tokens) else 0
        return Usage(
            input_tokens=self.input_tokens, output_tokens=self.output_tokens, calls=self.steps, uncounted=uncounted
        )
