"""What the servers the agent starts listen on: this machine's loopback only, by default.

Pins behaviour that holds: every listening socket a run opens in the agent's process (the scripted
model server, the site's forwarders, the page proxy, the GUI agent's confined DevTools relay) and
``langgraph dev`` with its default settings are on loopback addresses; servers of generated code
listen inside the sandbox's own network namespace (tests/test_hostile_network.py). A local Ray
instance listens on every interface (docs/security.md, "Not isolated yet").
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket

import psutil
import pytest

from tests.hostile_corpus import Case, page
from tests.test_hostile_corpus import GUI_AGENT, JUDGE, replay, secret  # noqa: F401 (secret: a fixture)
from webgen_agent.tools.sandbox import sandbox_problem

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}"),
]


def _loopback(address: str) -> bool:
    return ipaddress.ip_address(address.split("%")[0]).is_loopback


async def test_every_server_a_run_starts_listens_on_loopback_only(tmp_path, chromium_path, secret, monkeypatch):  # noqa: F811
    heard: list[str] = []
    listen = socket.socket.listen

    def recording(self: socket.socket, *args: int) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                heard.append(self.getsockname()[0])
        listen(self, *args)

    monkeypatch.setattr(socket.socket, "listen", recording)
    run = await replay(
        [Case("a page", page("", "<h1>A page</h1>"), ())],
        tmp_path,
        secret,
        judge={**JUDGE, "score": 5},
        agent_rules=GUI_AGENT,
        page_timeout_s=6.0,
        gui_max_actions=3,
        gui_timeout_s=60.0,
    )
    assert run.status == "finished" and run.step("a page").get("gui_run")  # the GUI agent's servers ran too
    assert len(heard) >= 3, heard  # the model server, the page proxy, the DevTools relay at least
    assert [a for a in heard if not _loopback(a)] == [], heard


def _listening(process: psutil.Process) -> list[str]:
    found = []
    for proc in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            found += [c.laddr.ip for c in proc.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    return found


def test_langgraph_dev_listens_on_loopback_only(studio_server):
    addresses = _listening(psutil.Process(studio_server.proc.pid))
    assert addresses and [a for a in addresses if not _loopback(a)] == [], addresses
