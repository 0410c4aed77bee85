"""`waybox search QUERY`: ranked full-text search with snippets."""

from __future__ import annotations

import click

from waybox.cli import App, err_console, pass_app
from waybox.cli.output import emit, format_options


@click.command(name="search")
@click.argument("query", nargs=-1, required=True)
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@click.option("--offset", type=click.IntRange(min=0), default=0)
@format_options()
@pass_app
def search_command(app: App, query: tuple[str, ...], limit: int, offset: int, fmt) -> None:
    """Search titles, URLs, tags and archived text; best matches first."""
    app.boot()
    from waybox import search
    from waybox.models import Snapshot

    hits = search.search(" ".join(query), limit=limit, offset=offset)
    snapshots = Snapshot.objects.in_bulk([h.snapshot_id for h in hits])
    rows = []
    for hit in hits:
        snapshot = snapshots.get(hit.snapshot_id) or snapshots.get(_uuid(hit.snapshot_id))
        if snapshot is None:
            continue
        rows.append({"id": str(snapshot.id), "url": snapshot.url, "title": snapshot.title,
                     "rank": round(hit.rank, 4), "snippet": hit.snippet, "created_at": snapshot.created_at})
    if not rows and not fmt:
        err_console.print("no matches")
        return
    emit(rows, fmt, ["rank", "url", "title", "snippet"] if not fmt else ["id", "url", "title", "rank", "snippet"])


def _uuid(value: str):
    import uuid

    try:
        return uuid.UUID(value)
    except ValueError:
        return None


COMMANDS = [search_command]
