"""The bridge that runs first inside a sandbox with its own network namespace, then execs the command.

Stdlib only: the agent runs it with ``python -I -S -c <this file's text>`` (tools.netns), so that
only the interpreter has to be visible inside, not this package. Usage::

    bridge.py FOLDER PROXY_PORT FORWARD -- COMMAND...

It carries no bytes itself: it makes sockets in the namespace and hands them to the agent over
unix sockets in ``FOLDER`` (``SCM_RIGHTS``), and the agent talks to them directly, so every byte
crosses one relay (the agent's) instead of two, and no process of the sandbox stands in the way.

- ``PROXY_PORT`` > 0: listens on 127.0.0.1:PROXY_PORT inside (npm and shell actions are pointed
  at it) and hands that listening socket to the agent's proxy over ``FOLDER/proxy.sock``, waiting
  for its answer: the agent then accepts the connections made to it inside. This happens before
  the command starts (so npm never finds its proxy missing, and nothing of the command can hand
  the agent anything there: the agent takes one socket and closes that door).
- ``FORWARD`` = 1: listens on the unix socket ``FOLDER/site.sock``. Each connection the agent opens
  there carries one line, the port to reach (``"5173\\n"``); the bridge connects to 127.0.0.1
  (else ::1) at that port inside the namespace and hands the connected socket back (``b"1"`` and
  the descriptor; ``b"0"`` when nothing listens). A forked child serves this while the command runs.

The command then replaces this process (keeping the pid bwrap waits for). When the command ends
the sandbox's PID namespace ends, and the child with it.

Hand-written rather than socat: socat cannot pass descriptors, and would carry every byte once more.
"""

from __future__ import annotations

import os
import socket
import sys

SITE_SOCKET = "site.sock"
PROXY_SOCKET = "proxy.sock"
_TIMEOUT_S = 10.0


def hand_over_listener(folder: str, listener: socket.socket) -> None:
    """Give the agent's proxy the listening socket ``listener`` and wait until it has taken it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as door:
        door.settimeout(30)
        door.connect(os.path.join(folder, PROXY_SOCKET))
        socket.send_fds(door, [b"L"], [listener.fileno()])
        if door.recv(1) != b"1":
            raise OSError("the agent's proxy did not take the listener")


def _connect_inside(port: int) -> socket.socket | None:
    for host in ("127.0.0.1", "::1"):
        try:
            return socket.create_connection((host, port), timeout=_TIMEOUT_S)
        except OSError:
            continue
    return None


def _answer(request: socket.socket) -> None:
    """One request of the agent: read the port, connect there, hand the connection back."""
    with request:
        request.settimeout(_TIMEOUT_S)
        line = b""
        while not line.endswith(b"\n") and len(line) < 8:
            chunk = request.recv(8 - len(line))
            if not chunk:
                return
            line += chunk
        try:
            port = int(line)
        except ValueError:
            return
        inner = _connect_inside(port) if 0 < port < 65536 else None
        if inner is None:
            request.sendall(b"0")
            return
        with inner:
            socket.send_fds(request, [b"1"], [inner.fileno()])


def _serve_site(site: socket.socket) -> None:
    import threading  # here, not at the top: only the forked child needs it

    while True:
        request, _ = site.accept()
        # A thread each: a connect to a busy server must not hold up the page's other connections.
        threading.Thread(target=_answer, args=(request,), daemon=True).start()


def main(args: list[str]) -> None:
    folder, proxy_port, forward, separator, *command = args
    if separator != "--" or not command:
        sys.exit("usage: bridge.py FOLDER PROXY_PORT FORWARD -- COMMAND...")
    if int(proxy_port):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as proxy:
            proxy.bind(("127.0.0.1", int(proxy_port)))
            proxy.listen(128)
            hand_over_listener(folder, proxy)
    if forward == "1":
        site = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        site.bind(os.path.join(folder, SITE_SOCKET))
        site.listen(128)
        if os.fork() == 0:
            try:
                _serve_site(site)
            finally:
                os._exit(0)
        site.close()
    # Python's sockets are not inherited across exec: the command gets none of them.
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
