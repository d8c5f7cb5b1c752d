"""``webgen-agent preview``: run a project folder with the executor and screenshot its landing page."""

from __future__ import annotations

import asyncio
import shutil
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
    scratch = await asyncio.to_thread(tempfile.TemporaryDirectory, prefix="webgen-preview-")
    registry = ProcessRegistry(Path(scratch.name) / "processes.json")
    # A copy runs, not the folder: an install would leave node_modules, a lockfile and our marker in
    # the user's project.
    project = Path(scratch.name) / "project"
    source = await asyncio.to_thread(folder.resolve)
    await asyncio.to_thread(
        shutil.copytree, source, project, symlinks=True, ignore=shutil.ignore_patterns("node_modules", ".git")
    )
    runner = SiteRunner(
        project,
        registry=registry,
        start_timeout_s=start_timeout_s,
        log_dir=Path(scratch.name) / "logs",
        deps_cache_dir=None,
    )
    try:
        result = await runner.ensure_running(None)
        report: dict[str, Any] = {"ok": result.ok, "stage": result.stage, "url": result.url, "error": result.error}
        if result.ok and result.url:
            async with SharedBrowser(await asyncio.to_thread(find_chromium), registry=registry) as browser:
                capture = await browser.capture(result.url, viewport=viewport)
            if capture.png:
                await asyncio.to_thread(_write_png, screenshot, capture.png)
                report["screenshot"] = str(screenshot)
            report.update(title=capture.title, render_error=capture.render_error, page_errors=capture.page_errors[:5])
            report["ok"] = capture.render_error is None
        return report
    finally:
        await runner.stop()
        await asyncio.to_thread(registry.kill_all)
        await asyncio.to_thread(scratch.cleanup)


def _write_png(path: Path, png: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
