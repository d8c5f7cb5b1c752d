"""Turn a passing GUI-agent run into a recorded test.

The agent's successful actions are replayed once on a fresh page of the shared Chromium, in order:
each element is found by a stable locator derived from the element the agent acted on (test id,
role and accessible name, label, placeholder, visible text, id; whichever matches exactly one
element first), and what each action changed on the page becomes the assertions after it: text
that appeared (the agent's typed input first), a count of list items, rows or checked boxes that
changed, a URL that changed. Recording stops at the first action it cannot reproduce, so the test
holds the part of the run that is deterministic. The test is then replayed once more from scratch;
one that does not pass is not kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from webgen_agent.tools.gui_agent.views import ElementLocator, GuiAction, GuiRun
from webgen_agent.tools.replay.runner import Unmatched, replay_test, resolve, run_step
from webgen_agent.tools.replay.views import RecordedTest, ReplayStep, StepKind, Target

if TYPE_CHECKING:
    from webgen_agent.tools.browser import SharedBrowser

# Elements whose number a function changes: items of a list, rows of a table, checked boxes.
COUNTED = ("li", "tr", "[role=listitem]", "[role=row]", "article", "input[type=checkbox]:checked")
SETTLE_MS = 300  # after an action, before reading what it changed (recording only; replays poll)
MAX_TEXT_ASSERTIONS = 2
MAX_LINE = 80
_ELEMENT_ACTIONS: dict[str, StepKind] = {"click": "click", "input": "fill", "select_dropdown": "select"}
# Actions that change nothing a test checks.
_PASSIVE = {"done", "scroll", "wait", "find_elements", "search_page", "get_dropdown_options", "find_text"}
_SNAPSHOT = """(selectors) => ({
  text: document.body ? document.body.innerText : "",
  counts: selectors.map((s) => document.querySelectorAll(s).length),
  url: location.href,
})"""


def targets(locator: ElementLocator) -> list[Target]:
    """Candidate locators, most stable first."""
    found: list[Target] = []
    if locator.test_id:
        found.append(Target(by="test_id", value=locator.test_id))
    if locator.role and locator.name:
        found.append(Target(by="role", value=locator.role, name=locator.name))
    if locator.label:
        found.append(Target(by="label", value=locator.label))
    if locator.placeholder:
        found.append(Target(by="placeholder", value=locator.placeholder))
    if locator.text:
        found.append(Target(by="text", value=locator.text))
    if locator.element_id:
        found.append(Target(by="css", value=f"[id={json.dumps(locator.element_id)}]"))
    return found


async def choose_target(page: Page, locator: ElementLocator) -> Target | None:
    """The first candidate matching exactly one element; else the first matching several (first of them)."""
    several: Target | None = None
    for _ in range(2):  # the element may still be appearing: look again once, a second later
        for candidate in targets(locator):
            count = await resolve(page, candidate).count()
            if count == 1:
                return candidate
            if count > 1 and several is None:
                several = candidate.model_copy(update={"first": True})
        if several is not None:
            return several
        await page.wait_for_timeout(1000)
    return None


def url_suffix_pattern(url: str) -> str:
    """A regular expression (valid in Python and JavaScript) for a URL ending in ``url``'s path."""
    parts = urlsplit(url)
    suffix = parts.path + (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    return "".join(f"\\{c}" if c in r"\^$.|?*+()[]{}/" else c for c in suffix) + "$"


@dataclass
class Snapshot:
    lines: list[str]
    counts: list[int]
    url: str


async def snapshot(page: Page) -> Snapshot:
    seen = await page.evaluate(_SNAPSHOT, list(COUNTED))
    lines = [" ".join(line.split()) for line in str(seen["text"]).splitlines()]
    return Snapshot([line for line in lines if line], [int(c) for c in seen["counts"]], str(seen["url"]))


async def assertions(page: Page, before: Snapshot, after: Snapshot, typed: list[str]) -> list[ReplayStep]:
    """What the action changed, as assertions that hold on the page now."""
    found: list[ReplayStep] = []
    if after.url != before.url:
        found.append(ReplayStep(kind="expect_url", value=url_suffix_pattern(after.url)))
    for selector, was, now in zip(COUNTED, before.counts, after.counts, strict=True):
        if was != now:
            found.append(ReplayStep(kind="expect_count", value=selector, count=now))
    old = set(before.lines)
    new = list(dict.fromkeys(line for line in after.lines if line not in old and len(line) <= MAX_LINE))
    # The text the agent typed showing up is what most functions are about: those lines first.
    new.sort(key=lambda line: not any(t and t in line for t in typed))
    for line in new:
        if sum(s.kind == "expect_text" for s in found) >= MAX_TEXT_ASSERTIONS:
            break
        target = Target(by="text", value=line)
        if await resolve(page, target).first.is_visible():
            found.append(ReplayStep(kind="expect_text", target=target))
    return found


async def planned_step(page: Page, base_url: str, action: GuiAction) -> ReplayStep | None:
    """The replay step of one agent action; None when it cannot be reproduced here."""
    if action.name in _ELEMENT_ACTIONS:
        target = await choose_target(page, action.locator) if action.locator else None
        if target is None:
            return None
        value = action.params.get("text") if action.name != "click" else None
        return ReplayStep(kind=_ELEMENT_ACTIONS[action.name], target=target, value=value, agent_step=action.step)
    if action.name == "send_keys" and action.params.get("keys"):
        return ReplayStep(kind="press", value=str(action.params["keys"]), agent_step=action.step)
    if action.name == "go_back":
        return ReplayStep(kind="go_back", agent_step=action.step)
    if action.name == "navigate":
        url = str(action.params.get("url", ""))
        if urlsplit(url).netloc and urlsplit(url).netloc != urlsplit(base_url).netloc:
            return None  # off the site: not the site's function
        parts = urlsplit(url)
        path = (
            parts.path + (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment else "")
        )
        return ReplayStep(kind="goto", value=path or "/", agent_step=action.step)
    return None


async def record_steps(page: Page, url: str, run: GuiRun, timeout_s: float = 3.0) -> list[ReplayStep]:
    """The run's successful actions, reproduced on ``page``, each followed by what it changed."""
    parts = urlsplit(url)
    start = ReplayStep(kind="goto", value=parts.path + (f"?{parts.query}" if parts.query else "") or "/")
    await run_step(page, url, start, timeout_s)
    await page.wait_for_timeout(SETTLE_MS)
    steps = [start]
    typed: list[str] = []
    for action in run.actions:
        if action.error or action.name in _PASSIVE:
            continue
        step = await planned_step(page, url, action)
        if step is None:
            break  # later actions may depend on this one: the test ends before it
        before = await snapshot(page)
        try:
            await run_step(page, url, step, timeout_s)
        except (Unmatched, AssertionError, PlaywrightError):
            break
        await page.wait_for_timeout(SETTLE_MS)
        if step.kind == "fill" and step.value:
            typed.append(step.value)
        steps.append(step)
        steps += await assertions(page, before, await snapshot(page), typed)
    return steps


async def recorded_steps(
    browser: SharedBrowser, url: str, run: GuiRun, *, viewport: tuple[int, int], offline: bool
) -> list[ReplayStep] | None:
    """``record_steps`` on a fresh page; recorded again once when Chromium died under it (crashed,
    killed): what a dead browser cut short is not the site's behaviour. None when nothing replays."""

    async def record() -> list[ReplayStep] | None:
        async with browser.confined_page(url, viewport=viewport, offline=offline) as page:
            try:
                return await record_steps(page, url, run)
            except (AssertionError, PlaywrightError, Unmatched):
                return None

    # Any recording: one that a death cut short ends early without an error.
    return await browser.once_more_if_died(record, failed=lambda _: True, what=f"recording a test of {url}")


async def record_test(
    browser: SharedBrowser,
    url: str,
    run: GuiRun,
    *,
    name: str,
    instruction: str,
    step: int,
    covers_all: bool,
    score: int,
    viewport: tuple[int, int] = (1280, 800),
    offline: bool = False,
) -> RecordedTest | None:
    """The recorded test of a passing run, or None when nothing of it replays deterministically."""
    steps = await recorded_steps(browser, url, run, viewport=viewport, offline=offline)
    if steps is None:
        return None
    test = RecordedTest(
        name=name,
        instruction=instruction,
        recorded_at_step=step,
        covers_all=covers_all,
        source_score=score,
        steps=steps,
    )
    if test.actions == 0 or test.assertions == 0:
        return None  # nothing done, or nothing observable to check
    verdict = await replay_test(browser, url, test, viewport=viewport, offline=offline)
    return test if verdict.status == "passed" else None
