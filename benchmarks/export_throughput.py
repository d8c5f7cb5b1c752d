"""Export throughput: 10,000 steps from a run database to Step-GRPO and SFT JSON lines.

The database is synthesised rollout-style, without running the graph: 400 instructions x 5
trajectories x 5 steps, each run's final checkpoint written through the project's checkpointer
(content-addressed, as real runs store it) and its row in the runs table. Texts are sized like real
coder turns (a ~2 KB system prompt shared by all, a requirement per instruction, a ~3 KB reply and
~800 B of feedback per step), so a step's prompt holds the whole conversation before it. The
timed part is ``export_trajectories`` end to end: read the runs and final states, rebuild every
prompt from the blob store, compute rewards and advantages, write the file.

    .venv/bin/python -m benchmarks.export_throughput
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from benchmarks.common import REPEATS, Stopwatch, median, print_header, run_main, sized
from webgen_agent.checkpoints.export import export_trajectories
from webgen_agent.checkpoints.runs import RunIndex, RunRecord
from webgen_agent.checkpoints.saver import open_checkpointer
from webgen_agent.checkpoints.store import BlobStore
from webgen_agent.nodes.prompts import CODER_SYSTEM

GROUPS = sized(400, 4)
SAMPLES = 5
STEPS = 5  # rollout trajectories: at most 5 steps (upstream Step-GRPO)


def reply(group: int, sample: int, step: int) -> str:
    lines = [f"  const item{n} = useState('{group}-{sample}-{step}-{n}');" for n in range(45)]
    return (
        f'Step {step}: refining the app.\n<boltArtifact id="app" title="App">\n'
        f'<boltAction type="file" filePath="src/App.jsx">\nexport default function App() {{\n'
        + "\n".join(lines)
        + "\n  return <main />;\n}\n</boltAction>\n</boltArtifact>\n"
    )


def feedback(group: int, sample: int, step: int) -> str:
    return (
        f"Results of step {step} (trajectory {sample} of instruction {group}): the page renders; screenshot "
        f"score {(step + sample) % 5 + 1}/5. Suggestions: " + "tighten the spacing and add the missing list; " * 12
    )


def step_record(
    store: BlobStore, conversation: list[dict[str, str]], group: int, sample: int, step: int
) -> dict[str, Any]:
    completion = store.put_text(reply(group, sample, step))
    score = (group + sample + step) % 5 + 1
    return {
        "index": step,
        "role": "generator" if step == 0 else "refiner",
        "action": "edit",
        "parent": None if step == 0 else step - 1,
        "tests_step": None,
        "prompt_len": len(conversation),
        "prompt": store.put_json(conversation),
        "completion": completion,
        "summary": "wrote src/App.jsx",
        "format_ok": True,
        "problems": [],
        "model": "scripted-coder",
        "screenshot_score": score,
        "gui_score": score if score >= 4 else 0,
        "gui_passed": score == 5,
        "errored": score <= 2,
        "changed": ["src/App.jsx"],
        "files": completion,
        "execution": {
            "ok": True,
            "stage": "ok",
            "error": None,
            "install_ran": step == 0,
            "install_cached": step == 0,
            "server_restarted": step == 0,
            "url": "http://127.0.0.1:5173/",
        },
        "timings": {"refiner": 0.03, "executor": 0.6, "screenshot_judge": 0.05, "critic": 0.001},
        "tokens": {"refiner": {"input": 900 * (step + 1), "output": 800, "calls": 1}},
    }


async def synthesise(db: Path) -> int:
    """Write GROUPS x SAMPLES finished runs of STEPS steps; the number of steps written."""
    store = BlobStore(db)
    runs = RunIndex(db)
    system = store.put_text(CODER_SYSTEM)
    written = 0
    async with open_checkpointer(db, record_runs=False) as saver:
        for group in range(GROUPS):
            requirement = f"Instruction {group}: a website with a searchable list, a form and a summary panel. " * 3
            for sample in range(SAMPLES):
                run_id = f"g{group:03d}-s{sample}"
                conversation = [
                    {"role": "system", "hash": system},
                    {"role": "user", "hash": store.put_text(requirement)},
                ]
                steps = []
                for step in range(STEPS):
                    record = step_record(store, conversation, group, sample, step)
                    steps.append(record)
                    conversation = [
                        *conversation,
                        {"role": "assistant", "hash": record["completion"]},
                        {"role": "user", "hash": store.put_text(feedback(group, sample, step))},
                    ]
                values = {
                    "requirement": requirement,
                    "run_id": run_id,
                    "group_id": f"g{group:03d}",
                    "steps": steps,
                    "conversation": conversation,
                    "current": STEPS - 1,
                    "status": "finished",
                    "chosen_step": max(
                        range(STEPS), key=lambda i: (steps[i]["gui_score"], steps[i]["screenshot_score"], i)
                    ),
                }
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = values
                checkpoint["channel_versions"] = {name: 1 for name in values}
                config: RunnableConfig = {"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}
                await saver.aput(config, checkpoint, {"source": "loop", "step": STEPS, "parents": {}}, {})
                runs.start(
                    RunRecord(run_id=run_id, group_id=f"g{group:03d}", requirement=requirement, out_dir="/dev/null")
                )
                runs.update(run_id, status="finished", steps=STEPS, chosen_step=values["chosen_step"])
                written += STEPS
    store.close()
    return written


async def main() -> dict[str, float]:
    print_header(f"4b. Export throughput: {GROUPS * SAMPLES * STEPS:,} steps")
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="webgen-bench-export-") as scratch:
        base = Path(scratch)
        db = base / "webgen.db"
        with Stopwatch() as watch:
            steps = await synthesise(db)
        print(
            f"  synthesised {GROUPS * SAMPLES:,} runs, {steps:,} steps in {watch.seconds:.1f} s "
            f"(database {db.stat().st_size / 2**20:.0f} MiB)",
            flush=True,
        )
        for export_format in ("step-grpo", "sft"):
            seconds: list[float] = []
            for rep in range(REPEATS):
                out = base / f"{export_format}-{rep}.jsonl"
                with Stopwatch() as watch:
                    report = await export_trajectories(export_format, out, db_path=db)
                seconds.append(watch.seconds)
                size = out.stat().st_size
                out.unlink()
            figures[f"{export_format}_s"] = median(seconds)
            print(
                f"  {export_format}: {report.records:,} records ({size / 2**20:.0f} MiB) in {median(seconds):.2f} s "
                f"= {report.records / median(seconds):,.0f} records/s [median of {REPEATS}]"
                + (" (target: 10,000 steps <= 5 s)" if export_format == "step-grpo" else ""),
                flush=True,
            )
    figures["steps"] = float(steps)
    return figures


if __name__ == "__main__":
    run_main(main)
