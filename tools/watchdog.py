"""Watchdog of one agent process: ``python -m webgen_agent.tools.watchdog REGISTRY OWNER_PID OWNER_CREATE_TIME``.

Started by ``ProcessRegistry.start_watchdog`` with stdin the read end of a pipe only the agent can
write to. Reading it returns end-of-file when the agent is gone, whatever killed it (kill -9
included); the watchdog then kills every process group the registry lists for that agent, so a
dead run leaves no dev server or browser behind. After a normal exit the agent has already killed
them itself and the watchdog finds nothing.
"""

from __future__ import annotations

import signal
import sys

from webgen_agent.tools.registry import ProcessRegistry


def main(argv: list[str]) -> int:
    registry, owner_pid, owner_create_time = argv[0], int(argv[1]), float(argv[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the agent handles Ctrl-C; we wait for it to be gone
    while sys.stdin.buffer.read(4096):
        pass
    ProcessRegistry(registry).kill_owned(owner_pid, owner_create_time)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
