"""`waybox list` and `waybox remove`: the same filters, one to show and one to delete."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from datetime import datetime, time
from typing import TYPE_CHECKING

import click
from rich.markup import escape

from waybox.cli import App, err_console, pass_app
from waybox.cli.output import emit, format_options

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from waybox.models import Snapshot

LIST_COLUMNS = ["id", "created_at", "status", "current_step", "depth", "url", "title", "tags"]


def parse_when(value: str | None, *, end_of_day: bool = False) -> datetime | None:
    """An ISO date or date-time; a bare date means its start (or end, for --until).

    A value without a time zone is the user's local time: that is what they read on their clock.
    """
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO date such as 2026-01-31 or 2026-01-31T12:00") from None
    if len(value.strip()) <= 10 and end_of_day:
        parsed = datetime.combine(parsed.date(), time.max)
    return parsed.astimezone() if parsed.tzinfo is None else parsed


def _since(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime | None:
    return parse_when(value)


def _until(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime | None:
    return parse_when(value, end_of_day=True)


def filter_options(func: Callable) -> Callable:
    """The filters `list` and `remove` share, so what `list` shows is what `remove` deletes."""
    options = [
        click.option("--status", type=click.Choice(["queued", "started", "sealed"]), help="Snapshot status."),
        click.option("--tag", "tag", help="Only Snapshots with this tag."),
        click.option("--url", "url_contains", help="Only URLs containing this text."),
        click.option("--since", callback=_since, help="Created on or after this ISO date/time (local time)."),
        click.option("--until", callback=_until, help="Created on or before this ISO date/time (local time)."),
        click.option("--crawl", "crawl_id", help="Only Snapshots of this Crawl id."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def filtered_snapshots(
    status: str | None, tag: str | None, url_contains: str | None, since: datetime | None,
    until: datetime | None, crawl_id: str | None,
) -> QuerySet:
    """Snapshots matching every given filter, newest first."""
    from waybox.models import Snapshot

    qs = Snapshot.objects.all()
    if status:
        qs = qs.filter(status=status)
    if tag:
        qs = qs.filter(tags__name=tag)
    if url_contains:
        qs = qs.filter(url__contains=url_contains)
    if since:
        qs = qs.filter(created_at__gte=since)
    if until:
        qs = qs.filter(created_at__lte=until)
    if crawl_id:
        qs = qs.filter(crawl_id=_valid_id(crawl_id))
    return qs.order_by("-created_at", "-id")


def _valid_id(value: str) -> str:
    """A UUID, or a usage error (Django would raise a ValidationError traceback)."""
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a Crawl id (a UUID)", param_hint="--crawl") from None


def snapshot_row(snapshot: Snapshot, *, with_results: bool) -> dict:
    """One Snapshot as the listing formats print it (ArchiveResults only where asked)."""
    from waybox.archive import result_dict

    row = {
        "id": str(snapshot.id),
        "url": snapshot.url,
        "title": snapshot.title,
        "status": snapshot.status,
        "current_step": snapshot.current_step,
        "depth": snapshot.depth,
        "crawl_id": str(snapshot.crawl_id),
        "retry_at": snapshot.retry_at,
        "created_at": snapshot.created_at,
        "started_at": snapshot.started_at,
        "ended_at": snapshot.ended_at,
        "tags": [t.name for t in snapshot.tags.all()],
    }
    if with_results:
        row["archiveresults"] = [result_dict(r) for r in snapshot.results.all()]
    return row


@click.command(name="list")
@filter_options
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most this many rows.")
@click.option("--offset", type=click.IntRange(min=0), default=0, help="Skip this many rows first.")
@format_options()
@pass_app
def list_(
    app: App, status: str | None, tag: str | None, url_contains: str | None, since: datetime | None,
    until: datetime | None, crawl_id: str | None, limit: int | None, offset: int, fmt: str | None,
) -> None:
    """List Snapshots, newest first, with their ArchiveResults in --json/--jsonl."""
    app.boot()
    qs = filtered_snapshots(status, tag, url_contains, since, until, crawl_id)
    qs = qs.prefetch_related("tags", "results")
    qs = qs[offset : offset + limit] if limit is not None else qs[offset:]
    rows = [snapshot_row(s, with_results=fmt in ("json", "jsonl")) for s in qs]
    if not rows and fmt is None:
        err_console.print("no Snapshots match")
        return
    emit(rows, fmt, LIST_COLUMNS if fmt != "csv" else [*LIST_COLUMNS, "crawl_id"])


@click.command()
@filter_options
@click.option("--yes", is_flag=True, help="Delete without asking.")
@click.option("--all", "everything", is_flag=True, help="Allow removing with no filter at all.")
@pass_app
def remove(
    app: App, status: str | None, tag: str | None, url_contains: str | None, since: datetime | None,
    until: datetime | None, crawl_id: str | None, yes: bool, everything: bool,
) -> None:
    """Delete Snapshots (rows and archive folders) matching the filters."""
    if not any([status, tag, url_contains, since, until, crawl_id, everything]):
        raise click.UsageError("give at least one filter, or --all to remove every Snapshot")
    app.boot()
    qs = filtered_snapshots(status, tag, url_contains, since, until, crawl_id)
    doomed = list(qs.values_list("id", "url"))
    if not doomed:
        err_console.print("nothing matches those filters")
        return
    for snapshot_id, url in doomed[:20]:
        err_console.print(f"  {snapshot_id}  {escape(url)}")
    if len(doomed) > 20:
        err_console.print(f"  ... and {len(doomed) - 20} more")
    err_console.print(f"{len(doomed)} Snapshot(s) and their archive folders will be deleted.")
    if not yes:
        err_console.print("[yellow]Nothing deleted:[/] re-run with --yes to delete them.")
        raise SystemExit(1)
    remove_snapshots(app, [snapshot_id for snapshot_id, _ in doomed])
    err_console.print(f"[green]removed {len(doomed)} Snapshot(s)[/]")


def remove_snapshots(app: App, ids: list[uuid.UUID]) -> None:
    """Stop their running hooks, delete rows (and index entries), then folders; Crawls left
    without Snapshots go too."""
    from waybox import search
    from waybox.models import ArchiveResult, Crawl, Process, Snapshot

    running = Process.objects.filter(
        status=Process.Status.RUNNING, archiveresults__snapshot_id__in=ids,
        archiveresults__status=ArchiveResult.Status.STARTED,
    ).distinct()
    for process in running:
        process.kill_tree(grace=float(app.config["BG_HOOK_GRACE"]))
    crawl_ids = set(Snapshot.objects.filter(id__in=ids).values_list("crawl_id", flat=True))
    for start in range(0, len(ids), 500):
        Snapshot.objects.filter(id__in=ids[start : start + 500]).delete()
    search.remove_snapshots(ids)
    empty = Crawl.objects.filter(id__in=crawl_ids, snapshots__isnull=True)
    for crawl_id in empty.values_list("id", flat=True):
        shutil.rmtree(app.datadir.crawl_dir(crawl_id), ignore_errors=True)
    empty.delete()
    for snapshot_id in ids:
        shutil.rmtree(app.datadir.snapshot_dir(snapshot_id), ignore_errors=True)


COMMANDS = [list_, remove]
