"""Putting new work on the queue: Crawls and their seed Snapshots.

Rows are created in one short transaction; index.json files are written after it commits, so
the database never waits on the disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from waybox.archive import INDEX_FILENAME, snapshot_dict, write_json_atomic
from waybox.datadir import DataDir
from waybox.models import Crawl, Snapshot, Tag
from waybox.parsers import Link

BULK_BATCH = 500
INDEX_WRITERS = 4


def clean_tags(tags: Sequence[str]) -> list[str]:
    """Tags from repeated and comma-separated options, trimmed, in first-seen order."""
    seen: dict[str, None] = {}
    for tag in tags:
        for part in tag.split(","):
            if part.strip():
                seen.setdefault(part.strip(), None)
    return list(seen)


def get_tags(names: Sequence[str]) -> list[Tag]:
    existing = {t.name: t for t in Tag.objects.filter(name__in=names)}
    missing = [Tag(name=n) for n in names if n not in existing]
    Tag.objects.bulk_create(missing, ignore_conflicts=True)
    return list(Tag.objects.filter(name__in=names))


def as_link(item: str | Link) -> Link:
    return item if isinstance(item, Link) else Link(url=item)


def parse_bookmarked_at(value: str | None):
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)


def create_crawl(
    datadir: DataDir,
    urls: Sequence[str | Link],
    *,
    depth: int = 0,
    tags: Sequence[str] = (),
    config: dict[str, Any] | None = None,
    source: str = "",
) -> Crawl:
    """One Crawl with a queued Snapshot per seed URL (with the title, tags and date an import
    carried). The Snapshots wait (retry_at NULL) until their Crawl's own hooks are done; the
    Crawl is due now and a running orchestrator is woken."""
    links = [as_link(u) for u in urls]
    now = timezone.now()
    tag_names = clean_tags(tags)
    with transaction.atomic():
        crawl = Crawl.objects.create(
            urls="\n".join(link.url for link in links),
            max_depth=depth,
            tags_str=",".join(tag_names),
            config=config or {},
            source=source[:500],
            retry_at=now,
        )
        snapshots = [
            Snapshot(url=link.url, crawl=crawl, depth=0, retry_at=None, title=link.title[:1000],
                     bookmarked_at=parse_bookmarked_at(link.bookmarked_at))
            for link in links
        ]
        Snapshot.objects.bulk_create(snapshots, batch_size=BULK_BATCH)
        link_tags = {link.url: clean_tags(link.tags) for link in links if link.tags}
        all_names = list(dict.fromkeys([*tag_names, *(t for names in link_tags.values() for t in names)]))
        if all_names:
            tag_ids = {t.name: t.id for t in get_tags(all_names)}
            through = Snapshot.tags.through
            rows = [
                through(snapshot_id=s.id, tag_id=tag_ids[name])
                for s in snapshots
                for name in dict.fromkeys([*tag_names, *link_tags.get(s.url, [])])
            ]
            through.objects.bulk_create(rows, batch_size=BULK_BATCH, ignore_conflicts=True)
    from waybox.engine import wakeup

    wakeup.notify("crawl")
    write_new_indexes(datadir, crawl)
    return crawl


class ArchiveWriteError(OSError):
    """The rows are queued, but the archive folder refused a file (full, read-only...)."""


def write_new_indexes(datadir: DataDir, crawl: Crawl) -> None:
    """index.json for each new Snapshot. If the archive folder refuses, the queued rows stay
    (the engine writes index.json again when it archives them) and the caller is told why.

    The files are written by a few threads: a folder and a file each is filesystem latency,
    not CPU, and it is most of what adding a long list costs.
    """
    snapshots = Snapshot.objects.filter(crawl=crawl).prefetch_related("tags")
    with ThreadPoolExecutor(max_workers=INDEX_WRITERS) as pool:
        batch = []
        for snapshot in snapshots.iterator(chunk_size=BULK_BATCH):
            data = snapshot_dict(snapshot, [t.name for t in snapshot.tags.all()], [], crawl)
            batch.append(pool.submit(write_json_atomic, datadir.snapshot_dir(snapshot.id) / INDEX_FILENAME, data))
            if len(batch) >= BULK_BATCH:
                wait_for_writes(datadir, batch)
                batch = []
        wait_for_writes(datadir, batch)


def wait_for_writes(datadir: DataDir, writes: list[Future]) -> None:
    for write in writes:
        try:
            write.result()
        except OSError as err:
            raise ArchiveWriteError(
                err.errno, f"cannot write in the archive folder {datadir.archive}: {err.strerror or err}"
            ) from err
