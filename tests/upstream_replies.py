"""Upstream-style coder replies the fidelity tests share: the control tags WebGen-Agent's trained
models send, and whole sites in its ``boltArtifact`` form."""

from __future__ import annotations

from tests.conftest import VITE_TEMPLATE_FILES

REQUIREMENT = "Build a counter page: it shows a count and an Add button that raises it by one."
QUOTES = "Build a page that lists three famous quotes."
CLICKER = "Build a clicker page with an Add button and a count."
VALIDATED = '<boltAction type="screenshot_validated"/>'
FINISH = '<boltAction type="finish"/>'
RAMBLING = " I looked at the screenshot description and the suggestions and I am satisfied with it." * 6


def page(title: str, body: str = "", script: str = "") -> str:
    """A site upstream can run: package.json (the test template's, so the shared dependency cache
    serves it) and index.html, served by Vite; the profile writes its default vite.config.js."""
    html = f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>{body}"
    html += f"<script>{script}</script></body></html>" if script else "</body></html>"
    package = VITE_TEMPLATE_FILES["package.json"]
    return (
        f'<boltArtifact id="counter" title="{title}">\n'
        f'<boltAction type="file" filePath="package.json">\n{package}</boltAction>\n'
        f'<boltAction type="file" filePath="index.html">\n{html}\n</boltAction>\n</boltArtifact>'
    )


COUNTER = '<p id="count">Count: 0</p><button id="add">Add</button>'
RAISES = "let n=0;document.getElementById('add').onclick=()=>{n+=1;document.getElementById('count').textContent='Count: '+n;};"
REPETITIVE = "".join(f"<p class='q{i}'>Quote number {i}: stay hungry, stay foolish.</p>" for i in range(60))
