"""Applying a hook's JSONL records to the database as they arrive.

`RecordSink` belongs to one hook attempt. Snapshot titles, tags, discovered links and the
Processes/Binaries a hook reports are written at once (so a title shows before the hook ends);
the hook's own ArchiveResult fields are collected and stored when the attempt ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db import DataError, IntegrityError, transaction
from django.utils import timezone

from waybox.config import Config
from waybox.engine import wakeup
from waybox.engine.jsonl import Line, looks_like_path, unsafe_path_reason
from waybox.models import ArchiveResult, Binary, Machine, Process, Snapshot, Tag
from waybox.urlinput import InvalidURL, normalize_url

MAX_OUTPUT_STR = 10_000
FINAL_REPORTED = ("succeeded", "failed", "skipped")
INT32 = 2**31
# What a record with values of the wrong type or size can raise while being applied: logged
# and ignored. (Anything else, e.g. the database going away, is a real error.)
BAD_RECORD_ERRORS = (TypeError, ValueError, KeyError, AttributeError, OverflowError, DataError)


def _small_int(value: Any) -> int | None:
    """An integer that fits a database integer column, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and -INT32 <= value < INT32:
        return value
    return None


def _strings(value: Any, what: str) -> list[str]:
    """A field that holds names or paths: a list of strings (one string counts as a list of one)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise ValueError(f"{what} must be a string or a list of strings")


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)


@dataclass
class RecordSink:
    result: ArchiveResult
    snapshot: Snapshot | None
    process: Process | None
    config: Config
    log: Any  # callable(str): where problems are written (the hook's stderr log)
    status: str | None = None
    output_str: str = ""
    output_json: Any = None
    output_files: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    discovered: int = 0

    def accept(self, line: Line) -> None:
        if line.record is None:
            self.log(f"stdout line {line.number}: {line.problem}")
            return
        record = line.record
        handler = getattr(self, f"_on_{record['type'].lower()}")
        try:
            handler(record, line.number)
        except BAD_RECORD_ERRORS as err:
            self.log(f"stdout line {line.number}: bad {record['type']} record: {err}")

    # -- record types --------------------------------------------------------------------

    def _on_archiveresult(self, record: dict, number: int) -> None:
        status = record.get("status")
        if status is not None:
            if status not in FINAL_REPORTED:
                raise ValueError(f"status must be one of {FINAL_REPORTED}, not {status!r}")
            self.status = status
        if "output_str" in record:
            text = str(record["output_str"] or "")[:MAX_OUTPUT_STR]
            reason = unsafe_path_reason(text) if looks_like_path(text) else None
            if reason:
                self.error(f"output_str rejected: {reason}")
            else:
                self.output_str = text
        if "output_json" in record:
            self.output_json = record["output_json"]
        files = record.get("output_files") or []
        if isinstance(files, str):
            files = [files]
        if not isinstance(files, list):
            raise ValueError("output_files must be a list of paths")
        for path in files:
            reason = unsafe_path_reason(path)
            if reason:
                self.error(f"output_files entry rejected: {reason}")
            elif path not in self.output_files:
                self.output_files.append(path)

    def _on_snapshot(self, record: dict, number: int) -> None:
        if self.snapshot is None:
            raise ValueError("Snapshot records are only accepted from Snapshot hooks")
        url = record.get("url")
        if url is not None and not isinstance(url, str):
            raise ValueError(f"url must be a string, not {type(url).__name__}")
        tags = _strings(record.get("tags"), "tags")
        if url and url != self.snapshot.url:
            self.discover(url, record)
            return
        title = record.get("title")
        if isinstance(title, str) and title.strip():
            self.snapshot.title = title.strip()[:1000]
            Snapshot.objects.filter(pk=self.snapshot.pk).update(title=self.snapshot.title, modified_at=timezone.now())
        for tag in tags:
            self._tag(tag)

    def _on_tag(self, record: dict, number: int) -> None:
        if self.snapshot is None:
            raise ValueError("Tag records are only accepted from Snapshot hooks")
        name = record["name"]
        if not isinstance(name, str):
            raise ValueError("name must be a string")
        self._tag(name)

    def _on_process(self, record: dict, number: int) -> None:
        cmd = record.get("cmd") or []
        if isinstance(cmd, str):
            cmd = [cmd]
        if not isinstance(cmd, list):
            raise ValueError("cmd must be a list")
        exit_code = _small_int(record.get("exit_code"))
        ended = _parse_time(record.get("ended_at"))
        pid = _small_int(record.get("pid"))
        fields = {
            "machine": Machine.current(),
            "process_type": Process.Type.BINARY,
            "cmd": [str(c) for c in cmd][:200],
            "pwd": str(record.get("pwd") or (self.process.pwd if self.process else "")),
            "exit_code": exit_code,
            "started_at": _parse_time(record.get("started_at")),
            "ended_at": ended,
            "status": Process.Status.EXITED if ended or exit_code is not None else Process.Status.RUNNING,
        }
        if pid is not None and self.process is not None:
            # a hook may report a binary when it starts and again when it ends: one row
            Process.objects.update_or_create(parent=self.process, pid=pid, defaults=fields)
        else:
            Process.objects.create(parent=self.process, pid=pid, **fields)

    def _on_binary(self, record: dict, number: int) -> None:
        Binary.objects.update_or_create(
            machine=Machine.current(),
            name=str(record["name"])[:128],
            defaults={
                "abspath": str(record.get("abspath") or "")[:1024],
                "version": str(record.get("version") or "")[:128],
                "sha256": str(record.get("sha256") or "")[:64],
                "binprovider": str(record.get("binprovider") or "")[:32],
                "status": Binary.Status.INSTALLED if record.get("abspath") else Binary.Status.MISSING,
                "retry_at": None,
            },
        )

    # -- helpers -------------------------------------------------------------------------

    def error(self, message: str) -> None:
        self.errors.append(message)
        self.log(message)

    def _tag(self, name: str) -> None:
        name = name.strip()[:100]
        if name:
            tag, _ = Tag.objects.get_or_create(name=name)
            self.snapshot.tags.add(tag)

    def discover(self, url: str, record: dict) -> None:
        """A link found in this Snapshot: a child Snapshot one level deeper, if allowed."""
        snapshot = self.snapshot
        crawl = snapshot.crawl
        depth = snapshot.depth + 1
        if depth > crawl.max_depth:
            return
        try:
            url = normalize_url(url)
        except InvalidURL as err:
            self.log(f"discovered link {url!r} ignored: {err}")
            return
        try:
            if not url_allowed(url, self.config):
                return
        except ValueError as err:
            self.log(f"discovered link {url!r} ignored: {err}")
            return
        created = create_child_snapshot(snapshot, url, depth, record)
        if created:
            self.discovered += 1


def url_allowed(url: str, config: Config) -> bool:
    """URL_ALLOWLIST / URL_DENYLIST; a pattern that is not a valid regex is a ValueError."""
    allow, deny = config.get("URL_ALLOWLIST", ""), config.get("URL_DENYLIST", "")
    try:
        if allow and not re.search(allow, url):
            return False
        return not (deny and re.search(deny, url))
    except re.error as err:
        key = "URL_ALLOWLIST" if allow and _invalid_regex(allow) else "URL_DENYLIST"
        raise ValueError(f"{key} is not a valid regular expression: {err}") from None


def _invalid_regex(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return True
    return False


def create_child_snapshot(parent: Snapshot, url: str, depth: int, record: dict) -> Snapshot | None:
    """Once per URL per Crawl: the unique constraint decides races between hooks."""
    if Snapshot.objects.filter(crawl_id=parent.crawl_id, url=url).exists():
        return None
    try:
        with transaction.atomic():
            child = Snapshot.objects.create(
                crawl_id=parent.crawl_id,
                url=url,
                parent=parent,
                depth=depth,
                title=record["title"][:1000] if isinstance(record.get("title"), str) else "",
                bookmarked_at=_parse_time(record.get("bookmarked_at")),
                retry_at=timezone.now(),
            )
    except IntegrityError:
        return None
    names = _strings(record.get("tags"), "tags")  # already checked by _on_snapshot
    tags = [Tag.objects.get_or_create(name=t.strip()[:100])[0] for t in names if t.strip()]
    if tags:
        child.tags.add(*tags)
    from waybox.hookspecs import fire

    fire("on_object_created", obj=child)
    wakeup.notify("snapshot")
    return child


def confine(root: Path, relative: str) -> Path | None:
    """Resolve a record path under `root`, refusing anything (links included) that escapes."""
    target = (root / relative).resolve()
    return target if target.is_relative_to(root.resolve()) else None
