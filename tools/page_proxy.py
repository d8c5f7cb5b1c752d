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

Hand-written (RFC 1928's CONNECT, in asyncio) because the decision must be made on the address
the proxy itself connects to, which off-the-shelf proxies (proxy.py, mitmproxy, pproxy) do not
expose without plugin machinery and dependencies of their own. The address rule, the checked
connection and the relay are ``tools.egress``, shared with the sandbox's registry proxy.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

from webgen_agent.tools.egress import (
    CONNECT_TIMEOUT_S,
    IPAddress,
    connect,
    http_answer,
    parse_request,
    public_address,
    relay,
    resolve,
)

logger = logging.getLogger(__name__)

__all__ = ["AddressPolicy", "PagePolicy", "PageProxy", "public_address", "site_of"]

_HEAD_LIMIT = 64 * 1024
MAX_REFUSED = 20


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
    try:
        request = parse_request(head[:-4])
    except ValueError:
        request = None
    if request is None or request.head is not None:
        # Plain http in absolute form would need each request of a kept-alive connection parsed
        # and sent on: browsers get a SOCKS5 proxy instead, which tunnels every connection.
        await http_answer(writer, 400, "webgen-agent page proxy: only CONNECT (or SOCKS5) is served")
        raise ValueError(f"not a CONNECT request: {head[:100]!r}")
    return _Destination(request.host, request.port, socks=False)


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
        first = await asyncio.wait_for(reader.readexactly(1), CONNECT_TIMEOUT_S)
        opening = (
            _socks_destination(reader, writer)
            if first[0] == _SOCKS_VERSION
            else _connect_destination(reader, writer, first)
        )
        destination = await asyncio.wait_for(opening, CONNECT_TIMEOUT_S)
        addresses = await resolve(destination.host, destination.port)
        why = self.policy.refusal(destination.host, destination.port, addresses) if addresses else "cannot be resolved"
        upstream = None if why is not None else await connect(addresses, destination.port)
        if why is None and upstream is None:
            why = "does not answer"
        if why is not None or upstream is None:
            if len(self.refused) < MAX_REFUSED:
                self.refused.append(f"{destination.host}:{destination.port} ({why})")
            if destination.socks:
                _socks_answer(writer, "refused" if addresses else "unreachable")
            else:
                await http_answer(writer, 403, f"webgen-agent page proxy: {why or 'refused'}")
            return
        up_reader, up_writer = upstream
        self._writers.add(up_writer)
        try:
            if destination.socks:
                _socks_answer(writer, "ok")
            else:
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await relay((reader, writer), (up_reader, up_writer))
        finally:
            self._writers.discard(up_writer)
            up_writer.close()
