"""docs/architecture.md's layout table is the tree: each layer's row names every module and
sub-package of its folder, and every file or folder it names is there (as the node table is
checked against the compiled graph by tests/test_graph_drawing.py)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _rows() -> dict[str, str]:
    """Folder (``apps/``) -> the row's "holds" cell."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index("| layer | folder | package | holds |") :].split("\n\n", 1)[0]
    rows = {}
    for row in table.splitlines()[2:]:
        _, folder, _, holds = (cell.strip() for cell in row.strip("|").split("|", 3))
        rows[folder.strip("`")] = holds
    return rows


def _entries(folder: Path) -> set[str]:
    """A folder's modules (``x.py``) and sub-packages or data folders (``x/``), as the table names them."""
    found = {f"{p.name}/" for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"}
    return found | {p.name for p in folder.glob("*.py") if p.name != "__init__.py"}


def test_the_layout_table_names_each_layer_folder() -> None:
    assert set(_rows()) == {"apps/", "graph/", "nodes/", "tools/", "checkpoints/", "core/"}


def test_each_row_names_every_module_and_package_of_its_folder() -> None:
    for folder, holds in _rows().items():
        named = set(re.findall(r"`([\w.]+/?)`", holds))
        missing = _entries(ROOT / folder) - named
        assert not missing, f"docs/architecture.md's {folder} row leaves out {sorted(missing)}"


def test_every_file_the_table_names_is_there() -> None:
    for folder, holds in _rows().items():
        for name in re.findall(r"`([\w]+(?:\.py|/))`", holds):
            assert list((ROOT / folder).rglob(name.rstrip("/"))), f"{folder} row names {name}, not in the tree"
