"""What the agent's two egress proxies share: the address rule, checked connections, the relay.

Both decide where generated work may connect and then carry its bytes: the sandbox's registry
proxy (``tools.netns``: named hosts only, for installs and shell actions) and the page proxy
(``tools.page_proxy``: the site and public addresses, for browser contexts). What they share is
here once: which addresses count as local, reading a proxy request, resolving a name and
connecting to the addresses that were checked (never a second lookup), the both-ways relay, and
the plain-text HTTP answer a refused client gets.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]

CONNECT_TIMEOUT_S = 10.0
BUFFER = 1024 * 1024  # stream buffers: fewer, larger copies per page load (vite serves ~1 MB modules)
_CHUNK = 256 * 1024
_REASONS = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}


def public_address(address: IPAddress) -> bool:
    """True for an address on the public internet; False for loopback, private, link-local, shared,
    multicast, reserved and unspecified ones (IPv4 inside IPv6 judged as the IPv4 address)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
        if embedded is not None:
            return public_address(embedded)
    return address.is_global and not address.is_multicast


def normal_host(host: str) -> str:
    """A host name as allow-lists compare it: lower case, no brackets, no trailing dot."""
    return host.strip().strip("[]").rstrip(".").lower()


def literal_address(host: str) -> IPAddress | None:
    """``host`` as an address when it is one (``[::1]`` included), else None."""
    try:
        return ipaddress.ip_address(normal_host(host))
    except ValueError:
        return None


def local_host(host: str) -> bool:
    """``localhost``, or an address that is not public (loopback, private, link-local, ...)."""
    address = literal_address(host)
    return normal_host(host) == "localhost" if address is None else not public_address(address)


@dataclass(frozen=True)
class ProxyRequest:
    """The first request on a proxy connection: where to, and what to send there first (None: a tunnel)."""

    host: str
    port: int
    head: bytes | None


def parse_request(head: bytes) -> ProxyRequest:
    """``CONNECT host:port`` or an absolute ``http://`` request (its head, without the blank line);
    ValueError for anything else."""
    line, _, rest = head.partition(b"\r\n")
    method, target, version = line.decode("latin-1").split(" ")
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        return ProxyRequest(normal_host(host), int(port), None)
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise ValueError(f"not a proxy request: {target[:80]}")
    # The origin form the server expects; Proxy-* headers are the proxy's own.
    path = urlunsplit(("", "", url.path or "/", url.query, ""))
    headers = [h for h in rest.split(b"\r\n") if not h.lower().startswith(b"proxy-")]
    return ProxyRequest(url.hostname, url.port or 80, b"\r\n".join([f"{method} {path} {version}".encode(), *headers]))


async def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses ``host`` stands for (itself when it is one); empty when it cannot be resolved."""
    if (address := literal_address(host)) is not None:
        return [address]
    try:
        infos = await asyncio.wait_for(
            asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM), CONNECT_TIMEOUT_S
        )
    except (OSError, TimeoutError):
        return []
    return list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos))


async def connect(addresses: list[IPAddress], port: int) -> Streams | None:
    """A connection to the first of the (checked) addresses that answers: never a fresh lookup."""
    for address in addresses:
        with contextlib.suppress(OSError, TimeoutError):
            return await asyncio.wait_for(asyncio.open_connection(str(address), port, limit=BUFFER), CONNECT_TIMEOUT_S)
    return None


async def _copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter, last: list[float]) -> None:
    while data := await source.read(_CHUNK):
        last[0] = time.monotonic()
        sink.write(data)
        await sink.drain()
    if sink.can_write_eof():
        sink.write_eof()  # a half-close: the other direction may still carry the answer


async def relay(a: Streams, b: Streams, *, idle_s: float | None = None) -> None:
    """Copy bytes both ways until both sides are done (or either fails, or, with ``idle_s``, no
    byte crossed either way for that long), then close both."""
    last = [time.monotonic()]
    copies = [asyncio.ensure_future(_copy(a[0], b[1], last)), asyncio.ensure_future(_copy(b[0], a[1], last))]
    both = asyncio.gather(*copies)
    try:
        while True:
            wait = None if idle_s is None else max(0.0, last[0] + idle_s - time.monotonic())
            done, _ = await asyncio.wait({both}, timeout=wait)
            if done:
                both.result()
                break
            if idle_s is not None and time.monotonic() - last[0] >= idle_s:
                break  # idle both ways: a held connection costs the agent two descriptors
    except OSError:
        pass  # a reset connection ends the relay like a closed one
    finally:
        for copy in copies:
            copy.cancel()
        await asyncio.gather(*copies, return_exceptions=True)
        if both.done() and not both.cancelled():
            both.exception()  # retrieved: a failure after the cancel is no error to report
        for writer in (a[1], b[1]):
            writer.close()


async def http_answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    """A plain-text HTTP answer (a refusal, a bad request) with ``text`` as its body; the connection closes."""
    body = (text + "\n").encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        writer.write(head.encode("latin-1") + body)
        await writer.drain()
    writer.close()
