"""Failed ticks, where people see them: one line each in logs/errors.log.

A tick that raises (a full or read-only archive folder, say) is logged with its traceback in
the worker's own log; this file keeps the one-line reason, which `waybox add` and `waybox run`
print as it happens.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from django.utils import timezone

ERRORS_LOG = "errors.log"


def report_error(datadir, message: str) -> None:
    line = f"{timezone.now():%Y-%m-%d %H:%M:%S} {message}".replace("\n", " ")
    with contextlib.suppress(OSError), open(datadir.logs / ERRORS_LOG, "a", encoding="utf-8") as f:
        f.write(line[:2000] + "\n")


class ErrorFeed:
    """New lines of logs/errors.log since this feed was made."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0

    def new_lines(self) -> list[str]:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                f.seek(self.offset)
                text = f.read()
                self.offset = f.tell()
        except OSError:
            return []
        return [line for line in text.splitlines() if line.strip()]
