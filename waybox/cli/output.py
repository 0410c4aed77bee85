"""Writing rows to stdout as JSON, JSONL, CSV or a table: one implementation for every listing.

Only the rows go to stdout, so `waybox list --json | jq` and `--csv > file.csv` always parse.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from waybox.cli import out_console

FORMATS = ("table", "json", "jsonl", "csv")
# When stdout is a pipe or a file, rich would fold every cell to fit 80 columns; a line per
# row is what `grep`, `less -S` and humans reading a log want instead.
PIPE_WIDTH = 10_000


def format_options(*, csv_ok: bool = True) -> Callable:
    """--json / --jsonl / --csv as one `fmt` argument (None means the table)."""

    def decorate(func: Callable) -> Callable:
        choices = ["json", "jsonl", *(["csv"] if csv_ok else [])]
        for choice in reversed(choices):
            func = click.option(
                f"--{choice}", "fmt", flag_value=choice, help=f"Print {choice.upper()} on stdout."
            )(func)
        return func

    return decorate


def _json_default(value: Any) -> str:
    """ISO 8601 for dates (`2026-01-31T12:00:00+00:00`), str() for ids and the rest."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def dumps(data: Any, **kw: Any) -> str:
    """JSON as every command prints it: UTF-8 text, ISO dates."""
    return json.dumps(data, default=_json_default, ensure_ascii=False, **kw)


def emit(rows: Sequence[dict[str, Any]], fmt: str | None, columns: Sequence[str], title: str = "") -> None:
    """Print rows in the chosen format; `columns` only shape the table and the CSV."""
    if fmt == "json":
        sys.stdout.write(dumps(list(rows), indent=2) + "\n")
    elif fmt == "jsonl":
        for row in rows:
            sys.stdout.write(dumps(row) + "\n")
    elif fmt == "csv":
        writer = csv.DictWriter(sys.stdout, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({c: cell(row.get(c), for_table=False) for c in columns})
    else:
        emit_table(rows, columns, title)
    sys.stdout.flush()


def cell(value: Any, *, for_table: bool = True) -> str:
    """One value as text: lists comma-joined, dates to the second in tables, ISO in CSV."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S") if for_table else value.isoformat()
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, dict):
        return dumps(value)
    return str(value)


def table_console() -> Console:
    """The terminal's own console; a wide one when piped (unless COLUMNS says otherwise)."""
    if out_console.is_terminal or os.environ.get("COLUMNS"):
        return out_console
    return Console(file=sys.stdout, width=PIPE_WIDTH, highlight=False, soft_wrap=False)


def emit_table(rows: Iterable[dict[str, Any]], columns: Sequence[str], title: str = "") -> None:
    """A rich table; cells are plain Text so a URL or title with [brackets] is not markup."""
    table = Table(title=Text(title) if title else None, show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell(row.get(c))) for c in columns))
    table_console().print(table)
