"""Search as the web UI and the API do it: one function.

A Snapshot matches when the full-text index (waybox.search: titles, URLs, tags and archived
text) finds the query in it, or, for Snapshots not indexed yet, when every word appears in
its URL or title. The result stays a QuerySet of Snapshots, so filters, counting and
pagination compose with it.
"""

from __future__ import annotations

import uuid

from django.db.models import Q, QuerySet

MAX_TERMS = 8
MAX_INDEX_HITS = 2000


def search_snapshots(query: str | None, qs: QuerySet | None = None) -> QuerySet:
    """Snapshots of `qs` (default: all) matching `query`; an empty query matches everything."""
    from waybox import search
    from waybox.models import Snapshot

    qs = Snapshot.objects.all() if qs is None else qs
    terms = (query or "").split()[:MAX_TERMS]
    if not terms:
        return qs
    substring = Q()
    for term in terms:
        substring &= Q(url__icontains=term) | Q(title__icontains=term)
    hits = [uuid.UUID(h.snapshot_id) for h in search.search(" ".join(terms), limit=MAX_INDEX_HITS, snippets=False)]
    return qs.filter(Q(id__in=hits) | substring) if hits else qs.filter(substring)
