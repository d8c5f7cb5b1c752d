"""The executor's site tooling, one job per module.

- ``runner``: ``SiteRunner`` keeps a workspace's site running (install, start, reuse, wait for HTTP).
- ``deps``: the install (from the dependency cache, else npm) and which trees may be shared;
  ``depcache`` the cache (node_modules trees by manifest, hardlinked), ``integrity`` the proof by
  content a tree passes before it is shared, ``dependency_scripts`` the dependencies' install
  scripts, ``registry`` whether npm's registry answers.
- ``project``: what package.json says (start script, vite, config files) and free ports.
- ``freshness``: whether a kept vite server serves the edited modules as they are on disk.
- ``logs``: log summaries for the coder model, URLs a server announced.
- ``shell``: shell actions the coder model writes.
"""

from webgen_agent.tools.site.depcache import LOCKFILES, DepsCache
from webgen_agent.tools.site.deps import DEPS_MARKER, INSTALL_RETRIES, NPM_INSTALL, InstallResult
from webgen_agent.tools.site.freshness import ServedModule
from webgen_agent.tools.site.logs import printed_urls, summarize_log
from webgen_agent.tools.site.project import (
    CONFIG_PATTERNS,
    config_fingerprint,
    free_port,
    is_config_path,
    read_package_json,
    runs_vite,
    start_command,
    vite_module_path,
)
from webgen_agent.tools.site.runner import ExecutionResult, Kind, SiteRunner, Stage
from webgen_agent.tools.site.shell import run_shell

__all__ = [
    "CONFIG_PATTERNS",
    "DEPS_MARKER",
    "INSTALL_RETRIES",
    "LOCKFILES",
    "NPM_INSTALL",
    "DepsCache",
    "ExecutionResult",
    "InstallResult",
    "Kind",
    "ServedModule",
    "SiteRunner",
    "Stage",
    "config_fingerprint",
    "free_port",
    "is_config_path",
    "printed_urls",
    "read_package_json",
    "run_shell",
    "runs_vite",
    "start_command",
    "summarize_log",
    "vite_module_path",
]
