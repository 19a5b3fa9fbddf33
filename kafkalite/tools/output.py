"""Tables for people, JSON for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any


def emit(
    fmt: str, data: Any, tables: Iterable[tuple[str | None, Sequence[str], list[list]]]
) -> None:
    """`data` as one JSON document, or each (title, headers, rows) as an aligned table."""
    if fmt == "json":
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
        return
    first = True
    for title, headers, rows in tables:
        if not first:
            sys.stdout.write("\n")
        first = False
        if title:
            sys.stdout.write(f"{title}\n")
        sys.stdout.write(table(headers, rows))


def table(headers: Sequence[str], rows: list[list]) -> str:
    cells = [[cell_text(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = [_line(headers, widths)] + [_line(row, widths) for row in cells]
    return "".join(line + "\n" for line in lines)


def _line(cells: Sequence[str], widths: list[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def cell_text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)
