"""Chromium's command line: its flags, and its confinement in a bubblewrap sandbox of its own (as an
unprivileged user when the agent is root) where the host allows, or unconfined with a warning."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

from webgen_agent.tools.sandbox import sandbox_problem, system_binds

CHROMIUM_FLAGS = (
    "--headless=new",
    "--remote-debugging-pipe",  # DevTools on fds 3 and 4; never a port
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    # Pages of concurrent runs sit in windows of their own, all but one in the background: without
    # these, Chromium throttles their timers and frames and a screenshot waits for a frame.
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-renderer-backgrounding",
    # Chromium 15x opens the address bar's popup as two hidden WebUI pages per window, i.e. per
    # browser context here: a renderer (~60 MB) for nothing in a headless browser. And it keeps a
    # spare renderer started for the next navigation, bound to one browser context: every capture
    # and GUI agent here opens a context of its own, so each spare went unused and the next was
    # started (19 renderers a demo run for 9 pages, ~0.4 s of CPU).
    "--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup,SpareRendererForSitePerProcess",
    # WebRTC's UDP cannot go through the page proxy: none at all, its TCP only through the proxy.
    # The full browser reads the first switch and ignores the second; the headless shell, which
    # lacks the full browser's layer, reads only the second (without it STUN packets left).
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
)

# Chromium's view when confined: the system folders and /etc entries every sandbox shows
# (``sandbox.system_binds``), what a browser reads besides (fonts, its own settings), its profile.
# Nothing of the agent's: no homes, no database, no runs folder.
_BROWSER_EXTRAS = ("/etc/fonts", "/etc/chromium", "/etc/chromium.d", "/var/cache/fontconfig")
_UNPRIVILEGED_UID = 65534  # "nobody": a root agent's Chromium runs as this user, never as root


def browser_user() -> int | None:
    """The uid Chromium runs as: None (the agent's own) unless the agent is root."""
    return _UNPRIVILEGED_UID if os.geteuid() == 0 else None


def _jail_args(chromium_path: str, profile: Path, uid: int) -> list[str]:
    args = ["bwrap", "--clearenv", "--unshare-user", "--uid", str(uid), "--gid", str(uid)]
    # Its own pid, ipc and uts namespaces; the host's network (pages load the site's forwarded port
    # and public resources). No --disable-userns: Chromium's own sandbox makes user namespaces.
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--cap-drop", "ALL"]
    args += system_binds()
    for extra in _BROWSER_EXTRAS:
        args += ["--ro-bind-try", extra, extra]
    install = Path(chromium_path).resolve().parent  # e.g. Playwright's download under a home folder
    if not install.is_relative_to("/usr"):
        args += ["--ro-bind", str(install), str(install)]
    args += ["--dev", "/dev", "--proc", "/proc", "--size", str(512 * 1024 * 1024), "--tmpfs", "/tmp"]
    args += ["--bind", str(profile), str(profile), "--chdir", str(profile)]
    for name, value in {"HOME": "/tmp", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TMPDIR": "/tmp"}.items():
        args += ["--setenv", name, value]
    return [*args, "--"]


@functools.cache
def _jail_problem(uid: int | None) -> str | None:
    """Why Chromium cannot run in its own bubblewrap sandbox here (as ``uid``); None when it can."""
    problem = sandbox_problem()
    if problem is not None:
        return problem
    argv = ["bwrap", "--unshare-user", "--unshare-pid", "--ro-bind", "/", "/", "--", "true"]
    switch = {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, **switch)  # type: ignore[call-overload]
    except (OSError, subprocess.SubprocessError) as error:
        return str(error)
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    return None


def browser_unconfined_warning() -> str | None:
    """One line for the run's warnings when Chromium cannot get its own sandbox here; None when it can."""
    problem = _jail_problem(browser_user())
    if problem is None:
        return None
    return (
        f"Chromium runs unconfined: its bubblewrap sandbox cannot start ({problem}); pages can read what its user can."
    )


def browser_command(chromium_path: str, profile: Path) -> tuple[list[str], str]:
    """Chromium's argv (confined where the host allows) and a one-line account of its confinement."""
    uid = browser_user()
    chromium = [chromium_path, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"]
    as_user = "" if uid is None else f" as uid {uid}"
    problem = _jail_problem(uid)
    if problem is None:
        inner = uid if uid is not None else os.geteuid()
        return [*_jail_args(chromium_path, profile, inner), *chromium], f"bubblewrap{as_user}, Chromium's sandbox on"
    # Unconfined: Chromium's own sandbox needs user namespaces too, which the host just refused.
    return [chromium[0], "--no-sandbox", *chromium[1:]], f"UNCONFINED{as_user}: {browser_unconfined_warning()}"
