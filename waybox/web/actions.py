"""What the pages, the API and the admin do to the archive: add, re-run, re-snapshot, delete.

One implementation for all three, so a button, an API call and an admin action behave alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace

from django.db import transaction
from django.utils import timezone

from waybox.models import ArchiveResult, Crawl, Snapshot
from waybox.web.conf import data_dir, get_config

MAX_DEPTH = 10
AR = ArchiveResult.Status


class ActionError(ValueError):
    """Input or state that stops an action; the message is shown to the user as is."""


@dataclass
class AddOutcome:
    crawl: Crawl
    added: int
    skipped: list[dict] = field(default_factory=list)


def parse_input(text: str = "", data: bytes | None = None, where: str = "input") -> tuple[list, list[dict]]:
    """Links from pasted text and/or an uploaded file (any format `waybox.parsers` reads)."""
    from waybox.parsers import ParseError, parse

    links: dict[str, object] = {}
    skipped: list[dict] = []
    for source, label, payload in (("text", "the URLs given", text), (where, where, data)):
        if not payload or (isinstance(payload, str) and not payload.strip()):
            continue
        try:
            result = parse(payload)
        except ParseError as err:
            raise ActionError(f"No URL found in {label}: {err}") from None
        for link in result.links:
            links.setdefault(link.url, link)
        skipped += [{"where": f"{source}:{s.line}", "text": s.text[:300], "reason": s.reason} for s in result.skipped]
    return list(links.values()), skipped


def plugin_overrides(plugins: Iterable[str]) -> dict[str, str]:
    """A Crawl's PLUGINS override, refusing plugin names that do not exist."""
    from waybox.config import ConfigError, check_overrides

    names = [p.strip().lower() for p in plugins if p and p.strip()]
    if not names:
        return {}
    config = get_config()
    known = set(config.registry.plugins) if config.registry else set()
    unknown = sorted(set(names) - known)
    if unknown:
        raise ActionError(f"unknown plugin(s): {', '.join(unknown)}")
    overrides = {"PLUGINS": ",".join(dict.fromkeys(names))}
    try:
        check_overrides(config, overrides, "plugins")
    except ConfigError as err:
        raise ActionError(str(err)) from None
    return overrides


def add_urls(*, text: str = "", data: bytes | None = None, filename: str = "", depth: int = 0,
             tags: Sequence[str] = (), plugins: Sequence[str] = (), user=None, source: str = "web") -> AddOutcome:
    """Queue one Crawl for everything given; the running orchestrator is woken by create_crawl."""
    from waybox.enqueue import create_crawl

    if not 0 <= int(depth) <= MAX_DEPTH:
        raise ActionError(f"depth must be between 0 and {MAX_DEPTH}")
    links, skipped = parse_input(text, data, filename or "file")
    if not links:
        raise ActionError("no valid URLs to add" + (f" ({len(skipped)} line(s) skipped)" if skipped else ""))
    overrides = plugin_overrides(plugins)
    label = f"{source}" + (f" upload {filename}" if filename else "")
    if user is not None and getattr(user, "is_authenticated", False):
        label += f" by {user.get_username()}"
    crawl = create_crawl(data_dir(), links, depth=int(depth), tags=list(tags), config=overrides, source=label)
    if user is not None and getattr(user, "is_authenticated", False):
        Crawl.objects.filter(pk=crawl.pk).update(created_by=user)
    return AddOutcome(crawl=crawl, added=len(links), skipped=skipped)


def rerun(snapshot: Snapshot, plugins: Sequence[str] | None = None, result_ids: Sequence | None = None) -> int:
    """Run a Snapshot's hooks again (all, those of `plugins`, or the results `result_ids`), in
    step order, then re-seal.

    The Snapshot goes back to `started` at step 0 with the chosen results queued afresh
    (attempts 0); its actor walks the steps again and seals it, which also stops background
    hooks and re-measures its size. Refused while the Snapshot is still being archived.
    """
    from waybox.engine import wakeup

    results = ArchiveResult.objects.filter(snapshot=snapshot)
    if plugins:
        results = results.filter(plugin__in=list(plugins))
        if not results.exists():
            raise ActionError(f"this Snapshot has no results of {', '.join(plugins)}")
    if result_ids is not None:
        results = results.filter(pk__in=list(result_ids))
        if not results.exists():
            raise ActionError("none of those results belong to this Snapshot")
    now = timezone.now()
    with transaction.atomic():
        reopened = Snapshot.objects.filter(pk=snapshot.pk, status=Snapshot.Status.SEALED).update(
            status=Snapshot.Status.STARTED, current_step=0, retry_at=now, ended_at=None, lease_owner=None,
            modified_at=now,
        )
        if not reopened:
            raise ActionError("this Snapshot is still being archived; re-run it when it is sealed")
        count = results.update(status=AR.QUEUED, attempts=0, retry_at=None, lease_owner=None, started_at=None,
                               ended_at=None, modified_at=now)
    wakeup.notify("snapshot")
    return count


def resnapshot(snapshots: Iterable[Snapshot], user=None) -> Crawl:
    """A new capture of these URLs: one new Crawl, each URL keeping its tags."""
    from waybox.enqueue import create_crawl
    from waybox.parsers import Link

    links: dict[str, Link] = {}
    for s in snapshots:
        links.setdefault(s.url, Link(url=s.url, title=s.title, tags=tuple(t.name for t in s.tags.all())))
    if not links:
        raise ActionError("nothing to re-snapshot")
    label = "re-snapshot" + (f" by {user.get_username()}" if user is not None and user.is_authenticated else "")
    crawl = create_crawl(data_dir(), list(links.values()), source=label)
    if user is not None and user.is_authenticated:
        Crawl.objects.filter(pk=crawl.pk).update(created_by=user)
    return crawl


def delete_preview(ids: Sequence) -> dict:
    """What deleting these Snapshots removes: rows, results, files on disk (measured)."""
    snapshots = list(Snapshot.objects.filter(id__in=list(ids)).order_by("-created_at"))
    results = ArchiveResult.objects.filter(snapshot_id__in=[s.id for s in snapshots]).count()
    size = sum(s.output_size for s in snapshots)
    running = [s for s in snapshots if s.status != Snapshot.Status.SEALED]
    return {"snapshots": snapshots, "results": results, "size": size, "running": running}


def delete_snapshots(ids: Sequence) -> int:
    """Rows, search entries and folders (running hooks are stopped first), as `waybox remove` does."""
    from waybox.cli.listing import remove_snapshots

    ids = list(Snapshot.objects.filter(id__in=list(ids)).values_list("id", flat=True))
    if ids:
        remove_snapshots(SimpleNamespace(config=get_config(), datadir=data_dir()), ids)
    return len(ids)
