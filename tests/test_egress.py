"""The proxy's relay and its gate under a flood, without a sandbox: an idle relay ends, and closing a
gate with connections not yet served prints no traceback."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from webgen_agent.tools.egress import relay
from webgen_agent.tools.netns import NetworkGate, NetworkPolicy
from webgen_agent.tools.netns_bridge import hand_over_listener


async def _pair() -> tuple[tuple[asyncio.StreamReader, asyncio.StreamWriter], socket.socket]:
    ours, theirs = socket.socketpair()
    return await asyncio.open_connection(sock=ours), theirs


async def test_a_relay_that_carries_nothing_ends_after_its_idle_time():
    (a, a_peer), (b, b_peer) = await _pair(), await _pair()
    # Both peers stay open and silent: only the idle time can end the relay.
    await asyncio.wait_for(relay(a, b, idle_s=0.5), timeout=30)
    assert a[1].is_closing() and b[1].is_closing()
    a_peer.close()
    b_peer.close()


@pytest.mark.e2e  # bound by processes and timeouts, not by the code (waits past the relay's idle time)
async def test_a_relay_carrying_bytes_is_not_cut_by_its_idle_time():
    (a, a_peer), (b, b_peer) = await _pair(), await _pair()
    task = asyncio.create_task(relay(a, b, idle_s=1.0))
    a_peer.setblocking(False)
    loop = asyncio.get_running_loop()
    for _ in range(6):  # 1.5 s of traffic, a byte every 0.25 s
        await loop.sock_sendall(a_peer, b"x")
        await asyncio.sleep(0.25)
    assert not task.done()
    received = await asyncio.wait_for(loop.sock_recv(b_peer, 16), timeout=10)
    assert received.startswith(b"x")
    a_peer.close()
    b_peer.close()
    await asyncio.wait_for(task, timeout=30)


def test_closing_a_gate_under_a_flood_prints_no_cancellation_traceback(caplog):
    # Connections accepted just before the close get tasks that are cancelled before they run;
    # asyncio's streams then raised CancelledError in a callback: one traceback each (about 100).
    caplog.set_level(logging.ERROR, logger="asyncio")
    gate = NetworkGate(NetworkPolicy(allow_hosts=("example.org",)))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1000)
    hand_over_listener(str(gate.folder), listener)
    clients = []
    for _ in range(900):
        client = socket.socket()
        client.setblocking(False)
        try:
            client.connect(listener.getsockname())
        except BlockingIOError:
            pass
        clients.append(client)
    gate.close()
    for client in clients:
        client.close()
    listener.close()
    assert "CancelledError" not in caplog.text
