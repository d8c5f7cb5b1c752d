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
    return f"<figure>{zoomable(image, caption, kind)}<figcaption>{esc(caption)}</figcaption></figure>"


def zoomable(image: bytes, alt: str, kind: str) -> str:
    """An image that a click shows at full size over the page (scrollable), and another click closes:
    a hidden checkbox the label toggles, no script (the report runs none). A data: URL cannot be
    opened as a page of its own: browsers refuse to navigate to one."""
    return (
        f'<label class="zoom"><input type="checkbox"><span>'
        f'<img class="{kind}" alt="{esc(alt)}" src="{data_url(image)}"></span></label>'
    )


def data_url(image: bytes) -> str:
    mime = "image/png" if image.startswith(b"\x89PNG") else "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(image).decode('ascii')}"
