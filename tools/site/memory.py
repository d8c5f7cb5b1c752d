"""Telling that a site's server died of the sandbox's memory limit, and which limit, for the coder.

Two limits can stop it (``tools.sandbox``, ``tools.limits``): the sandbox's cgroup, whose kernel OOM
killer SIGKILLs a process when all of them together pass ``sandbox_memory_mb`` (counted in the
cgroup, so known for certain), and the per-process RLIMIT_DATA (``memory_mb``), under which an
allocation fails and the runtime reports it in the log before it exits.
"""

from __future__ import annotations

from webgen_agent.core.context import SandboxSettings
from webgen_agent.tools.process import ManagedProcess, read_tail

# What runtimes print when an allocation fails (node's buffers and heap, V8, libc, Python).
_ALLOCATION_FAILED = (
    "array buffer allocation failed",
    "heap out of memory",
    "fatal process out of memory",
    "cannot allocate memory",
    "memoryerror",
)
_WHAT_TO_TRY = (
    "Make the server use less memory: do not build large data in memory at start-up or per request, "
    "stream or paginate big data, and fix leaks (timers or handlers that keep adding to a list or cache)."
)


def memory_death(server: ManagedProcess, settings: SandboxSettings | None) -> str | None:
    """Why ``server`` was stopped by a memory limit, naming the limit and what to try; None when it was not."""
    if settings is None:
        return None
    if server.oom_kills:  # counted by the kernel: certain even while the rest of the tree still exits
        return (
            f"The dev server was killed by the sandbox's memory limit: all its processes together may use "
            f"{settings.sandbox_memory_mb} MB, and the kernel killed it when they went past that. {_WHAT_TO_TRY}"
        )
    if server.alive:
        return None
    log = read_tail(server.log_path, lines=60).lower()
    if any(marker in log for marker in _ALLOCATION_FAILED):
        return (
            f"The dev server ran out of memory: an allocation failed at the sandbox's memory limit of "
            f"{settings.memory_mb} MB of heap and data per process. {_WHAT_TO_TRY}"
        )
    return None
