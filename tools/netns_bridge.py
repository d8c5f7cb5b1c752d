"""The bridge that runs first inside a sandbox with its own network namespace, then execs the command.

Stdlib only: the agent runs it with ``python -I -S -c <this file's text>`` (tools.netns), so that
only the interpreter has to be visible inside, not this package. Usage::

    bridge.py FOLDER PROXY_PORT FORWARD -- COMMAND...

- ``FORWARD`` = 1: listens on the unix socket ``FOLDER/site.sock``. Each connection the agent opens
  starts with one line, the port to reach (``"5173\\n"``); the rest is relayed to 127.0.0.1 (else
  ::1) at that port inside the namespace. This is how the agent reaches a dev server.
- ``PROXY_PORT`` > 0: listens on 127.0.0.1:PROXY_PORT inside and relays each connection to the
  agent's proxy at ``FOLDER/proxy.sock`` (npm and shell actions are pointed at it).

Both sockets are bound before the command starts (so npm never finds its proxy missing); then the
process forks: the child relays, the parent execs the command (keeping the pid bwrap waits for).
When the command ends the sandbox's PID namespace ends, and the relay with it.

asyncio is imported where it is used, not at the top: the command starts after this process's
own start-up, and importing asyncio would add about 80 ms of CPU to every sandboxed command
(the relay imports it after the fork).

Hand-written rather than socat: socat cannot take the port from the connection, and a socat started
beside the command gives no sign of when it listens.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

SITE_SOCKET = "site.sock"
PROXY_SOCKET = "proxy.sock"
_CHUNK = 256 * 1024
BUFFER = 1024 * 1024  # stream buffers: fewer, larger copies per page load (vite serves ~1 MB modules)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # a half-close: the other direction may still carry the answer
    except OSError:
        writer.close()


async def relay(
    a: tuple[asyncio.StreamReader, asyncio.StreamWriter], b: tuple[asyncio.StreamReader, asyncio.StreamWriter]
) -> None:
    """Copy bytes both ways until both sides are done, then close both."""
    import asyncio

    try:
        await asyncio.gather(_pipe(a[0], b[1]), _pipe(b[0], a[1]))
    finally:
        for writer in (a[1], b[1]):
            writer.close()


async def _to_port(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A connection from the agent: the first line names the port inside to reach."""
    import asyncio

    try:
        port = int((await asyncio.wait_for(reader.readuntil(b"\n"), 30)).strip())
        if not 0 < port < 65536:
            raise ValueError(port)
    except (TimeoutError, OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        writer.close()
        return
    for host in ("127.0.0.1", "::1"):
        try:
            inner = await asyncio.open_connection(host, port, limit=BUFFER)
        except OSError:
            continue
        await relay((reader, writer), inner)
        return
    writer.close()


async def _to_proxy(folder: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    import asyncio

    try:
        proxy = await asyncio.open_unix_connection(os.path.join(folder, PROXY_SOCKET), limit=BUFFER)
    except OSError:
        writer.close()
        return
    await relay((reader, writer), proxy)


async def _serve(folder: str, site: socket.socket | None, proxy: socket.socket | None) -> None:
    import asyncio

    servers = []
    if site is not None:
        servers.append(await asyncio.start_unix_server(_to_port, sock=site, limit=BUFFER))
    if proxy is not None:
        servers.append(await asyncio.start_server(lambda r, w: _to_proxy(folder, r, w), sock=proxy, limit=BUFFER))
    await asyncio.gather(*(server.serve_forever() for server in servers))


def main(args: list[str]) -> None:
    folder, proxy_port, forward, separator, *command = args
    if separator != "--" or not command:
        sys.exit("usage: bridge.py FOLDER PROXY_PORT FORWARD -- COMMAND...")
    site = proxy = None
    if forward == "1":
        site = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        site.bind(os.path.join(folder, SITE_SOCKET))
        site.listen(128)
    if int(proxy_port):
        proxy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        proxy.bind(("127.0.0.1", int(proxy_port)))
        proxy.listen(128)
    if (site or proxy) and os.fork() == 0:
        import asyncio

        asyncio.run(_serve(folder, site, proxy))
        os._exit(0)
    # Python's sockets are not inherited across exec: the command gets none of them.
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
