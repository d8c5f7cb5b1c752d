"""Measure what a WebGen-Bench run costs the framework itself, with the scripted model (no LLM latency).

Runs ``run_bench`` on the shipped sample (9 instructions, 58 test cases) against the scripted
OpenAI-compatible server: for every instruction the coder writes a real Vite + React app, the judge
grades it 4/5, the GUI test runs (agent: one click, then YES) and the run finishes after that one
step; evaluation then starts every site and runs every test case as a real browser-use session of
two steps (a click, then YES), and grades every landing page. Model answers are instant, so the
times are framework overhead (npm, dev servers, Chromium, browser-use, bookkeeping); prompt token
counts are the scripted server's estimate (characters / 4 + 765 per image) of what the framework
sends, completions are the scripted replies.

    .venv/bin/python benchmarks/webgen_bench_overhead.py [--out DIR] [--workers 2] [--limit N]

Prints a JSON report; docs/benchmark.md quotes its figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from webgen_agent.apps.bench.config import EvalSettings
from webgen_agent.apps.bench.service import run_bench
from webgen_agent.apps.bench.views import GenerationRecord
from webgen_agent.apps.demo import scripted_context
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.tools.webgen_bench import load_records

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "data" / "webgen-bench-sample.jsonl"

APP_FILES = {
    "package.json": json.dumps(
        {
            "name": "bench-app",
            "private": True,
            "type": "module",
            "scripts": {"dev": "vite"},
            "dependencies": {"react": "^18.3.1", "react-dom": "^18.3.1"},
            "devDependencies": {"vite": "^5.4.0", "@vitejs/plugin-react": "^4.3.0"},
        },
        indent=2,
    ),
    "vite.config.js": "import { defineConfig } from 'vite';\nimport react from '@vitejs/plugin-react';\n"
    "export default defineConfig({ plugins: [react()] });",
    "index.html": '<!doctype html><html lang="en"><head><meta charset="UTF-8" /><title>App</title></head>'
    '<body><div id="root"></div><script type="module" src="/src/main.jsx"></script></body></html>',
    "src/main.jsx": "import React from 'react';\nimport { createRoot } from 'react-dom/client';\n"
    "import App from './App.jsx';\ncreateRoot(document.getElementById('root')).render(<App />);",
    "src/App.jsx": """import React, { useState } from 'react';
export default function App() {
  const [opened, setOpened] = useState(false);
  return (
    <main style={{ fontFamily: 'sans-serif', padding: 32 }}>
      <h1>Dashboard</h1>
      <nav><button onClick={() => setOpened(true)}>Open section</button></nav>
      {opened && <p>Section: details are shown</p>}
    </main>
  );
}""",
}


def _artifact() -> str:
    actions = "\n".join(f'<boltAction type="file" filePath="{p}">\n{t}\n</boltAction>' for p, t in APP_FILES.items())
    return f'<boltArtifact id="app" title="App">\n{actions}\n</boltArtifact>'


def scenario() -> Scenario:
    click = {"agent": {"actions": [{"click": {"target": "Open section"}}]}, "turn": 0}
    done = {"agent": {"actions": [{"done": {"text": "YES - the section opened.", "success": True}}]}}
    rules = [
        {"model": "scripted-coder", "turn": 0, "content": "Here is the app.\n" + _artifact()},
        {"model": "scripted-coder", "content": "finish"},
        {
            "model": "scripted-vlm",
            "schema": "ScreenshotJudgement",
            "json": {"description": "A dashboard.", "score": 4, "suggestions": []},
        },
        {"model": "scripted-vlm", **click},
        {"model": "scripted-vlm", **done},
        {"model": "scripted-feedback", "schema": "TestInstruction", "json": {"instruction": "Open the section."}},
        {"model": "scripted-feedback", "schema": "GuiVerdict", "json": {"passed": True, "score": 5, "suggestions": []}},
        {"model": "scripted-eval", "contains": ["Modernness and beauty"], "content": "Analysis: tidy.\n\nGrade: 4"},
        {"model": "scripted-eval", **click},
        {"model": "scripted-eval", **done},
    ]
    return Scenario.model_validate({"name": "bench-overhead", "rules": rules})


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {
        "mean": round(statistics.mean(values), 2),
        "median": round(statistics.median(values), 2),
        "max": round(max(values), 2),
    }


async def measure(out: Path, workers: int, limit: int | None) -> dict:
    records = load_records(SAMPLE, limit=limit)
    with ScriptedServer(scenario()) as server:
        context = scripted_context(server.base_url, max_steps=3)
        eval_role = context.vlm.model_copy(update={"model": "scripted-eval"})
        settings = EvalSettings(agent=eval_role, appearance=eval_role, feedback=eval_role, workers=workers)
        started = time.monotonic()
        summary = await run_bench(records, data=SAMPLE, out_dir=out, eval_settings=settings, context=context)
        wall = time.monotonic() - started
    generated = [
        GenerationRecord.model_validate_json(line) for line in (out / "generation.jsonl").read_text().splitlines()
    ]
    cases = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    sites = [json.loads(line) for line in (out / "sites.jsonl").read_text().splitlines()]
    runs = [json.loads((out / "runs" / g.record_id / "run.json").read_text()) for g in generated]
    per_node: dict[str, list[float]] = {}
    for run in runs:
        for step in run["steps"]:
            for node, seconds in step["timings"].items():
                per_node.setdefault(node, []).append(seconds)
    return {
        "instructions": len(records),
        "test_cases": len(cases),
        "workers": workers,
        "wall_seconds": round(wall, 1),
        "accuracy": summary.overall.accuracy,
        "generation_per_instruction": {
            "wall_seconds": _stats([g.seconds for g in generated]),
            "node_seconds": _stats([g.node_seconds for g in generated]),
            "steps": _stats([float(g.steps) for g in generated]),
            "input_tokens": _stats([float(g.input_tokens) for g in generated]),
            "output_tokens": _stats([float(g.output_tokens) for g in generated]),
            "model_calls": _stats([float(g.model_calls) for g in generated]),
            "node_seconds_by_node": {node: _stats(values) for node, values in sorted(per_node.items())},
        },
        "evaluation_per_test_case": {
            "seconds": _stats([c["seconds"] for c in cases]),
            "input_tokens": _stats([float(c["input_tokens"]) for c in cases]),
            "output_tokens": _stats([float(c["output_tokens"]) for c in cases]),
            "model_calls": _stats([float(c["model_calls"]) for c in cases]),
        },
        "evaluation_per_site": {
            "start_seconds": _stats([s["install_s"] + s["start_s"] for s in sites]),
            "seconds": _stats([s["seconds"] for s in sites]),
            "input_tokens": _stats([float(s["input_tokens"]) for s in sites]),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="Output folder (default: a temporary one).")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="webgen-bench-overhead-"))
    try:
        report = asyncio.run(measure(out, args.workers, args.limit))
    finally:
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
