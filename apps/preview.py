"""``webgen-agent preview``: run a project folder with the executor and screenshot its landing page."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from webgen_agent.core.context import find_chromium
from webgen_agent.tools.browser import SharedBrowser
from webgen_agent.tools.process import ProcessRegistry
from webgen_agent.tools.site import SiteRunner


async def preview_folder(
    folder: Path, screenshot: Path, *, viewport: tuple[int, int], start_timeout_s: float
) -> dict[str, Any]:
    """Install if needed, start, load the page; write the PNG; report what happened."""
    with tempfile.TemporaryDirectory(prefix="webgen-preview-") as scratch:
        registry = ProcessRegistry(Path(scratch) / "processes.json")
        runner = SiteRunner(
            folder.resolve(),
            registry=registry,
            start_timeout_s=start_timeout_s,
            log_dir=Path(scratch) / "logs",
            deps_cache_dir=None,
        )
        try:
            result = await runner.ensure_running(None)
            report: dict[str, Any] = {"ok": result.ok, "stage": result.stage, "url": result.url, "error": result.error}
            if result.ok and result.url:
                async with SharedBrowser(find_chromium(), registry=registry) as browser:
                    capture = await browser.capture(result.url, viewport=viewport)
                if capture.png:
                    screenshot.parent.mkdir(parents=True, exist_ok=True)
                    screenshot.write_bytes(capture.png)
                    report["screenshot"] = str(screenshot)
                report.update(
                    title=capture.title, render_error=capture.render_error, page_errors=capture.page_errors[:5]
                )
                report["ok"] = capture.render_error is None
            return report
        finally:
            await runner.stop()
            registry.kill_all()
