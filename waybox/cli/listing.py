"""`waybox list` and `waybox remove`: the same filters, one to show and one to delete."""

from __future__ import annotations

import shutil
from datetime import datetime, time

import click
from django.utils import timezone

from waybox.cli import App, err_console, pass_app
from waybox.cli.output import emit, format_options

LIST_COLUMNS = ["id", "created_at", "status", "current_step", "depth", "url", "title", "tags"]


def parse_when(value: str | None, *, end_of_day: bool = False) -> datetime | None:
    """An ISO date or date-time; a bare date means its start (or end, for --until)."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO date such as 2026-01-31 or 2026-01-31T12:00") from None
    if len(value) <= 10 and end_of_day:
        parsed = datetime.combine(parsed.date(), time.max)
    if timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, timezone.get_current_timezone())
    return parsed


def filter_options(func):
    options = [
        click.option("--status", type=click.Choice(["queued", "started", "sealed"]), help="Snapshot status."),
        click.option("--tag", "tag", help="Only Snapshots with this tag."),
        click.option("--url", "url_contains", help="Only URLs containing this text."),
        click.option("--since", help="Created on or after this ISO date/time."),
        click.option("--until", help="Created on or before this ISO date/time."),
        click.option("--crawl", "crawl_id", help="Only Snapshots of this Crawl id."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def filtered_snapshots(status, tag, url_contains, since, until, crawl_id):
    from waybox.models import Snapshot

    qs = Snapshot.objects.all()
    if status:
        qs = qs.filter(status=status)
    if tag:
        qs = qs.filter(tags__name=tag)
    if url_contains:
        qs = qs.filter(url__contains=url_contains)
    if since:
        qs = qs.filter(created_at__gte=parse_when(since))
    if until:
        qs = qs.filter(created_at__lte=parse_when(until, end_of_day=True))
    if crawl_id:
        qs = qs.filter(crawl_id=crawl_id)
    return qs.order_by("-created_at", "-id")


def snapshot_row(snapshot, *, with_results: bool) -> dict:
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
def list_(app: App, status, tag, url_contains, since, until, crawl_id, limit, offset, fmt) -> None:
    """List Snapshots, newest first, with their ArchiveResults in --json/--jsonl."""
    app.boot()
    qs = filtered_snapshots(status, tag, url_contains, since, until, crawl_id)
    qs = qs.prefetch_related("tags", "results")
    qs = qs[offset : offset + limit] if limit is not None else qs[offset:]
    rows = [snapshot_row(s, with_results=fmt in ("json", "jsonl")) for s in qs]
    emit(rows, fmt, LIST_COLUMNS if fmt != "csv" else [*LIST_COLUMNS, "crawl_id"])


@click.command()
@filter_options
@click.option("--yes", is_flag=True, help="Delete without asking.")
@click.option("--all", "everything", is_flag=True, help="Allow removing with no filter at all.")
@pass_app
def remove(app: App, status, tag, url_contains, since, until, crawl_id, yes, everything) -> None:
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
        err_console.print(f"  {snapshot_id}  {url}")
    if len(doomed) > 20:
        err_console.print(f"  ... and {len(doomed) - 20} more")
    err_console.print(f"{len(doomed)} Snapshot(s) and their archive folders will be deleted.")
    if not yes:
        err_console.print("[yellow]Nothing deleted:[/] re-run with --yes to delete them.")
        raise SystemExit(1)
    remove_snapshots(app, [snapshot_id for snapshot_id, _ in doomed])
    err_console.print(f"[green]removed {len(doomed)} Snapshot(s)[/]")


def remove_snapshots(app: App, ids: list) -> None:
    """Rows first (so nothing points at a missing folder), then the folders."""
    from waybox.models import Snapshot

    for start in range(0, len(ids), 500):
        Snapshot.objects.filter(id__in=ids[start : start + 500]).delete()
    for snapshot_id in ids:
        shutil.rmtree(app.datadir.snapshot_dir(snapshot_id), ignore_errors=True)


COMMANDS = [list_, remove]
