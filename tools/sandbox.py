"""The sandbox every process that runs generated code starts in (bubblewrap, resource limits).

``Confinement.command`` turns a command line into a ``bwrap`` command line: an allow-list of the
host's filesystem (the system folders, the few /etc entries programs read, the toolchains) read-only,
/tmp and the run's own folder empty private ones, the workspace (and only it) writable, new user,
PID, IPC, UTS and network namespaces, a cleared environment holding only an allow-list, and
``prlimit`` setting CPU time, data size, file size and process limits inside. Everything else of the
host (the homes, /root, the run database, the dependency cache, the process registry, the runs
folder, the user's project, /sys) is absent inside. In its own network namespace a command reaches
nothing but what the agent relays (``tools.netns``): installs and shell actions the registry through
the agent's proxy, the agent a dev server's port.

The whole sandbox (all its processes together) is capped by a cgroup where one can be made
(``tools.limits``: processes, memory, CPU). Without one a fork bomb is still stopped by
``RLIMIT_NPROC`` inside the user namespace, which the kernel enforces per sandbox for a non-root
caller (for a root caller it does not: hence the cgroup). The PID namespace makes the whole tree
die with its first process.

Hand-written on top of bwrap because no maintained Python library wraps it; bwrap itself does the
confining.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from webgen_agent.core.context import SandboxSettings
from webgen_agent.core.errors import ConfigError
from webgen_agent.tools.bridge_python import bridge_python
from webgen_agent.tools.limits import tree_usage
from webgen_agent.tools.netns import NetworkGate, NetworkPolicy, bridge_command, bwrap_args, proxy_env, registry_hosts
from webgen_agent.tools.seccomp import seccomp_problem

SANDBOX_HOME = "/tmp/home"  # the private HOME inside (on the sandbox's own /tmp)
SANDBOX_NPM_CACHE = "/tmp/npm-cache"  # npm's cache inside: a private folder (tools.npm_cache), else empty
_INNER_UID = 1000  # the user a root caller's commands run as inside (a non-root caller keeps its own)
# Variables a generated process may see; everything else is dropped (the caller's env is already scrubbed).
_ALLOWED_NAMES = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "CI",
        "NO_COLOR",
        "FORCE_COLOR",
        "BROWSER",
        "PORT",
        "HOST",
        "NODE_ENV",
        "NODE_EXTRA_CA_CERTS",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
    }
)
# npm settings that would point npm outside the sandbox's own folders.
_NPM_PATH_SETTINGS = ("cache", "userconfig", "globalconfig", "prefix", "logs_dir", "tmp")
# The host folders every sandbox sees, read-only (on merged-/usr systems the rest are links into /usr).
_SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The /etc entries programs read: name lookup, TLS roots (certs only, never ssl/private), users and
# groups (names, no shadow), time zone, the dynamic linker, npm's and openssl's configuration.
_ETC_ENTRIES = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "ssl/certs",
    "ssl/openssl.cnf",
    "pki/tls/certs",
    "pki/ca-trust/extracted",
    "resolv.conf",
    "hosts",
    "host.conf",
    "gai.conf",
    "nsswitch.conf",
    "passwd",
    "group",
    "localtime",
    "timezone",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "npmrc",
    "mime.types",
    "protocols",
    "services",
    "os-release",
    "shells",
)
# Empty private folders (in memory, sized) inside; the private home lives in /tmp.
_PRIVATE_FOLDERS = ("/tmp", "/var/tmp")
# Build caches inside node_modules that dev servers write (vite's optimizer and config bundle,
# babel and webpack caches); never part of the dependency cache, writable to a sandboxed server.
BUILD_CACHES = (".vite", ".cache", ".vite-temp")
# Scripts npm runs during `npm install` of the project itself: model-written code whose effects the
# dependency key does not cover, so such an install is never stored in the shared cache.
_INSTALL_SCRIPTS = ("preinstall", "install", "postinstall", "prepublish", "preprepare", "prepare", "postprepare")


UNCONFINED_WARNING = (
    "The sandbox is off (--no-sandbox): generated code (npm install scripts, the dev server, shell "
    "actions) runs unconfined, as this user, with this user's files and no resource limits."
)


class SandboxUnavailable(ConfigError):
    """bwrap cannot run here; the message is one line and names --no-sandbox."""


@functools.cache
def sandbox_problem() -> str | None:
    """Why the sandbox cannot run on this machine (one line), or None when it can. Probed once."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    if shutil.which("prlimit") is None:
        return "prlimit (util-linux) is not installed"
    if (problem := seccomp_problem()) is not None:
        return problem
    probe = [bwrap, *_namespace_args(), *system_binds(), "--dev", "/dev", "--proc", "/proc", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap does not run ({exc})"
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return f"bwrap cannot create its namespaces here ({reason})"
    return None


def require_sandbox() -> None:
    """Raise SandboxUnavailable (one line, naming --no-sandbox) when bwrap cannot run."""
    problem = sandbox_problem()
    if problem is not None:
        raise SandboxUnavailable(
            f"The sandbox for generated code cannot start: {problem}. Fix: {sandbox_fix(problem)}, "
            "or pass --no-sandbox to run generated code unconfined."
        )


def sandbox_fix(problem: str) -> str:
    """What makes the sandbox work, for ``problem`` (from ``sandbox_problem``)."""
    if problem.startswith("bwrap cannot create its namespaces"):
        # Installed but refused: user namespaces off in the kernel, or a container's runtime.
        return "allow unprivileged user namespaces (in a container: docs/deploy.md says how)"
    return "install bubblewrap (scripts/setup.sh does)"


@functools.cache
def _disables_userns() -> bool:
    """Whether this bwrap can forbid user namespaces inside (``--disable-userns``, bwrap 0.8 and later)."""
    try:
        shown = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return "--disable-userns" in shown.stdout + shown.stderr


def _namespace_args() -> list[str]:
    uid = _INNER_UID if os.geteuid() == 0 else os.geteuid()
    gid = _INNER_UID if os.geteuid() == 0 else os.getegid()
    # No nested user namespaces: they are where most unprivileged kernel escapes start.
    nested = ["--disable-userns"] if _disables_userns() else []
    return [
        *nested,
        "--unshare-user",
        "--uid",
        str(uid),
        "--gid",
        str(gid),
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "sandbox",
        "--die-with-parent",
        # No --new-session: the sandbox stays in the process group the agent recorded, so the
        # group's kill (a stop, the watchdog, a reap) reaches every process of it. bwrap arms the
        # parent-death signal of the sandbox's first process only after its set-up; an outer bwrap
        # killed before then would leave it running, reparented to init, in a session of its own.
        # It is still cut off from any terminal: the agent starts it in a new session, with stdin
        # from /dev/null and output to a file.
        "--cap-drop",
        "ALL",
    ]


def system_binds() -> list[str]:
    """bwrap arguments showing the host's system folders and the /etc entries programs need, read-only.

    Everything not named here (or a toolchain, or the workspace) is absent inside: an allow-list, so a
    database, cache or project the agent keeps anywhere on the host stays out without being listed.
    """
    args: list[str] = []
    for folder in _SYSTEM_FOLDERS:
        path = Path(folder)
        if path.is_symlink():  # merged /usr: /bin -> usr/bin and the like
            args += ["--symlink", os.readlink(path), folder]
        elif path.is_dir():
            args += ["--ro-bind", folder, folder]
    for name in _ETC_ENTRIES:
        path = Path("/etc", name)
        # A symlinked entry (resolv.conf into /run, localtime into /usr/share) is bound by its target.
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _private_folders(extra: Sequence[Path], workspace: Path) -> list[Path]:
    """Folders that are empty, private and sized inside: the temporary folders and ``extra`` (the run folder)."""
    found: list[Path] = []
    for path in (*map(Path, _PRIVATE_FOLDERS), *extra):
        with contextlib.suppress(OSError):
            path = path.resolve()
        if len(path.parts) > 1 and path != workspace and path not in found:
            found.append(path)
    # Outer folders first: a folder inside another must be mounted after it.
    return sorted(found, key=lambda p: len(p.parts))


def _under(path: Path, folders: Sequence[Path]) -> bool:
    return any(path == folder or path.is_relative_to(folder) for folder in folders)


def _tool_folders(argv: Sequence[str], env: Mapping[str, str], extra: Sequence[str] = ()) -> list[Path]:
    """Where the command's own tools live (node, npm, the command itself, ``extra``), to show them read-only.

    A tool in ``.../bin`` keeps its whole prefix (npm's bin links point into ``../lib``). Folders
    the system binds already show (``/usr``) are left out. The agent's own Python (its virtualenv)
    is not a tool of generated code and stays absent.
    """
    shown = [Path(folder).resolve() for folder in _SYSTEM_FOLDERS if Path(folder).is_dir()]
    folders: list[Path] = []
    for tool in ("node", "npm", "npx", *argv[:1], *extra):
        found = shutil.which(tool, path=env.get("PATH"))
        if found is None:
            continue
        for path in {Path(found).parent, Path(found).resolve().parent}:
            prefix = path.parent if path.name == "bin" else path
            if prefix.is_dir() and not _under(prefix.resolve(), shown) and prefix not in folders:
                folders.append(prefix)
    return folders


def sandbox_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables a sandboxed command gets: the allow-list, npm settings minus paths, a private HOME."""
    kept = {}
    for name, value in env.items():
        lower = name.lower()
        if name in _ALLOWED_NAMES or name.startswith("LC_"):
            kept[name] = value
        elif lower.startswith("npm_config_") and lower.removeprefix("npm_config_") not in _NPM_PATH_SETTINGS:
            kept[name] = value
    kept.update(
        HOME=SANDBOX_HOME,
        TMPDIR="/tmp",
        USER="sandbox",
        npm_config_cache=SANDBOX_NPM_CACHE,
        npm_config_logs_dir="/tmp/npm-logs",
    )
    return kept


@dataclass(frozen=True)
class Confinement:
    """What one sandboxed command may touch.

    ``workspace`` is writable; ``read_only`` paths inside it are bound read-only over themselves
    (the dependency cache's hardlinked node_modules), ``writable`` paths inside those are opened
    again (build caches); ``npm_cache`` is a private folder bound as npm's cache (``tools.npm_cache``;
    without one npm's cache is an empty folder on the sandbox's own /tmp, and the user's ~/.npm is
    never shown), ``npm_cache_seed_bytes`` what it held before the command (the workspace's size cap
    covers what the command adds to it); ``hide`` adds folders shown as empty private ones (the run
    folder around the workspace, so that writing beside the workspace goes nowhere); ``network`` says
    what the command may reach (by default its own network namespace with nothing in it: ``tools.netns``).
    """

    workspace: Path
    settings: SandboxSettings = field(default_factory=SandboxSettings)
    read_only: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    hide: tuple[Path, ...] = ()
    npm_cache: Path | None = None
    npm_cache_seed_bytes: int = 0
    network: NetworkPolicy = field(default_factory=NetworkPolicy)

    def command(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        gate: NetworkGate | None = None,
        *,
        seccomp_fd: int | None = None,
    ) -> list[str]:
        """``bwrap ... prlimit ... -- argv``: ``argv`` confined, with ``env`` filtered (see ``sandbox_env``).

        ``gate`` (opened for ``network`` by the caller, it must outlive the process) adds the doors
        of the network namespace: the bridge before ``argv``, the proxy's settings in the environment.
        ``seccomp_fd``: a descriptor the command inherits holding the seccomp program (``tools.seccomp``).
        """
        workspace = self.workspace.resolve()
        args = ["bwrap", "--clearenv", *_namespace_args(), *system_binds(), "--dev", "/dev", "--proc", "/proc"]
        # Each private folder is memory: sized, or one sandbox could fill half the host's RAM.
        tmpfs_size = str(self.settings.tmpfs_mb * 1024 * 1024)
        for folder in _private_folders(self.hide, workspace):
            args += ["--size", tmpfs_size, "--tmpfs", str(folder)]
        for folder in _tool_folders(argv, env):
            if not _under(folder.resolve(), [workspace]):
                args += ["--ro-bind", str(folder), str(folder)]
        if gate is not None and (bridge := bridge_python().folder) is not None:
            args += ["--ro-bind", bridge, bridge]  # the network bridge's interpreter, copied out of any home
        args += ["--dir", SANDBOX_HOME, *bwrap_args(self.network, gate)]
        if self.npm_cache is not None and self.npm_cache.is_dir():
            args += ["--bind", str(self.npm_cache), SANDBOX_NPM_CACHE]
        args += ["--bind", str(workspace), str(workspace)]
        for path in self.read_only:
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
        for path in self.writable:
            if path.is_dir():
                args += ["--bind", str(path), str(path)]
        # Last of the mounts: the root bwrap builds (folders made for the mounts above) is read-only.
        args += ["--remount-ro", "/"]
        for name, value in {**sandbox_env(env), **proxy_env(self.network, gate)}.items():
            args += ["--setenv", name, value]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        limits = self.settings
        mb = 1024 * 1024
        args = [
            *args,
            "--chdir",
            str(workspace),
            "--",
            "prlimit",
            f"--cpu={limits.cpu_s}",
            f"--data={limits.memory_mb * mb}",
            f"--fsize={limits.file_size_mb * mb}",
            f"--nproc={limits.max_pids}",
            "--core=0",
            "--",
            *bridge_command(self.network, gate),
            *argv,
        ]
        return args


# -- the dependency cache -------------------------------------------------------------------------


def own_copies(tree: Path) -> int:
    """Replace every hardlinked file under ``tree`` by a private copy; returns how many were copied.

    Run before anything may write into a node_modules the dependency cache shares: a write into a
    hardlinked file would change the cached tree for every run.
    """
    copied = 0
    for dirpath, _dirnames, filenames in os.walk(tree):
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                if os.lstat(path).st_nlink < 2 or os.path.islink(path):
                    continue
                tmp = os.path.join(dirpath, f".{name}.webgen-own")
                shutil.copy2(path, tmp)
                os.replace(tmp, path)
                copied += 1
            except OSError:
                continue
    return copied


_DEPENDENCY_FIELDS = ("dependencies", "devDependencies", "optionalDependencies", "peerDependencies")
# Version specs that fetch from somewhere other than the registry (a folder, a link, git, a URL):
# what they install is not described by the manifest, so such a tree is never shared.
_NON_REGISTRY_PREFIXES = ("file:", "link:", "git", "http:", "https:", "github:", "gitlab:", "bitbucket:", ".", "/", "~")


def registry_spec(spec: Any) -> bool:
    """Whether a dependency's version spec names a registry package (a range, a tag, ``npm:alias@range``)."""
    if not isinstance(spec, str):
        return False
    spec = spec.strip()
    if spec.startswith("npm:"):
        return True
    # "user/repo" is npm's GitHub shorthand.
    return not spec.startswith(_NON_REGISTRY_PREFIXES) and "/" not in spec and "\\" not in spec


def cacheable_install(workspace: Path, package: Mapping[str, Any]) -> bool:
    """Whether an install may be stored in (or restored from) the shared cache.

    Only a project whose manifest says everything that runs and lands in node_modules: registry
    dependencies only (no ``file:``/``link:``/git/URL specs), no workspaces (their manifests and
    scripts are other files), no bundled dependencies, no install scripts of its own, no .npmrc.
    """
    raw = package.get("scripts")
    scripts: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    if any(name in scripts for name in _INSTALL_SCRIPTS) or (workspace / ".npmrc").exists():
        return False
    if any(package.get(name) for name in ("workspaces", "bundleDependencies", "bundledDependencies")):
        return False
    for field_name in (*_DEPENDENCY_FIELDS, "overrides"):
        specs = package.get(field_name)
        if specs is None:
            continue
        if not isinstance(specs, dict):
            return False
        # overrides may nest objects; every leaf must be a registry spec.
        stack: list[Any] = list(specs.values())
        while stack:
            spec = stack.pop()
            if isinstance(spec, dict):
                stack.extend(spec.values())
            elif not registry_spec(spec):
                return False
    return True


def workspace_confinement(
    workspace: Path,
    settings: SandboxSettings,
    purpose: Literal["install", "server", "shell"],
    *,
    hide: Sequence[Path] = (),
) -> Confinement:
    """The sandbox for one command in a project workspace.

    A dev server sees node_modules read-only (its build caches writable): the tree may be the
    dependency cache's, shared by hardlinks with other workspaces. Installs and shell actions must
    get a private copy first (``own_copies``), and a private npm cache (``tools.npm_cache``).
    """
    require_sandbox()
    bridge_python()  # probed (once) where the sandbox is, off any event loop
    node_modules = workspace / "node_modules"
    read_only: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    if purpose == "server" and node_modules.is_dir() and not node_modules.is_symlink():
        read_only = (node_modules,)
        for name in BUILD_CACHES:
            with contextlib.suppress(OSError):
                (node_modules / name).mkdir(exist_ok=True)
        writable = tuple(node_modules / name for name in BUILD_CACHES)
    return Confinement(
        workspace=workspace,
        settings=settings,
        read_only=read_only,
        writable=writable,
        hide=tuple(hide),
        network=network_policy(settings, purpose),
    )


def network_policy(settings: SandboxSettings, purpose: Literal["install", "server", "shell"]) -> NetworkPolicy:
    """Installs and shell actions reach npm's registries and the allowed hosts through the proxy; a
    server (or a build) reaches nothing, and the agent reaches its ports."""
    if purpose == "server":
        return NetworkPolicy(isolated=settings.own_network, forward=True)
    return NetworkPolicy(isolated=settings.own_network, allow_hosts=(*registry_hosts(), *settings.allow_hosts))


def size_problem(workspace: Path, settings: SandboxSettings) -> str | None:
    """A message for the model when the workspace (node_modules included) is over the size cap."""
    used = tree_usage(workspace)
    if used <= settings.workspace_mb * 1024 * 1024:
        return None
    return (
        f"The project folder takes {used / 2**20:.0f} MB, over the {settings.workspace_mb} MB cap for a "
        "workspace: remove large generated files (nothing may be written outside the project)."
    )
