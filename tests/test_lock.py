"""The lock files scripts/setup.sh installs from (requirements/*.txt, with --no-deps) hold a version of
every dependency pyproject.toml names, inside its range: a dependency added or narrowed without
running scripts/lock.sh fails here, not as an ImportError on a fresh machine."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
NOT_LOCKED = {"torch"}  # installed by pip from the CPU build (scripts/setup.sh)


def _pins(name: str) -> dict[str, list[Version]]:
    pins: dict[str, list[Version]] = {}
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        if "==" in line and not line.lstrip().startswith("#"):
            requirement = Requirement(line)
            (version,) = (spec.version for spec in requirement.specifier)
            pins.setdefault(canonicalize_name(requirement.name), []).append(Version(version))
    return pins


@pytest.mark.parametrize(
    ("lock", "extras"),
    [("lean.txt", ()), ("studio.txt", ("studio", "postgres")), ("test.txt", ("test", "train", "studio"))],
)
def test_the_lock_holds_every_dependency_in_range(lock: str, extras: tuple[str, ...]) -> None:
    pins = _pins(lock)
    wanted = [*PROJECT["dependencies"], *(dep for extra in extras for dep in PROJECT["optional-dependencies"][extra])]
    missing = []
    for text in wanted:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        if name in NOT_LOCKED:
            continue
        if not any(requirement.specifier.contains(version, prereleases=True) for version in pins.get(name, [])):
            missing.append(f"{text} (locked: {pins.get(name)})")
    assert not missing, f"{lock} is out of date, run scripts/lock.sh: {missing}"
