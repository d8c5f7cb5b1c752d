"""Project scaffolds (WebGen-R1-style structured generation): fixed files, a route manifest, a check.

A scaffold is a folder of files the workspace starts from (``scaffold_files/<name>/``) and a description
(``scaffold_files/<name>.json``): which files are fixed (edits to them are refused with a message for
the model), which the coder fills, and the route manifest that declares the site's pages. The
structural check runs before anything is installed: every declared route must exist and name a
page that renders a component (React) or a whole HTML document (static).
"""

from __future__ import annotations

import json
import re
from importlib import resources as package_files
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

ScaffoldKind = Literal["react-router", "static-pages"]
_PAGE_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_EXPORT_DEFAULT = re.compile(r"\bexport\s+default\b")


class ScaffoldError(ValueError):
    """An unknown scaffold name or a broken scaffold description; one line for the user."""


class Scaffold(BaseModel):
    """A scaffold's description (``scaffold_files/<name>.json``)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    kind: ScaffoldKind
    routes_file: str = Field(description="Workspace path of the route manifest.")
    fixed: list[str] = Field(description="Files the coder may not change.")
    fillable: list[str] = Field(description="What the coder writes (patterns, for the prompt).")
    guide: str = Field(description="How the scaffold works, for the coder's prompt.")

    @property
    def files_dir(self) -> Path:
        return _root() / self.name

    def refusal(self, rel_path: str) -> str | None:
        """Why the coder may not write ``rel_path``, or None when it may."""
        if rel_path in self.fixed:
            return (
                f"{rel_path} is a fixed file of the {self.name} scaffold and was not changed; "
                f"write only these: {', '.join(self.fillable)}"
            )
        return None

    def routes(self, workspace: Path) -> list[str]:
        """The declared route paths (empty when the manifest is unreadable; ``check`` says why)."""
        entries, _ = self._manifest(workspace)
        return [e["path"] for e in entries]

    def check(self, workspace: Path) -> list[str]:
        """Structural problems, for the coder (empty when every declared route has its page)."""
        entries, problems = self._manifest(workspace)
        if problems:
            return problems
        paths = [e["path"] for e in entries]
        if "/" not in paths:
            problems.append(f'{self.routes_file} declares no route for "/" (the landing page).')
        duplicates = sorted({p for p in paths if paths.count(p) > 1})
        if duplicates:
            problems.append(f"{self.routes_file} declares these paths twice: {', '.join(duplicates)}.")
        for entry in entries:
            problems.extend(self._page_problems(workspace, entry))
        return problems

    def _manifest(self, workspace: Path) -> tuple[list[dict[str, str]], list[str]]:
        path = workspace / self.routes_file
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return [], [f"The route manifest {self.routes_file} is missing."]
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return [], [f"The route manifest {self.routes_file} is not valid JSON: {exc}."]
        key = "page" if self.kind == "react-router" else "file"
        if not isinstance(data, list) or not data:
            return [], [f"The route manifest {self.routes_file} must be a non-empty JSON list of routes."]
        entries: list[dict[str, str]] = []
        problems: list[str] = []
        for position, item in enumerate(data):
            if not (isinstance(item, dict) and all(isinstance(item.get(k), str) for k in ("path", "title", key))):
                problems.append(
                    f"Route {position} of {self.routes_file} must be an object with string fields path, title and {key}."
                )
            elif not item["path"].startswith("/"):
                problems.append(
                    f"Route {position} of {self.routes_file}: the path {item['path']!r} must start with '/'."
                )
            else:
                entries.append(item)
        return entries, problems

    def _page_problems(self, workspace: Path, entry: dict[str, str]) -> list[str]:
        where = f"route {entry['path']}"
        if self.kind == "react-router":
            name = entry["page"]
            if not _PAGE_NAME.match(name):
                return [f"{where}: the page name {name!r} must be a component name such as About."]
            rel = f"src/pages/{name}.jsx"
            text = _read(workspace / rel)
            if text is None:
                return [f"{where}: its page file {rel} does not exist."]
            if not _EXPORT_DEFAULT.search(text):
                return [f"{where}: {rel} does not `export default` a component."]
            return []
        rel = entry["file"]
        expected = "/" if rel == "index.html" else f"/{rel}"
        problems = []
        if not rel.endswith(".html") or "/" in rel:
            return [f"{where}: the file {rel!r} must be an .html file at the top of the project."]
        if entry["path"] != expected:
            problems.append(f"{where}: a page in {rel} is served at {expected}, not {entry['path']}.")
        text = _read(workspace / rel)
        if text is None:
            problems.append(f"{where}: its file {rel} does not exist.")
        elif "<body" not in text.lower():
            problems.append(f"{where}: {rel} is not a whole HTML document (no <body>).")
        return problems


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _root() -> Path:
    return Path(str(package_files.files("webgen_agent.tools") / "scaffold_files"))


def scaffold_names() -> list[str]:
    return sorted(p.stem for p in _root().glob("*.json"))


def load_scaffold(name: str) -> Scaffold:
    """The scaffold called ``name``; ScaffoldError (one line) when there is none."""
    path = _root() / f"{name}.json"
    if not name or not path.is_file():
        raise ScaffoldError(f"unknown scaffold {name!r}; choose one of: {', '.join(scaffold_names())}")
    try:
        return Scaffold.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise ScaffoldError(f"scaffold {name!r} is broken: {exc.errors()[0]['msg']}") from None
