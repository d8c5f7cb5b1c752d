"""Tables that fit the terminal without cutting an id: ``runs`` and ``history``.

A run id or checkpoint id is what every other command takes, so it is never shortened (rich would
cut it to ``demo…`` to fit); the table drops its least needed columns first, then wraps the others.
The width is the terminal's, or ``COLUMNS``, also when the output is piped (``console`` in base.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Rich draws a border and one space of padding either side of every cell: 3 columns per column, plus 1.
_EDGES = 3


def _narrowest(header: str, cells: Sequence[str], whole: bool) -> int:
    """The fewest columns a column needs: the longest cell for an id, else the longest word."""
    texts = [header, *cells]
    if whole:
        return max(len(text) for text in texts)
    return max((len(word) for text in texts for word in text.split()), default=1)


def fitted_table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    width: int,
    ids: Sequence[str],
    drop_first: Sequence[str],
) -> Any:
    """A rich Table of ``rows`` under ``columns`` that fits ``width``: the ``ids`` columns whole on
    one line; the ``drop_first`` columns left out, in that order, while the rest would not fit."""
    from rich.table import Table

    kept = list(columns)
    needed = {name: _narrowest(name, [row[i] for row in rows], name in ids) for i, name in enumerate(columns)}
    for name in drop_first:
        if sum(needed[c] + _EDGES for c in kept) + 1 <= width:
            break
        kept.remove(name)
    table = Table(title=title)
    for name in kept:
        if name in ids:
            table.add_column(name, no_wrap=True, min_width=needed[name])
        else:
            table.add_column(name, overflow="fold")
    positions = [columns.index(name) for name in kept]
    for row in rows:
        table.add_row(*(row[i] for i in positions))
    return table
