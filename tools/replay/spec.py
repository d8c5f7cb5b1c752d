"""The recorded step list as a ``@playwright/test`` spec (JavaScript) and the config to run it.

ES module syntax, as Playwright's own templates: Playwright loads it in CommonJS and ES-module
projects alike (a generated Vite project is ``"type": "module"``, where ``require`` fails).

Same steps, same locators as the Python replayer (``runner.py``): one list, two printers.
"""

from __future__ import annotations

import json

from webgen_agent.tools.replay.views import RecordedTest, ReplayStep, Target


def _playwright_config(headline: str, base_url: str, server_command: str) -> str:
    """playwright.config for the recorded tests: ``base_url`` and ``server_command`` are JavaScript
    expressions (the site's own server is started unless BASE_URL names one already running)."""
    return f"""{headline}
import {{ defineConfig }} from '@playwright/test';

{base_url}

export default defineConfig({{
  testDir: './tests/e2e',
  timeout: 30000,
  expect: {{ timeout: 3000 }},
  retries: 0,
  use: {{
    baseURL,
    launchOptions: process.env.CHROMIUM_PATH ? {{ executablePath: process.env.CHROMIUM_PATH }} : {{}},
  }},
  webServer: process.env.BASE_URL
    ? undefined
    : {{ command: {server_command}, url: baseURL, reuseExistingServer: true }},
}});
"""


PLAYWRIGHT_CONFIG = _playwright_config(
    "// Runs the recorded end-to-end tests against the site (npm run dev, or BASE_URL when set).",
    "const baseURL = process.env.BASE_URL || 'http://127.0.0.1:5173';",
    "'npm run dev -- --host 127.0.0.1 --port 5173'",
)

# A static site (no package.json) has no dev server: its config serves the folder with the script
# below, node's own HTTP server (hand-written: the shipped project then needs nothing besides
# @playwright/test, and node is there wherever Playwright runs).
STATIC_SERVER_PATH = "tests/e2e/serve.mjs"
STATIC_PLAYWRIGHT_CONFIG = _playwright_config(
    "// Runs the recorded end-to-end tests against this static site, served from this folder by\n"
    "// tests/e2e/serve.mjs (node only), or against BASE_URL when set.",
    "const port = process.env.PORT || 4173;\nconst baseURL = process.env.BASE_URL || `http://127.0.0.1:${port}`;",
    "`node tests/e2e/serve.mjs ${port}`",
)
STATIC_SERVER_JS = """// Serves this site's folder for the recorded end-to-end tests: node's own HTTP server, no dependencies.
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url)).replace(/[\\/]$/, '');
const port = Number(process.argv[2] || process.env.PORT || 4173);
const types = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript',
  '.css': 'text/css', '.json': 'application/json', '.svg': 'image/svg+xml', '.png': 'image/png',
  '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.gif': 'image/gif', '.webp': 'image/webp',
  '.ico': 'image/x-icon', '.woff': 'font/woff', '.woff2': 'font/woff2', '.txt': 'text/plain',
};

createServer(async (request, response) => {
  let file = join(root, normalize(decodeURIComponent(new URL(request.url, 'http://x').pathname)));
  if (file !== root && !file.startsWith(root + sep)) {
    response.writeHead(403).end();
    return;
  }
  try {
    if ((await stat(file)).isDirectory()) file = join(file, 'index.html');
    const body = await readFile(file);
    response.writeHead(200, { 'content-type': types[extname(file)] || 'application/octet-stream' }).end(body);
  } catch {
    response.writeHead(404).end('not found');
  }
}).listen(port, '127.0.0.1');
"""


def _js(text: str | None) -> str:
    return json.dumps(text or "", ensure_ascii=False)


def locator_js(target: Target) -> str:
    if target.by == "test_id":
        found = f"page.getByTestId({_js(target.value)})"
    elif target.by == "role":
        name = f", {{ name: {_js(target.name)}, exact: true }}" if target.name else ""
        found = f"page.getByRole({_js(target.value)}{name})"
    elif target.by == "label":
        found = f"page.getByLabel({_js(target.value)}, {{ exact: true }})"
    elif target.by == "placeholder":
        found = f"page.getByPlaceholder({_js(target.value)}, {{ exact: true }})"
    elif target.by == "text":
        found = f"page.getByText({_js(target.value)}, {{ exact: true }})"
    else:
        found = f"page.locator({_js(target.value)})"
    return f"{found}.first()" if target.first else found


def step_js(step: ReplayStep) -> str:
    target = locator_js(step.target) if step.target else ""
    lines = {
        "goto": f"await page.goto({_js(step.value or '/')});",
        "go_back": "await page.goBack();",
        "press": f"await page.keyboard.press({_js(step.value)});",
        "click": f"await {target}.click();",
        "fill": f"await {target}.fill({_js(step.value)});",
        "select": f"await {target}.selectOption({{ label: {_js(step.value)} }});",
        "expect_text": f"await expect({target}.first()).toBeVisible();",
        "expect_count": f"await expect(page.locator({_js(step.value)})).toHaveCount({step.count or 0});",
        "expect_url": f"await expect(page).toHaveURL(new RegExp({_js(step.value)}));",
    }
    return lines[step.kind]


def spec_js(test: RecordedTest) -> str:
    """The test as a spec file's text."""
    instruction = " ".join(test.instruction.split())[:300]
    body = "\n".join(f"  {step_js(step)}" for step in test.steps)
    return (
        f"// Recorded from the GUI test that passed at step {test.recorded_at_step}.\n"
        f"// Instruction: {instruction}\n"
        "import { test, expect } from '@playwright/test';\n\n"
        f"test({_js(test.name)}, async ({{ page }}) => {{\n{body}\n}});\n"
    )
