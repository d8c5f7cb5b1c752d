"""A run started from the user's folder (``run --from``): the project as the coder's first turn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# Purpose: the user's project as the conversation's first assistant turn, in the edit format the
# coder writes, so that later turns edit it as their own. Step 0 writes nothing from it: its files
# are the folder's (binary ones too), and no export trains on this turn (docs/exports.md).
IMPORTED_PROJECT = """<boltArtifact id="imported-project" title="The user's existing project ({folder}), imported as it is">
{files}
</boltArtifact>{others}"""

IMPORTED_FILE = """<boltAction type="file" filePath="{path}">
{content}
</boltAction>"""

# Purpose: name the files the turn does not show, so the coder knows they are there.
IMPORTED_OTHERS = "\n\nAlso in the project, not shown here (binary, or over {limit_kb} KiB): {paths}."


def imported_project(folder: str, texts: Mapping[str, str], others: Sequence[str], limit_kb: int) -> str:
    files = "\n".join(IMPORTED_FILE.format(path=path, content=text.rstrip("\n")) for path, text in texts.items())
    rest = IMPORTED_OTHERS.format(limit_kb=limit_kb, paths=", ".join(others)) if others else ""
    return IMPORTED_PROJECT.format(folder=folder, files=files, others=rest)
