"""Putting new work on the queue: Crawls and their seed Snapshots.

Rows are created in one short transaction; index.json files are written after it commits, so
the database never waits on the disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from waybox.archive import write_snapshot_index
from waybox.datadir import DataDir
from waybox.models import Crawl, Snapshot, Tag

BULK_BATCH = 500


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


def create_crawl(
    datadir: DataDir,
    urls: Sequence[str],
    *,
    depth: int = 0,
    tags: Sequence[str] = (),
    config: dict[str, Any] | None = None,
    source: str = "",
) -> Crawl:
    """One Crawl with a queued Snapshot per seed URL."""
    now = timezone.now()
    tag_names = clean_tags(tags)
    with transaction.atomic():
        crawl = Crawl.objects.create(
            urls="\n".join(urls),
            max_depth=depth,
            tags_str=",".join(tag_names),
            config=config or {},
            source=source[:500],
            retry_at=now,
        )
        snapshots = [Snapshot(url=url, crawl=crawl, depth=0, retry_at=now) for url in urls]
        Snapshot.objects.bulk_create(snapshots, batch_size=BULK_BATCH)
        if tag_names:
            tag_rows = get_tags(tag_names)
            through = Snapshot.tags.through
            links = [through(snapshot_id=s.id, tag_id=t.id) for s in snapshots for t in tag_rows]
            through.objects.bulk_create(links, batch_size=BULK_BATCH)
    for snapshot in Snapshot.objects.filter(crawl=crawl).select_related("crawl").prefetch_related("tags"):
        write_snapshot_index(datadir, snapshot, results=[])
    return crawl
