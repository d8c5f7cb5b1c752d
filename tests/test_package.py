"""The package installs like a package: a built wheel, in a virtualenv of its own, runs the demo from
a folder that is not the checkout (scenarios, scaffold files and the sandbox's JS helper are package
data), and ``demo --prepare`` caches exactly the npm packages the demo then installs without npm's
registry (what scripts/setup.sh does before the README's first demo).

The new virtualenv holds the wheel alone and borrows the suite's installed dependencies through a
path entry (not the suite's editable install, whose finder would import the checkout): resolving
and downloading them again would test pip, not the package.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
SOURCE_SKIPPED = (
    ".git",
    ".venv*",
    "build",
    "*.egg-info",
    ".webgen",
    "webgen-runs",
    "node_modules",
    "__pycache__",
    ".*_cache",
)
UNREACHABLE_REGISTRY = "http://127.0.0.1:9/"  # the discard port: nothing answers there


def _run(args: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{args} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv holding the project's wheel (built from this checkout), not the checkout."""
    base = tmp_path_factory.mktemp("wheel")
    # Built from a copy without build/ and *.egg-info: setuptools would pack files left there by an
    # earlier build, hiding package data the configuration no longer names.
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*SOURCE_SKIPPED))
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(base / "dist"),
            str(source),
        ],
        timeout=300,
    )
    (wheel,) = (base / "dist").glob("webgen_agent-*.whl")
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "-q",
            "--no-deps",
            str(wheel),
        ],
        timeout=300,
    )
    (purelib,) = (venv / "lib").glob("python3*/site-packages")
    # Path entries only: the .pth files in those folders (the suite's editable finder) are not run.
    borrowed = [entry for entry in sys.path if entry.endswith("site-packages")]
    (purelib / "suite-dependencies.pth").write_text("\n".join(borrowed) + "\n")
    return venv


def test_the_wheel_is_imported_not_the_checkout(installed_wheel: Path, tmp_path: Path) -> None:
    done = _run(
        [str(installed_wheel / "bin" / "python"), "-c", "import webgen_agent.apps.demo as d; print(d.__file__)"],
        cwd=tmp_path,
        timeout=120,
    )
    assert Path(done.stdout.strip()).is_relative_to(installed_wheel)


def test_wheel_prepares_and_runs_the_demo_from_any_folder(
    installed_wheel: Path, tmp_path: Path, chromium_path: str
) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("WEBGEN_DEPS_CACHE", "WEBGEN_STATE_DIR", "PYTHONPATH")
    }
    env["WEBGEN_CHROMIUM"] = chromium_path
    cli = str(installed_wheel / "bin" / "webgen-agent")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    prepared = _run([cli, "demo", "--prepare"], cwd=elsewhere, env=env, timeout=600)
    assert "dependency cache" in prepared.stdout
    assert (elsewhere / ".webgen" / "deps-cache").is_dir()

    # npm's registry gone: the demo must install everything from what --prepare cached.
    offline = {**env, "npm_config_registry": UNREACHABLE_REGISTRY}
    done = _run([cli, "demo"], cwd=elsewhere, env=offline, timeout=600)
    (out,) = (elsewhere / "webgen-runs").iterdir()
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "finished" and run["chosen_step"] == 3, done.stdout
    assert (out / "report.html").is_file()
    assert "setItems([...items, text])" in (out / "site" / "src" / "App.jsx").read_text()
