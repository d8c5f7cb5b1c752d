"""The network policy for pages: a SOCKS5 proxy the agent owns, deciding by resolved address.

Every browser context that loads a generated page (captures and GUI agents alike) sends its
connections through a ``PageProxy`` of its own (``SharedBrowser``, ``origin.context_proxy``), with
``<-loopback>`` so that loopback goes through it too. Through a SOCKS5 proxy Chromium opens every
connection (http, https, WebSocket) as a tunnel to a host and port and leaves name resolution to
the proxy, which resolves the name itself and connects to the address it checked: a name that
resolves to a local address (or changes its answer between two lookups) cannot reach one. What it
lets through is a ``PagePolicy``:

- the site's own host and port, always;
- public internet addresses (CDN scripts and styles, web fonts, remote images, WebSockets), unless
  the policy is ``offline``;
- never loopback (other ports), private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local
  (169.254/16 with the cloud metadata address, fe80::/10), shared, multicast or reserved addresses.

WebRTC's UDP cannot be proxied: Chromium runs with ``--webrtc-ip-handling-policy=
disable_non_proxied_udp`` (``tools/browser.py``), so it sends no UDP and its TCP goes through this
proxy. HTTP ``CONNECT`` is served too (the tunnel HTTP clients such as npm ask for).

Hand-written (RFC 1928's CONNECT and a byte relay, in asyncio) because the decision must be made
on the address the proxy itself connects to, which off-the-shelf proxies (proxy.py, mitmproxy,
pproxy) do not expose without plugin machinery and dependencies of their own. The policy is an
object of its own (``AddressPolicy``) so that another egress proxy (npm's registry) can share
this one.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_HEAD_LIMIT = 64 * 1024
_CONNECT_TIMEOUT_S = 10.0
_CHUNK = 64 * 1024
MAX_REFUSED = 20


def public_address(address: IPAddress) -> bool:
    """True for an address on the public internet; False for loopback, private, link-local, shared,
    multicast, reserved and unspecified ones (IPv4 inside IPv6 judged as the IPv4 address)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
        if embedded is not None:
            return public_address(embedded)
    return address.is_global and not address.is_multicast


class AddressPolicy(Protocol):
    """Whether the proxy may connect to ``host``:``port``, which resolved to ``addresses``."""

    def refusal(self, host: str, port: int, addresses: list[IPAddress]) -> str | None:
        """None to allow; otherwise why not, in a few words."""
        ...


@dataclass
class PagePolicy:
    """The site's own host and port always; public addresses unless ``offline``; nothing else."""

    site: tuple[str, int] | None = None
    offline: bool = False

    def refusal(self, host: str, port: int, addresses: list[IPAddress]) -> str | None:
        if self.site is not None and (host.lower(), port) == self.site:
            return None
        if self.offline:
            return "only the site's own origin may be loaded (offline pages)"
        local = [str(a) for a in addresses if not public_address(a)]
        if local:
            return f"{host} resolves to a local or private address ({', '.join(local[:3])})"
        return None


def site_of(url: str) -> tuple[str, int]:
    """(host, port) of a site URL, the port filled in from the scheme."""
    parts = urlsplit(url)
    return (parts.hostname or "").lower(), parts.port or (443 if parts.scheme in ("https", "wss") else 80)


@dataclass
class _Destination:
    host: str
    port: int
    socks: bool  # asked by SOCKS5 (else by HTTP CONNECT): how to answer


_SOCKS_VERSION = 5
_SOCKS_REPLY = {"ok": 0, "refused": 2, "unreachable": 4, "unsupported": 7, "bad address": 8}


async def _socks_destination(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> _Destination:
    """The destination of a SOCKS5 CONNECT (RFC 1928, no authentication); the version byte is read."""
    methods = await reader.readexactly((await reader.readexactly(1))[0])
    if 0 not in methods:
        writer.write(bytes([_SOCKS_VERSION, 0xFF]))
        raise ValueError("SOCKS client offers no unauthenticated method")
    writer.write(bytes([_SOCKS_VERSION, 0]))
    version, command, _, kind = await reader.readexactly(4)
    if kind == 1:
        host = str(ipaddress.IPv4Address(await reader.readexactly(4)))
    elif kind == 4:
        host = str(ipaddress.IPv6Address(await reader.readexactly(16)))
    elif kind == 3:
        host = (await reader.readexactly((await reader.readexactly(1))[0])).decode("idna")
    else:
        _socks_answer(writer, "bad address")
        raise ValueError(f"SOCKS address type {kind}")
    port = int.from_bytes(await reader.readexactly(2), "big")
    if version != _SOCKS_VERSION or command != 1:  # CONNECT only: no BIND, no UDP ASSOCIATE
        _socks_answer(writer, "unsupported")
        raise ValueError(f"SOCKS command {command}")
    return _Destination(host.lower(), port, socks=True)


def _socks_answer(writer: asyncio.StreamWriter, outcome: str) -> None:
    writer.write(bytes([_SOCKS_VERSION, _SOCKS_REPLY[outcome], 0, 1, 0, 0, 0, 0, 0, 0]))


async def _connect_destination(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bytes
) -> _Destination:
    """The destination of an HTTP ``CONNECT host:port`` (the tunnel npm and other HTTP clients ask for)."""
    head = first + await reader.readuntil(b"\r\n\r\n")
    method, target, _ = head.partition(b"\r\n")[0].decode("latin-1").split(" ", 2)
    parts = urlsplit(f"//{target}")
    if method != "CONNECT" or not parts.hostname or parts.port is None:
        # Plain http in absolute form would need each request of a kept-alive connection parsed
        # and sent on: browsers get a SOCKS5 proxy instead, which tunnels every connection.
        await _http_answer(writer, 400, "only CONNECT (or SOCKS5) is served")
        raise ValueError(f"not a CONNECT request: {target[:100]!r}")
    return _Destination(parts.hostname.lower(), parts.port, socks=False)


@dataclass
class PageProxy:
    """A SOCKS5 (and HTTP CONNECT) proxy on 127.0.0.1 that connects only where its policy allows.

    Every connection is a tunnel to one destination, decided and checked when it opens: browser
    contexts use it as ``socks5://`` (Chromium then sends every connection, http, https and
    WebSocket alike, as a tunnel and leaves name resolution to the proxy).
    """

    policy: AddressPolicy = field(default_factory=PagePolicy)
    refused: list[str] = field(default_factory=list)
    _server: asyncio.Server | None = field(default=None, repr=False)
    _writers: set[asyncio.StreamWriter] = field(default_factory=set, repr=False)

    @property
    def address(self) -> str:
        """host:port where the proxy listens."""
        if self._server is None:
            raise RuntimeError("PageProxy is not started")
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    @property
    def socks_url(self) -> str:
        return f"socks5://{self.address}"

    async def start(self) -> PageProxy:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=_HEAD_LIMIT)
        return self

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):  # open tunnels end: their relays finish on their own
            writer.close()

    async def __aenter__(self) -> PageProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            await self._tunnel(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, TimeoutError) as exc:
            logger.debug("page proxy: %s", exc)
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = await asyncio.wait_for(reader.readexactly(1), _CONNECT_TIMEOUT_S)
        opening = (
            _socks_destination(reader, writer)
            if first[0] == _SOCKS_VERSION
            else _connect_destination(reader, writer, first)
        )
        destination = await asyncio.wait_for(opening, _CONNECT_TIMEOUT_S)
        addresses = await _resolve(destination.host, destination.port)
        why = self.policy.refusal(destination.host, destination.port, addresses) if addresses else "cannot be resolved"
        upstream = None if why is not None else await _connect(addresses, destination.port)
        if why is None and upstream is None:
            why = "does not answer"
        if why is not None or upstream is None:
            if len(self.refused) < MAX_REFUSED:
                self.refused.append(f"{destination.host}:{destination.port} ({why})")
            if destination.socks:
                _socks_answer(writer, "refused" if addresses else "unreachable")
            else:
                await _http_answer(writer, 403, why or "refused")
            return
        up_reader, up_writer = upstream
        self._writers.add(up_writer)
        try:
            if destination.socks:
                _socks_answer(writer, "ok")
            else:
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await _pipe_both(reader, writer, up_reader, up_writer)
        finally:
            self._writers.discard(up_writer)
            up_writer.close()


async def _resolve(host: str, port: int) -> list[IPAddress]:
    with contextlib.suppress(ValueError):
        return [ipaddress.ip_address(host)]
    try:
        infos = await asyncio.wait_for(
            asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM),
            _CONNECT_TIMEOUT_S,
        )
    except (OSError, TimeoutError):
        return []
    return list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos))


async def _connect(addresses: list[IPAddress], port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """A connection to the first of the (checked) addresses that answers: never a fresh lookup."""
    for address in addresses:
        with contextlib.suppress(OSError, TimeoutError):
            return await asyncio.wait_for(asyncio.open_connection(str(address), port), _CONNECT_TIMEOUT_S)
    return None


async def _http_answer(writer: asyncio.StreamWriter, status: int, why: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden"}[status]
    body = f"webgen-agent page proxy: {why}\n".encode()
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode("latin-1")
        + body
    )
    with contextlib.suppress(OSError):
        await writer.drain()


async def _copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    while data := await source.read(_CHUNK):
        sink.write(data)
        await sink.drain()
    with contextlib.suppress(OSError):
        if sink.can_write_eof():
            sink.write_eof()


async def _pipe_both(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """Relay both ways until both sides have finished (or either fails)."""
    copies = [asyncio.ensure_future(_copy(reader, up_writer)), asyncio.ensure_future(_copy(up_reader, writer))]
    try:
        await asyncio.gather(*copies)
    finally:
        for copy in copies:
            copy.cancel()
        await asyncio.gather(*copies, return_exceptions=True)
