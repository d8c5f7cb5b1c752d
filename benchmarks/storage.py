"""Storage per step: a 20-step run that edits one file of a 40-file project.

Prints the bytes the run database grows by per step (blobs, checkpoints, checkpoint writes) against
what a full copy of the project per step would take. Run: .venv/bin/python benchmarks/storage.py
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
from pathlib import Path

from benchmarks.common import sized
from webgen_agent.apps.demo import scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.graph.api import run_requirement

FILES = sized(40, 6)
STEPS = sized(20, 3)


def module(n: int, version: int) -> str:
    body = "\n".join(f"export function helper{n}_{i}(x) {{ return x * {i} + {version}; }}" for i in range(60))
    return f"// module {n}, version {version}\n{body}\n"


def artifact(files: dict[str, str]) -> str:
    actions = "\n".join(f'<boltAction type="file" filePath="{p}">{c}</boltAction>' for p, c in files.items())
    return f'<boltArtifact id="big" title="Big project">\n{actions}\n</boltArtifact>'


def scenario() -> dict:
    first = {
        "index.html": "<!doctype html><html><body><h1>Forty modules</h1>"
        "<script type=module src=js/m0.js></script></body></html>"
    }
    first |= {f"js/m{n}.js": module(n, 0) for n in range(FILES - 1)}
    rules = [{"model": "scripted-coder", "turn": 0, "content": artifact(first)}]
    rules += [
        {"model": "scripted-coder", "turn": k, "content": artifact({"js/m5.js": module(5, k)})} for k in range(1, STEPS)
    ]
    rules.append(
        {
            "model": "scripted-vlm",
            "schema": "ScreenshotJudgement",
            "json": {"description": "A heading.", "score": 3, "suggestions": ["More content."]},
        }
    )
    rules.append({"model": "scripted-feedback", "schema": "TestInstruction", "json": {"instruction": "Open the page."}})
    return {"name": "storage", "description": "one file changes per step", "rules": rules}


def table_bytes(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return {
            "blobs": conn.execute("SELECT COALESCE(SUM(LENGTH(data)), 0) FROM blobs").fetchone()[0],
            "checkpoints": conn.execute(
                "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints"
            ).fetchone()[0],
            "writes": conn.execute("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes").fetchone()[0],
            "file": db.stat().st_size,
        }


async def stored_bytes(base: Path, server_url: str, steps: int) -> tuple[dict[str, int], Path]:
    db = base / f"run{steps}.db"
    context = scripted_context(server_url, max_steps=steps, backtrack=False)
    await run_requirement(
        "Forty modules", context=context, run_id=f"storage{steps}", out_dir=base / f"out{steps}", db_path=db
    )
    return table_bytes(db), base / f"out{steps}" / "site"


async def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        (base / "scenario.json").write_text(json.dumps(scenario()))
        with ScriptedServer(Scenario.load(base / "scenario.json")) as server:
            one, _ = await stored_bytes(base, server.base_url, 1)
            full, site = await stored_bytes(base, server.base_url, STEPS)
        project = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
        changed = len(module(5, 1).encode())

        def total(sizes: dict[str, int]) -> int:
            return sizes["blobs"] + sizes["checkpoints"] + sizes["writes"]

        per_step = (total(full) - total(one)) / (STEPS - 1)
        print(f"project: {FILES} files, {project:,} bytes; each later step rewrites one file of {changed:,} bytes")
        print(
            f"after step 0: {total(one):,} bytes stored (blobs {one['blobs']:,}, checkpoints {one['checkpoints']:,}, "
            f"writes {one['writes']:,})"
        )
        print(
            f"after {STEPS} steps: {total(full):,} bytes stored (blobs {full['blobs']:,}, "
            f"checkpoints {full['checkpoints']:,}, writes {full['writes']:,}); database file {full['file']:,} bytes"
        )
        print(
            f"each later step adds {per_step:,.0f} bytes; a full project copy per step would add {project:,} bytes "
            f"({project / per_step:.1f}x more); the edited file itself is {changed:,} bytes"
        )


if __name__ == "__main__":
    asyncio.run(main())
