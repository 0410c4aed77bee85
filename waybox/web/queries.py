"""The queries behind the index and the API's listings.

The index must stay fast at 100,000 Snapshots: one indexed, ordered, paginated query for the
page, and a fixed handful of batch queries for what each row shows (tags, result counts,
favicons). No row touches the filesystem.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import date, datetime, time

from django.db.models import Count, Exists, OuterRef, QuerySet
from django.utils import timezone

from waybox.models import ArchiveResult, Snapshot
from waybox.web.search import search_snapshots

SNAPSHOT_STATUSES = ("queued", "started", "sealed", "failed")


class FilterError(ValueError):
    """A filter value that cannot be used; the message says which and why."""


def parse_day(value: str | None, *, end: bool = False, name: str = "date") -> datetime | None:
    """An ISO date (or date-time) as an aware datetime; a bare date is its first (or last) moment."""
    if not value:
        return None
    text = value.strip()
    try:
        if len(text) <= 10:
            day = date.fromisoformat(text)
            moment = datetime.combine(day, time.max if end else time.min)
        else:
            moment = datetime.fromisoformat(text)
    except ValueError:
        raise FilterError(f"{name}: {value!r} is not a date such as 2026-01-31") from None
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


def parse_uuid(value: str | None, name: str) -> uuid.UUID | None:
    if not value:
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        raise FilterError(f"{name}: {value!r} is not an id") from None


def filter_snapshots(q: str | None = None, tag: str | None = None, status: str | None = None,
                     since: str | None = None, until: str | None = None, crawl: str | None = None) -> QuerySet:
    """Snapshots matching every given filter, newest first (on the created_at index)."""
    qs = search_snapshots(q)
    if tag:
        qs = qs.filter(tags__name=tag.strip())
    if status:
        if status not in SNAPSHOT_STATUSES:
            raise FilterError(f"status: {status!r} is not one of {', '.join(SNAPSHOT_STATUSES)}")
        if status == "failed":
            failed = ArchiveResult.objects.filter(snapshot=OuterRef("pk"), status=ArchiveResult.Status.FAILED)
            qs = qs.filter(Exists(failed))
        else:
            qs = qs.filter(status=status)
    start = parse_day(since, name="since")
    stop = parse_day(until, end=True, name="until")
    if start:
        qs = qs.filter(created_at__gte=start)
    if stop:
        qs = qs.filter(created_at__lte=stop)
    crawl_id = parse_uuid(crawl, "crawl")
    if crawl_id:
        qs = qs.filter(crawl_id=crawl_id)
    return qs.order_by("-created_at")


@dataclass
class Row:
    snapshot: Snapshot
    tags: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    favicon: str = ""  # path relative to the Snapshot folder

    @property
    def failed(self) -> int:
        return self.counts.get("failed", 0)

    @property
    def succeeded(self) -> int:
        return self.counts.get("succeeded", 0)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def rows_for(snapshots: list[Snapshot]) -> list[Row]:
    """What the index shows per Snapshot, in three queries for the whole page."""
    ids = [s.id for s in snapshots]
    tags: dict = {s.id: [] for s in snapshots}
    through = Snapshot.tags.through
    for snapshot_id, name in through.objects.filter(snapshot_id__in=ids).values_list("snapshot_id", "tag__name"):
        tags[snapshot_id].append(name)
    counts: dict = {}
    by_status = (ArchiveResult.objects.filter(snapshot_id__in=ids).order_by()
                 .values_list("snapshot_id", "status").annotate(n=Count("id")))
    for snapshot_id, status, n in by_status:
        counts.setdefault(snapshot_id, {})[status] = n
    favicons = {}
    for snapshot_id, files in ArchiveResult.objects.filter(
        snapshot_id__in=ids, plugin="favicon", status=ArchiveResult.Status.SUCCEEDED
    ).values_list("snapshot_id", "output_files"):
        if files:
            favicons[snapshot_id] = files[0]
    return [Row(s, sorted(tags[s.id]), counts.get(s.id, {}), favicons.get(s.id, "")) for s in snapshots]
