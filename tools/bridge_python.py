"""The interpreter the network bridge (``tools.netns_bridge``) runs on inside a sandbox, never from a home folder.

The bridge needs Python's standard library only (``os``, ``socket``, ``sys``; ``socket.send_fds``,
Python 3.9 or later). It runs on a Python the sandbox's system folders show already
(``/usr/bin/python3``) when there is one, so nothing more is bound. Otherwise it runs on a copy of
the agent's base interpreter and of the files the bridge needs (the modules and extension modules
it loads, the standard library's top-level modules, a ``libpython`` found outside the system folders), made once per
process in a private folder under ``/tmp`` and bound read-only at the same path: never the
interpreter's own folder, which may sit in a home (pyenv's ``/root/.pyenv/versions/<v>`` was
listable inside). A copy that needs such a ``libpython`` is started through the dynamic loader with
``--library-path``, since its recorded search path points into that folder.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
_SYSTEM_PREFIXES = ("/usr/", "/lib/", "/lib64/", "/lib32/", "/libx32/", "/bin/", "/sbin/")
# What the bridge imports, and the files that loads (printed one a line).
_LOADED = (
    "import __future__, os, socket, sys\n"
    "for m in list(sys.modules.values()):\n"
    "    f = getattr(m, '__file__', None)\n"
    "    if f: print(f)\n"
)


@dataclass(frozen=True)
class BridgePython:
    """How to start the bridge's interpreter (``argv`` before ``-I -S -c``) and the folder to bind
    read-only at its own path for it (None: the system folders show it)."""

    argv: tuple[str, ...]
    folder: str | None = None


def _system(path: str) -> bool:
    return path.startswith(_SYSTEM_PREFIXES)


def _runs_bridge(argv: list[str]) -> bool:
    try:
        done = subprocess.run(
            [*argv, "-I", "-S", "-c", "import socket; socket.send_fds"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and not done.stderr


@functools.cache
def bridge_python() -> BridgePython:
    """The bridge's interpreter: a system Python, else a private copy (see the module's text)."""
    for candidate in SYSTEM_PYTHONS:
        real = os.path.realpath(candidate)
        if _system(real) and os.access(real, os.X_OK) and _runs_bridge([real]):
            return BridgePython((real,))
    return _private_copy(os.path.realpath(sys.executable))


def _private_copy(base: str) -> BridgePython:
    """``base`` and the files the bridge loads, copied under a private folder in /tmp."""
    folder = Path(tempfile.mkdtemp(prefix="webgen-bridge-python-", dir="/tmp"))  # 0700, a fresh name
    atexit.register(shutil.rmtree, folder, True)
    prefix = Path(base).parent.parent
    loaded = subprocess.run([base, "-I", "-S", "-c", _LOADED], capture_output=True, text=True, timeout=20, check=True)
    files = [Path(line) for line in loaded.stdout.splitlines()]
    # Every top-level module of the standard library too (about 5 MB): what the bridge's calls
    # import later (os.execvp imports warnings) is then there without listing it.
    stdlib = next((f.parent for f in files if f.name == "os.py"), None)
    files += sorted(stdlib.glob("*.py")) if stdlib is not None else []
    for source in files:
        if source.is_file() and source.is_relative_to(prefix):
            target = folder / source.relative_to(prefix)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    executable = folder / "bin" / Path(base).name
    executable.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(base, executable)
    if stdlib is not None and stdlib.is_relative_to(prefix):
        # The landmark of the platform-dependent half, where Python looks for extension modules.
        (folder / stdlib.relative_to(prefix) / "lib-dynload").mkdir(exist_ok=True)
    argv: tuple[str, ...] = (str(executable),)
    libraries, loader = _outside_libraries(base)
    if libraries:
        lib = folder / "lib"
        lib.mkdir(exist_ok=True)
        for library in libraries:
            shutil.copy2(library, lib / Path(library).name)
        if loader is None:
            raise OSError(f"{base} needs {libraries[0]} and no dynamic loader was found to point it at a copy")
        argv = (loader, "--library-path", str(lib), str(executable))
    for path in folder.rglob("*"):
        path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    folder.chmod(0o755)  # the sandbox's user (another uid for a root agent) must read it
    return BridgePython(argv, str(folder))


def _outside_libraries(base: str) -> tuple[list[str], str | None]:
    """The shared libraries ``base`` loads from outside the system folders, and the dynamic loader."""
    try:
        shown = subprocess.run(["ldd", base], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return [], None
    libraries = [m.group(1) for m in re.finditer(r"=>\s+(/\S+)", shown) if not _system(m.group(1))]
    loader = next((m.group(1) for m in re.finditer(r"^\s*(/\S*ld-linux\S*)", shown, re.M)), None)
    return libraries, loader
