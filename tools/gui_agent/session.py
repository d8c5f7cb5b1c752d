"""A browser-use session that can read its page ahead of its agent's first step.

Not a patch of browser-use (``patches``): a subclass of its ``BrowserSession``, made once browser-use
is imported (``session_class``), which every GUI agent run uses.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from webgen_agent.tools.gui_agent.patches import import_browser_use

READ_AHEAD_END_S = 2.0  # how long a close waits for a read ahead in flight to end


@functools.cache
def session_class() -> type[Any]:
    """browser-use's ``BrowserSession``, whose first page read can be made ahead of its agent's first step.

    A session opened ahead (``open_gui_session``) shows its page while the model grades the
    screenshot; ``read_ahead`` reads it then (DOM, accessibility tree, screenshot: 0.15-0.2 s),
    once settled, and the agent's first read gets that; later reads are made when asked. browser-use
    has no setting for this: the read is overridden in a subclass."""
    import_browser_use()
    from browser_use import BrowserSession
    from pydantic import PrivateAttr

    class SessionReadingAhead(BrowserSession):
        _read_ahead: asyncio.Task[Any] | None = PrivateAttr(default=None)
        _reading: bool = PrivateAttr(default=False)  # the read ahead is past its settle wait

        def read_ahead(self, settle_s: float) -> None:
            """Read the page (as an agent's step does) ``settle_s`` from now, in the background."""

            async def read() -> Any:
                await asyncio.sleep(settle_s)
                self._reading = True
                return await BrowserSession.get_browser_state_summary(self, include_screenshot=True)

            self._read_ahead = asyncio.create_task(read())
            self._read_ahead.add_done_callback(lambda done: done.cancelled() or done.exception())

        async def _end_read_ahead(self) -> None:
            # A read nobody took: still waiting for the page to settle, stopped at once; reading, let
            # end before the session closes (cut off, its handlers log errors), for a bounded time
            # well within the callers' 5 s for a whole close, and stopped even if the close is.
            ahead, self._read_ahead = self._read_ahead, None
            if ahead is None:
                return
            try:
                if self._reading:
                    await asyncio.wait({ahead}, timeout=READ_AHEAD_END_S)
            finally:
                ahead.cancel()

        async def kill(self) -> None:
            await self._end_read_ahead()
            await super().kill()

        async def stop(self) -> None:
            await self._end_read_ahead()
            await super().stop()

        async def get_browser_state_summary(
            self, include_screenshot: bool = True, cached: bool = False, include_recent_events: bool = False
        ) -> Any:
            ahead, self._read_ahead = self._read_ahead, None
            if ahead is not None:
                await asyncio.wait({ahead})  # one read at a time; a failed one is made again below
                usable = not (ahead.cancelled() or ahead.exception() is not None)
                if usable and include_screenshot and not cached and not include_recent_events:
                    return ahead.result()
            return await super().get_browser_state_summary(include_screenshot, cached, include_recent_events)

    return SessionReadingAhead
