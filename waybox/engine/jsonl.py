"""Reading a hook's stdout: JSONL records, one per line, never trusted.

Lines are split with a size cap, decoded strictly, parsed, and checked for a `type`; every
problem becomes a message with the line number instead of an exception. Paths in records
are confined to the Snapshot folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

MAX_LINE_BYTES = 1024 * 1024
KNOWN_TYPES = ("ArchiveResult", "Snapshot", "Tag", "Process", "Binary")


@dataclass(frozen=True)
class Line:
    number: int
    record: dict | None
    problem: str = ""


class LineSplitter:
    """Feeds bytes in, yields complete lines; a line over the cap is reported and dropped."""

    def __init__(self, max_bytes: int = MAX_LINE_BYTES):
        self.max_bytes = max_bytes
        self.buffer = bytearray()
        self.number = 0
        self.oversized = False

    def feed(self, data: bytes) -> Iterator[Line]:
        self.buffer += data
        while True:
            newline = self.buffer.find(b"\n")
            if newline < 0:
                break
            raw = bytes(self.buffer[:newline])
            del self.buffer[: newline + 1]
            yield from self._emit(raw)
        if len(self.buffer) > self.max_bytes:
            if not self.oversized:
                self.number += 1
                yield Line(self.number, None, f"line longer than {self.max_bytes} bytes, ignored")
            self.oversized = True
            self.buffer.clear()

    def close(self) -> Iterator[Line]:
        if self.buffer:
            raw = bytes(self.buffer)
            self.buffer.clear()
            yield from self._emit(raw)

    def _emit(self, raw: bytes) -> Iterator[Line]:
        if self.oversized:  # the tail of a line already reported
            self.oversized = False
            return
        self.number += 1
        if len(raw) > self.max_bytes:
            yield Line(self.number, None, f"line longer than {self.max_bytes} bytes, ignored")
            return
        line = parse_line(self.number, raw)
        if line is not None:
            yield line


def parse_line(number: int, raw: bytes) -> Line | None:
    """A record, a problem, or None for a blank line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return Line(number, None, f"invalid UTF-8 at byte {err.start}, ignored")
    text = text.strip()
    if not text:
        return None
    if not text.startswith("{"):
        return Line(number, None, f"not JSON, ignored: {text[:120]!r}")
    try:
        record = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as err:
        return Line(number, None, f"invalid JSON ({err.msg}), ignored")
    except ValueError as err:  # NaN/Infinity, or an integer too long to convert
        return Line(number, None, f"invalid JSON ({err}), ignored")
    except RecursionError:
        return Line(number, None, "invalid JSON (nested too deeply), ignored")
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return Line(number, None, "a record needs a string 'type', ignored")
    if record["type"] not in KNOWN_TYPES:
        return Line(number, None, f"unknown record type {record['type']!r}, ignored")
    return Line(number, record)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def unsafe_path_reason(path: str) -> str | None:
    """Why a path from a record may not be used, or None if it stays inside the folder."""
    if not isinstance(path, str) or not path:
        return "empty or not a string"
    if "\0" in path:
        return "contains a NUL byte"
    pure = PurePosixPath(path)
    if pure.is_absolute() or path.startswith("~"):
        return f"absolute path {path!r} is not allowed"
    if ".." in pure.parts:
        return f"path {path!r} leaves the snapshot folder"
    return None


def looks_like_path(text: str) -> bool:
    """output_str may be a message or a path; only path-shaped strings are checked."""
    return "/" in text or "\\" in text or text.startswith("~")
