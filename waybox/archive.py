"""The archive folders: each Snapshot's `index.json`, and rebuilding the database from them.

The folders alone must be enough to rebuild the database, so `index.json` carries the
Snapshot, its Crawl's settings, its tags and every ArchiveResult.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import DataError, IntegrityError, transaction
from django.utils import timezone

from waybox import __version__
from waybox.datadir import DataDir
from waybox.models import ArchiveResult, Crawl, Snapshot, Tag

INDEX_FILENAME = "index.json"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, default=str, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _parse_dt(value: str | None) -> datetime | None:
    """An ISO date-time from index.json; one without a zone (hand-written) is taken as UTC."""
    if not value:
        return None
    parsed = datetime.fromisoformat(value)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


def result_dict(result: ArchiveResult) -> dict[str, Any]:
    return {
        "id": str(result.id),
        "plugin": result.plugin,
        "hook_name": result.hook_name,
        "status": result.status,
        "attempts": result.attempts,
        "retry_at": _iso(result.retry_at),
        "output_str": result.output_str,
        "output_json": result.output_json,
        "output_files": result.output_files,
        "started_at": _iso(result.started_at),
        "ended_at": _iso(result.ended_at),
    }


def crawl_dict(crawl: Crawl) -> dict[str, Any]:
    return {
        "id": str(crawl.id),
        "status": crawl.status,
        "source": crawl.source,
        "max_depth": crawl.max_depth,
        "tags_str": crawl.tags_str,
        "config": crawl.config,
        "created_at": _iso(crawl.created_at),
        "started_at": _iso(crawl.started_at),
        "ended_at": _iso(crawl.ended_at),
    }


def merkle_root_of(results: list[ArchiveResult]) -> str | None:
    """The root the `hashes` plugin computed over the Snapshot's files, if it ran."""
    for result in results:
        if result.plugin == "hashes" and isinstance(result.output_json, dict):
            return result.output_json.get("merkle_root")
    return None


def snapshot_dict(
    snapshot: Snapshot, tags: list[str], results: list[ArchiveResult], crawl: Crawl
) -> dict[str, Any]:
    return {
        "waybox_version": __version__,
        "id": str(snapshot.id),
        "url": snapshot.url,
        "title": snapshot.title,
        "status": snapshot.status,
        "current_step": snapshot.current_step,
        "depth": snapshot.depth,
        "parent_id": str(snapshot.parent_id) if snapshot.parent_id else None,
        "tags": tags,
        "config": snapshot.config,
        "bookmarked_at": _iso(snapshot.bookmarked_at),
        "created_at": _iso(snapshot.created_at),
        "started_at": _iso(snapshot.started_at),
        "ended_at": _iso(snapshot.ended_at),
        "crawl": crawl_dict(crawl),
        "merkle_root": merkle_root_of(results),
        "results": [result_dict(r) for r in results],
    }


def write_snapshot_index(datadir: DataDir, snapshot: Snapshot) -> Path:
    """Refresh `archive/<id>/index.json` from the database."""
    path = datadir.snapshot_dir(snapshot.id) / INDEX_FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / ".index.lock", "a") as lock:
        # writers take turns, each reading the database after the previous one wrote, so the
        # last file written always reflects the last change (no stale read wins)
        fcntl.flock(lock, fcntl.LOCK_EX)
        snapshots = Snapshot.objects.select_related("crawl").defer("crawl__urls")  # the seed list can be MBs
        fresh = snapshots.prefetch_related("tags").filter(pk=snapshot.pk).first()
        if fresh is not None:
            tags = [t.name for t in fresh.tags.all()]
            results = list(fresh.results.order_by("hook_name"))
            write_json_atomic(path, snapshot_dict(fresh, tags, results, fresh.crawl))
    return path


# -- rebuild ------------------------------------------------------------------------------


@dataclass
class RebuildReport:
    snapshots: int = 0
    crawls: int = 0
    results: int = 0
    errors: list[str] = field(default_factory=list)


# What a hand-edited or truncated index.json can make the ORM raise; anything else is a real
# database problem and stops the rebuild.
BAD_INDEX_ERRORS = (
    OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError,
    ValidationError, IntegrityError, DataError,
)


def _resumable(status: Any, model: type[Crawl] | type[Snapshot] | type[ArchiveResult]) -> str:
    """A known status; work that was in flight when the database was lost is queued again."""
    if status not in model.Status.values:
        raise ValueError(f"unknown {model.__name__} status {status!r}")
    return model.Status.QUEUED if status in ("started", "backoff") else status


def _restore_crawl(data: dict[str, Any], created: set[str]) -> Crawl:
    crawl_id = str(data["id"])
    status = _resumable(data.get("status", "sealed"), Crawl)
    crawl, made = Crawl.objects.get_or_create(
        id=crawl_id,
        defaults={
            "status": status,
            "retry_at": None if status == Crawl.Status.SEALED else timezone.now(),
            "source": data.get("source", ""),
            "max_depth": data.get("max_depth", 0),
            "tags_str": data.get("tags_str", ""),
            "config": data.get("config") or {},
            "created_at": _parse_dt(data.get("created_at")) or timezone.now(),
            "started_at": _parse_dt(data.get("started_at")),
            "ended_at": _parse_dt(data.get("ended_at")),
            "urls": "",
        },
    )
    if made:
        created.add(str(crawl.id))
    return crawl


def restore_snapshot(data: dict[str, Any], created_crawls: set[str]) -> tuple[Snapshot, int]:
    """Upsert one Snapshot (and its Crawl, tags and results) from a parsed index.json."""
    if not isinstance(data, dict) or "id" not in data or "url" not in data or "crawl" not in data:
        raise ValueError("missing id, url or crawl")
    crawl = _restore_crawl(data["crawl"], created_crawls)
    status = _resumable(data.get("status", "queued"), Snapshot)
    snapshot, _ = Snapshot.objects.update_or_create(
        id=data["id"],
        defaults={
            "url": data["url"],
            "crawl": crawl,
            "title": data.get("title") or "",
            "status": status,
            "retry_at": None if status == Snapshot.Status.SEALED else timezone.now(),
            "current_step": data.get("current_step", 0) if status != Snapshot.Status.QUEUED else 0,
            "depth": data.get("depth", 0),
            "config": data.get("config") or {},
            "bookmarked_at": _parse_dt(data.get("bookmarked_at")),
            "created_at": _parse_dt(data.get("created_at")) or timezone.now(),
            "started_at": _parse_dt(data.get("started_at")),
            "ended_at": _parse_dt(data.get("ended_at")),
        },
    )
    tags = [Tag.objects.get_or_create(name=name)[0] for name in data.get("tags", []) if name]
    snapshot.tags.set(tags)
    results = data.get("results", [])
    for r in results:
        _restore_result(snapshot, r)
    return snapshot, len(results)


def _restore_result(snapshot: Snapshot, r: dict[str, Any]) -> None:
    r_status = _resumable(r.get("status", "queued"), ArchiveResult)
    ArchiveResult.objects.update_or_create(
        id=r["id"],
        defaults={
            "snapshot": snapshot,
            "plugin": r["plugin"],
            "hook_name": r["hook_name"],
            "status": r_status,
            "attempts": r.get("attempts", 0),
            "retry_at": None if r_status in ArchiveResult.FINAL_STATES else timezone.now(),
            "output_str": r.get("output_str") or "",
            "output_json": r.get("output_json"),
            "output_files": r.get("output_files") or [],
            "started_at": _parse_dt(r.get("started_at")),
            "ended_at": _parse_dt(r.get("ended_at")),
        },
    )


def _read_index(folder: Path) -> dict[str, Any]:
    """The parsed index.json of one folder, checked to describe that folder."""
    index = folder / INDEX_FILENAME
    if not index.exists():
        raise ValueError(f"no {INDEX_FILENAME}")
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{INDEX_FILENAME} is not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{INDEX_FILENAME} does not hold a JSON object")
    if str(data.get("id")) != folder.name:
        # the row's files are found by id: a row for another folder would point at nothing
        raise ValueError(f"{INDEX_FILENAME} describes Snapshot {data.get('id')!r}, not this folder")
    return data


def rebuild_from_archive(datadir: DataDir) -> RebuildReport:
    """Recreate rows from every `archive/*/index.json`; a bad folder is reported, not fatal."""
    report = RebuildReport()
    created_crawls: set[str] = set()
    seeds: dict[str, list[str]] = {}
    folders = sorted(p for p in datadir.archive.iterdir() if p.is_dir()) if datadir.archive.exists() else []
    for folder in folders:
        made_here: set[str] = set()
        try:
            data = _read_index(folder)
            with transaction.atomic():
                snapshot, n_results = restore_snapshot(data, made_here)
        except BAD_INDEX_ERRORS as err:
            report.errors.append(f"{folder}: {_describe(err)}")
            continue
        created_crawls |= made_here  # only once committed: a rolled-back Crawl was never made
        report.snapshots += 1
        report.results += n_results
        if snapshot.depth == 0:
            seeds.setdefault(str(snapshot.crawl_id), []).append(snapshot.url)
    for crawl_id in created_crawls:
        Crawl.objects.filter(id=crawl_id).update(urls="\n".join(seeds.get(crawl_id, [])))
    report.crawls = len(created_crawls)
    return report


def _describe(err: BaseException) -> str:
    """One line: our own ValueErrors as they are, anything else with its type."""
    if isinstance(err, ValidationError):
        return "invalid value: " + "; ".join(err.messages)
    if type(err) is ValueError:
        return str(err)
    if isinstance(err, KeyError):
        return f"missing field {err}"
    return f"{type(err).__name__}: {err}".splitlines()[0]
