"""Writing rows to stdout as JSON, JSONL, CSV or a table: one implementation for every listing."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click
from rich.table import Table

from waybox.cli import out_console

FORMATS = ("table", "json", "jsonl", "csv")


def format_options(*, csv_ok: bool = True):
    """--json / --jsonl / --csv as one `fmt` argument."""

    def decorate(func):
        choices = ["json", "jsonl", *(["csv"] if csv_ok else [])]
        for choice in reversed(choices):
            func = click.option(
                f"--{choice}", "fmt", flag_value=choice, help=f"Print {choice.upper()} on stdout."
            )(func)
        return func

    return decorate


def _dumps(data: Any, **kw: Any) -> str:
    return json.dumps(data, default=str, ensure_ascii=False, **kw)


def emit(rows: Sequence[dict[str, Any]], fmt: str | None, columns: Sequence[str], title: str = "") -> None:
    if fmt == "json":
        sys.stdout.write(_dumps(list(rows), indent=2) + "\n")
    elif fmt == "jsonl":
        for row in rows:
            sys.stdout.write(_dumps(row) + "\n")
    elif fmt == "csv":
        writer = csv.DictWriter(sys.stdout, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({c: _cell(row.get(c)) for c in columns})
    else:
        emit_table(rows, columns, title)
    sys.stdout.flush()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, dict):
        return _dumps(value)
    return str(value)


def emit_table(rows: Iterable[dict[str, Any]], columns: Sequence[str], title: str = "") -> None:
    table = Table(title=title or None, show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    out_console.print(table)
