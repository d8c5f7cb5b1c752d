"""Replay a recorded test in Python Playwright on a fresh page of the shared Chromium: no model call.

Each step waits for its element (or its assertion) up to ``step_timeout_s``; a passing test never
waits longer than the page takes. A failed test is run once more: passing then is *flaky*.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urljoin

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Locator, Page, expect

from webgen_agent.tools.replay.views import RecordedTest, ReplayStatus, ReplayStep, ReplayVerdict, Target

if TYPE_CHECKING:
    from webgen_agent.tools.browser import SharedBrowser

STEP_TIMEOUT_S = 3.0
_ERROR_LIMIT = 300
PAGE_TEXT_LIMIT = 200  # of the failing page's text, for the coder


def resolve(page: Page, target: Target) -> Locator:
    """The Playwright locator ``target`` names (exact names and texts: no partial matches)."""
    if target.by == "test_id":
        found = page.get_by_test_id(target.value)
    elif target.by == "role":
        found = page.get_by_role(cast(Any, target.value), name=target.name, exact=True)
    elif target.by == "label":
        found = page.get_by_label(target.value, exact=True)
    elif target.by == "placeholder":
        found = page.get_by_placeholder(target.value, exact=True)
    elif target.by == "text":
        found = page.get_by_text(target.value, exact=True)
    else:
        found = page.locator(target.value)
    return found.first if target.first else found


def url_pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@dataclass
class Attempt:
    """One run of a test: where it stopped, if it did."""

    failed_step: int | None = None
    unmatched: bool = False
    error: str | None = None
    screenshot_png: bytes | None = None
    page_text: str = ""

    @property
    def passed(self) -> bool:
        return self.failed_step is None


class Unmatched(Exception):
    """The step's locator found no element."""


async def run_step(page: Page, base_url: str, step: ReplayStep, timeout_s: float) -> None:
    """Carry out one step; raises ``Unmatched``, ``AssertionError`` or a Playwright error."""
    ms = timeout_s * 1000
    if step.kind == "goto":
        await page.goto(urljoin(base_url, step.value or "/"), timeout=max(ms, 15_000))
        return
    if step.kind == "go_back":
        await page.go_back(timeout=ms)
        return
    if step.kind == "press":
        await page.keyboard.press(step.value or "Enter")
        return
    if step.kind == "expect_url":
        await expect(page).to_have_url(url_pattern(step.value or ""), timeout=ms)
        return
    if step.kind == "expect_count":
        await expect(page.locator(step.value or "*")).to_have_count(step.count or 0, timeout=ms)
        return
    assert step.target is not None, f"{step.kind} needs a target"
    found = resolve(page, step.target)
    if step.kind == "expect_text":
        await expect(found.first).to_be_visible(timeout=ms)
        return
    try:
        await found.first.wait_for(state="visible", timeout=ms)
    except PlaywrightError as exc:
        raise Unmatched(f"no element matches {step.target.describe()}") from exc
    if step.kind == "click":
        await found.click(timeout=ms)
    elif step.kind == "fill":
        await found.fill(step.value or "", timeout=ms)
    elif step.kind == "select":
        await found.select_option(label=step.value or "", timeout=ms)


def _short(error: BaseException) -> str:
    # Playwright appends its call log and an aria snapshot: the first part says what failed.
    text = " ".join(str(error).split("Call log:")[0].split()) or type(error).__name__
    return text if len(text) <= _ERROR_LIMIT else text[: _ERROR_LIMIT - 3] + "..."


async def _moment(page: Page) -> tuple[bytes | None, str]:
    """The page when a step failed: a screenshot and the start of its visible text."""
    try:
        png = await page.screenshot(type="png", timeout=5000)
        text = str(await page.evaluate("() => document.body ? document.body.innerText : ''"))
    except PlaywrightError:
        return None, ""
    return png, " ".join(text.split())[:PAGE_TEXT_LIMIT]


async def run_attempt(page: Page, base_url: str, test: RecordedTest, timeout_s: float) -> Attempt:
    for position, step in enumerate(test.steps):
        try:
            await run_step(page, base_url, step, timeout_s)
        except (Unmatched, AssertionError, PlaywrightError) as exc:
            png, text = await _moment(page)
            return Attempt(
                position, unmatched=isinstance(exc, Unmatched), error=_short(exc), screenshot_png=png, page_text=text
            )
    return Attempt()


async def attempt_on_page(
    browser: SharedBrowser,
    base_url: str,
    test: RecordedTest,
    *,
    viewport: tuple[int, int],
    offline: bool,
    timeout_s: float,
) -> Attempt:
    """One run of ``test`` on a fresh page; run once more when Chromium died under it (crashed,
    killed): a dead browser is not the site's failure."""

    async def attempt() -> Attempt:
        async with browser.confined_page(base_url, viewport=viewport, offline=offline) as page:
            return await run_attempt(page, base_url, test, timeout_s)

    return await browser.once_more_if_died(
        attempt, failed=lambda done: not done.passed, what=f"replaying {test.name!r}"
    )


async def replay_test(
    browser: SharedBrowser,
    base_url: str,
    test: RecordedTest,
    *,
    viewport: tuple[int, int] = (1280, 800),
    offline: bool = False,
    step_timeout_s: float = STEP_TIMEOUT_S,
) -> ReplayVerdict:
    """Replay ``test`` against the site at ``base_url``; once more if it fails (flaky when that passes)."""
    started = time.monotonic()
    attempts: list[Attempt] = []
    for _ in range(2):
        attempts.append(
            await attempt_on_page(browser, base_url, test, viewport=viewport, offline=offline, timeout_s=step_timeout_s)
        )
        if attempts[-1].passed:
            break
    first = attempts[0]
    status: ReplayStatus
    if first.passed:
        status = "passed"
    elif attempts[-1].passed:
        status = "flaky"
    else:
        status = "unmatched" if attempts[-1].unmatched else "failed"
    return ReplayVerdict(
        test=test.name,
        recorded_at_step=test.recorded_at_step,
        status=status,
        failed_step=first.failed_step,
        failed_action=test.steps[first.failed_step].describe() if first.failed_step is not None else None,
        error=first.error,
        screenshot_png=first.screenshot_png,
        page_text=first.page_text,
        seconds=round(time.monotonic() - started, 3),
        attempts=len(attempts),
    )


async def replay_tests(
    browser: SharedBrowser,
    base_url: str,
    tests: list[RecordedTest],
    *,
    viewport: tuple[int, int] = (1280, 800),
    offline: bool = False,
) -> list[ReplayVerdict]:
    """Every test, side by side (each on its own page; the browser bounds how many at once)."""
    return list(
        await asyncio.gather(*(replay_test(browser, base_url, t, viewport=viewport, offline=offline) for t in tests))
    )
