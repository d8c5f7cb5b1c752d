"""Small HTML pieces every part of the run report uses: escaping, badges, lists, images."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value))


def badge(kind: str, text: str) -> str:
    return f'<span class="badge {esc(kind)}">{esc(text)}</span>'


def bullet_list(items: Iterable[str]) -> str:
    return "<ul>" + "".join(f"<li>{esc(item)}</li>" for item in items) + "</ul>"


def figure(image: bytes, caption: str, kind: str) -> str:
    return (
        f'<figure><img class="{kind}" alt="{esc(caption)}" src="{data_url(image)}">'
        f"<figcaption>{esc(caption)}</figcaption></figure>"
    )


def data_url(image: bytes) -> str:
    mime = "image/png" if image.startswith(b"\x89PNG") else "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(image).decode('ascii')}"
