"""Attacks on the agent's own Chromium, each closed: what generated code or a page got before, and now does not.

- DevTools discovery: Chromium listened on a TCP DevTools port (``--remote-debugging-port=0``). A
  dev server read /proc/net/tcp, asked each loopback port for ``/json/version`` and drove the
  browser with a raw WebSocket. Chromium now speaks DevTools over a pipe only.
- Reading the agent's files: the browser ran unconfined as the agent's user (root on most hosts),
  so ``file://`` showed any file. It now runs in a bubblewrap sandbox of its own that shows system
  folders and its profile only, and never as root.
- Planting files with ``Browser.setDownloadBehavior``: a client pointed downloads at a folder of its
  choice. Every context now denies downloads, whatever a client asks.
- The scoped relay for browser-use answered on any path of its port; it now answers only on a
  secret path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.helpers import CdpClient
from webgen_agent.tools.browser import SharedBrowser
from webgen_agent.tools.cdp_scope import scoped_cdp_endpoint
from webgen_agent.tools.process import run_command
from webgen_agent.tools.sandbox import Confinement, sandbox_problem

# Every test here runs bubblewrap (and most npm, a dev server or Chromium inside it).
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}"),
]

# What the attack did from a dev server: every listening TCP port, asked for the DevTools version.
DEVTOOLS_SCAN = r"""
import http.client, json
ports = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        lines = open(table).read().splitlines()[1:]
    except OSError:
        continue
    for line in lines:
        fields = line.split()
        if fields[3] == "0A":  # LISTEN
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
found = []
for port in sorted(ports):
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        connection.request("GET", "/json/version")
        body = connection.getresponse().read(4096).decode("utf-8", "replace")
    except Exception:
        continue
    if "webSocketDebuggerUrl" in body:
        found.append(port)
print("FOUND", json.dumps(found))
"""


async def test_generated_code_finds_no_devtools_endpoint(shared_browser: SharedBrowser, tmp_path: Path) -> None:
    await shared_browser.start()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    # The system Python: the agent's own (a virtualenv) is absent inside.
    scan = ["/usr/bin/python3", "-c", DEVTOOLS_SCAN]
    result = await run_command(scan, cwd=workspace, timeout_s=120, sandbox=Confinement(workspace=workspace))
    assert result.ok, result.output_tail
    found = set(json.loads(result.output_tail.split("FOUND", 1)[1]))
    # Other browsers on a shared test machine may have ports; ours must have none at all.
    assert shared_browser.pid is not None
    ours = _listening_ports_of_group(shared_browser.pid)
    assert not ours and not found & ours, (found, ours)


def _listening_ports_of_group(pgid: int) -> set[int]:
    """TCP ports on which a process of the group ``pgid`` listens."""
    inodes = set()
    for pid in _pids_in_group(pgid):
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def _pids_in_group(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


async def test_the_browser_cannot_read_the_agents_files_and_is_not_root(
    shared_browser: SharedBrowser, tmp_path: Path
) -> None:
    secret = tmp_path / "agent-secret.txt"
    secret.write_text("agent-secret-canary-0003")
    secret.chmod(0o644)  # readable by any user: only the browser's view keeps it out
    context = await shared_browser.browser.new_context()
    try:
        page = await context.new_page()
        with pytest.raises(Exception, match="ERR_FILE_NOT_FOUND"):
            await page.goto(secret.as_uri())
    finally:
        await context.close()
    assert shared_browser.pid is not None
    if os.geteuid() == 0:
        uids = _uids_in_group(shared_browser.pid)
        assert uids and 0 not in uids, uids


def _uids_in_group(pgid: int) -> set[int]:
    uids = set()
    for pid in _pids_in_group(pgid):
        with contextlib.suppress(OSError):
            uids.add(Path(f"/proc/{pid}").stat().st_uid)
    return uids


async def test_no_context_downloads_whatever_a_client_asks(shared_browser: SharedBrowser, tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    downloads.chmod(0o777)  # writable by the browser's user, were downloads allowed
    page = '<a id="d" href="data:application/octet-stream,planted-file-canary" download="planted.pth">x</a>'
    async with scoped_cdp_endpoint(shared_browser.ws_url) as endpoint, connect(endpoint.url, max_size=None) as socket:
        client = CdpClient(socket)
        await client.command("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
        session = await client.open_page("data:text/html," + page, settle_s=0)
        await client.command("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}, session)
        await asyncio.sleep(0.5)
        await client.evaluate(session, "document.getElementById('d').click()")
        await asyncio.sleep(3)
    assert list(downloads.iterdir()) == []


async def test_the_scoped_relay_answers_only_on_its_secret_path(shared_browser: SharedBrowser) -> None:
    async with scoped_cdp_endpoint(shared_browser.ws_url) as endpoint:
        port_only = endpoint.url.rsplit("/devtools/", 1)[0]
        for guess in ("/devtools/browser/scoped", "/devtools/browser", "/"):
            with pytest.raises(InvalidStatus):
                async with connect(port_only + guess):
                    pass
        async with connect(endpoint.url) as client:
            await client.send(json.dumps({"id": 1, "method": "Target.getTargets"}))
            assert "result" in json.loads(await asyncio.wait_for(client.recv(), 20))
