"""Search as the web UI and the API do it: one function, to swap for full-text search later.

Now: every word of the query must appear in the URL or the title (case-insensitive
substring). The result stays a QuerySet of Snapshots, so filters, counting and pagination
compose with it whatever the implementation.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet

MAX_TERMS = 8


def search_snapshots(query: str | None, qs: QuerySet | None = None) -> QuerySet:
    """Snapshots of `qs` (default: all) matching `query`; an empty query matches everything."""
    from waybox.models import Snapshot

    qs = Snapshot.objects.all() if qs is None else qs
    terms = (query or "").split()[:MAX_TERMS]
    for term in terms:
        qs = qs.filter(Q(url__icontains=term) | Q(title__icontains=term))
    return qs
