"""Sockets handed over a door of the network gate (``tools.netns``): received, checked, closed.

The bridge inside the sandbox hands the agent one socket per request over a unix socket
(``SCM_RIGHTS``); what arrives is checked before it is used, since a process that took the bridge's
place could send anything (a file, a pipe, a unix socket).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from pathlib import Path

from webgen_agent.tools.egress import literal_address


async def _readable(sock: socket.socket) -> None:
    """Wait until ``sock`` (non-blocking) has something to read."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def mark() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(sock.fileno(), mark)
    try:
        await ready
    finally:
        loop.remove_reader(sock.fileno())


async def received_socket(channel: socket.socket, *, listening: bool) -> socket.socket | None:
    """The socket the bridge hands over on ``channel`` (one byte and one descriptor), if it is what
    the agent asked for: a TCP socket that listens (``listening``) or one connected to a loopback
    address. Anything else (a file, a pipe, a unix socket, several descriptors: what a process that
    took the bridge's place could send) is closed unused."""
    await _readable(channel)
    _data, fds, _flags, _address = socket.recv_fds(channel, 1, 4)
    for extra in fds[1:]:
        with contextlib.suppress(OSError):
            os.close(extra)
    if not fds:
        return None
    try:
        sock = socket.socket(fileno=fds[0])  # fails on what is not a socket
    except OSError:
        with contextlib.suppress(OSError):
            os.close(fds[0])
        return None
    try:
        ok = (
            sock.family in (socket.AF_INET, socket.AF_INET6)
            and sock.type == socket.SOCK_STREAM
            and bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)) == listening
            and (listening or _loopback(sock.getpeername()[0]))
        )
    except OSError:
        ok = False
    if not ok:
        sock.close()
        return None
    sock.setblocking(False)
    return sock


def _loopback(host: str) -> bool:
    address = literal_address(host)
    return address is not None and address.is_loopback


async def close_door(door: socket.socket, path: Path) -> None:
    door.close()
    # Off the event loop: a host such as `langgraph dev` fails a run that touches files on it.
    await asyncio.to_thread(path.unlink, missing_ok=True)
