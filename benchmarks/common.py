"""What the benchmark scripts share: the machine they ran on, medians, memory sampling, the Vite app.

Benchmarks print figures; nothing here asserts a timing.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import psutil

from webgen_agent.core.context import find_chromium
from webgen_agent.core.errors import ConfigError

T = TypeVar("T")
# A quick run (``python -m benchmarks --quick``, which CI runs): tiny sizes and one round, so that a
# broken benchmark fails CI. Its figures are not measurements.
QUICK = os.environ.get("WEBGEN_BENCH_QUICK") == "1"


def sized(full: T, quick: T) -> T:
    """A benchmark's size: ``full`` for a measurement, ``quick`` in a quick run."""
    return quick if QUICK else full


REPEATS = sized(3, 1)  # every figure is the median of this many runs (the suite must fit 15 minutes on 2 cores)


def median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


def machine() -> str:
    """CPU model, cores, RAM, OS and tool versions, for the performance notes."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = psutil.virtual_memory().total / 2**30
    node = _version(["node", "--version"])
    try:
        browser = find_chromium()
        chromium = f"{_version([browser, '--version'])} ({Path(browser).name})"
    except ConfigError as error:
        chromium = str(error)
    return (
        f"{cpu}, {os.cpu_count()} cores, {ram:.0f} GiB RAM, {platform.platform()}, "
        f"Python {platform.python_version()}, Node {node}, {chromium}"
    )


def _version(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


class TreeMemory:
    """Samples the memory of this process plus all its descendants (dev servers, npm, Chromium) in a thread.

    ``window()`` starts a new peak; ``peak`` (PSS) and ``peak_rss`` are the highest sums seen since.
    PSS (proportional set size) splits each page shared by several processes among them, so a sum
    over a process tree is what the tree really occupies. RSS counts a shared page once per process
    that maps it: Chromium's renderers map the same ~100 MB of code and fonts, so RSS sums over
    a browser with many renderers overstate several times over. Both are reported.
    """

    # Reading PSS walks each process's page tables (/proc/PID/smaps_rollup): sampled every 0.2 s over
    # a tree of ~30 processes that took a noticeable share of a core from the runs being measured.
    # Memory peaks of whole runs last seconds; once a second sees them.
    def __init__(self, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.peak = 0
        self.peak_rss = 0
        self._root = psutil.Process()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-memory", daemon=True)

    def now(self) -> tuple[int, int]:
        """(PSS, RSS) summed over the tree, in bytes."""
        pss = rss = 0
        for proc in [self._root, *self._root.children(recursive=True)]:
            try:
                info = proc.memory_full_info()
            except psutil.Error:  # exited between listing and reading
                continue
            pss += info.pss
            rss += info.rss
        return pss, rss

    def window(self) -> None:
        self.peak, self.peak_rss = self.now()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            pss, rss = self.now()
            self.peak = max(self.peak, pss)
            self.peak_rss = max(self.peak_rss, rss)

    def __enter__(self) -> TreeMemory:
        self.window()
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()


class Stopwatch:
    def __enter__(self) -> Stopwatch:
        self.started = time.monotonic()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.monotonic() - self.started


# ---- the React + Vite app the step benchmarks edit ---------------------------------------------

PACKAGE = {
    "name": "bench-todo",
    "private": True,
    "version": "0.0.1",
    "type": "module",
    "scripts": {"dev": "vite", "build": "vite build"},
    # The demo's and the test template's dependencies: one install serves them all.
    "dependencies": {"react": "^18.3.1", "react-dom": "^18.3.1"},
    "devDependencies": {"vite": "^5.4.0", "@vitejs/plugin-react": "^4.3.0"},
}
ADDED_DEPENDENCY = ("clsx", "^2.1.1")


def app_files(heading: str, *, with_dependency: bool = False) -> dict[str, str]:
    """A small todo app (7 files); ``heading`` differs per step; the dependency edit adds clsx."""
    package = json.loads(json.dumps(PACKAGE))
    if with_dependency:
        package["dependencies"][ADDED_DEPENDENCY[0]] = ADDED_DEPENDENCY[1]
    class_names = "clsx('title', { done: items.length > 0 })" if with_dependency else "'title'"
    importer = "import clsx from 'clsx';\n" if with_dependency else ""
    return {
        "package.json": json.dumps(package, indent=2) + "\n",
        "vite.config.js": "import { defineConfig } from 'vite';\nimport react from '@vitejs/plugin-react';\n\n"
        "export default defineConfig({ plugins: [react()] });\n",
        "index.html": '<!doctype html>\n<html lang="en">\n<head><meta charset="UTF-8" /><title>Todos</title></head>\n'
        '<body><div id="root"></div><script type="module" src="/src/main.jsx"></script></body>\n</html>\n',
        "src/main.jsx": "import React from 'react';\nimport { createRoot } from 'react-dom/client';\n"
        "import App from './App.jsx';\nimport './styles.css';\n\n"
        "createRoot(document.getElementById('root')).render(<App />);\n",
        "src/App.jsx": f"""import React, {{ useState }} from 'react';
{importer}import TodoList from './components/TodoList.jsx';
import AddForm from './components/AddForm.jsx';

export default function App() {{
  const [items, setItems] = useState([]);
  return (
    <main className="card">
      <h1 className={{{class_names}}}>{heading}</h1>
      <AddForm onAdd={{(text) => setItems([...items, text])}} />
      <p className="count">Items: {{items.length}}</p>
      <TodoList items={{items}} />
    </main>
  );
}}
""",
        "src/components/AddForm.jsx": """import React, { useState } from 'react';

export default function AddForm({ onAdd }) {
  const [draft, setDraft] = useState('');
  function submit(event) {
    event.preventDefault();
    if (draft.trim()) onAdd(draft.trim());
    setDraft('');
  }
  return (
    <form onSubmit={submit} className="row">
      <input placeholder="What needs doing?" value={draft} onChange={(e) => setDraft(e.target.value)} />
      <button type="submit">Add item</button>
    </form>
  );
}
""",
        "src/components/TodoList.jsx": """import React from 'react';

export default function TodoList({ items }) {
  return <ul>{items.map((item, index) => <li key={index}>{item}</li>)}</ul>;
}
""",
        "src/styles.css": "body { font-family: system-ui, sans-serif; background: #eef2ff; margin: 0; }\n"
        ".card { max-width: 28rem; margin: 4rem auto; background: white; padding: 2rem; "
        "border-radius: 1rem; }\n.title { color: #1e3a8a; }\n.row { display: flex; gap: .5rem; }\n",
    }


def artifact(files: dict[str, str], title: str = "Todo app") -> str:
    """A coder reply writing ``files`` whole (bolt format)."""
    actions = "\n".join(
        f'<boltAction type="file" filePath="{path}">\n{text}</boltAction>' for path, text in files.items()
    )
    return f'Here is the app.\n\n<boltArtifact id="todo" title="{title}">\n{actions}\n</boltArtifact>\n'


def hardlink_copy(source: Path, dest: Path) -> Path:
    """A copy of a dependency cache that shares its files (what one more database folder would hold)."""
    shutil.copytree(source, dest, symlinks=True, copy_function=os.link)
    return dest


def print_header(title: str) -> None:
    print(f"\n== {title} ==", flush=True)


def run_main(main: Callable[[], Coroutine[Any, Any, dict[str, float]]]) -> None:
    """Run a benchmark's ``main``; with ``--figures FILE`` also write its figures there as JSON."""
    figures: dict[str, float] = asyncio.run(main())
    if "--figures" in sys.argv:
        Path(sys.argv[sys.argv.index("--figures") + 1]).write_text(json.dumps(figures))
