"""Full-text search over titles, URLs, tags and extracted text.

SQLite: an FTS5 table ranked with bm25 and `snippet()`. PostgreSQL: a table with a generated,
weighted tsvector and a GIN index, ranked with ts_rank and `ts_headline()`. Both are filled
by the `search` plugin's step-9 hook through `index_snapshot()`; one row per Snapshot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import connection, transaction

TABLE = "waybox_search"
MAX_CONTENT_CHARS = 2_000_000
TERM_RE = re.compile(r"\w[\w'.-]*", re.UNICODE)


@dataclass(frozen=True)
class Hit:
    snapshot_id: str
    rank: float
    snippet: str


def _postgres() -> bool:
    return connection.vendor == "postgresql"


def index_snapshot(snapshot_id: str, url: str, title: str, tags: str, content: str) -> None:
    """Replace the Snapshot's row (idempotent: a re-run re-indexes)."""
    content = content[:MAX_CONTENT_CHARS]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE snapshot_id = %s", [str(snapshot_id)])
        cursor.execute(
            f"INSERT INTO {TABLE} (snapshot_id, url, title, tags, content) VALUES (%s, %s, %s, %s, %s)",
            [str(snapshot_id), url, title, tags, content],
        )


def remove_snapshots(snapshot_ids: list) -> None:
    with connection.cursor() as cursor:
        for start in range(0, len(snapshot_ids), 500):
            batch = [str(i) for i in snapshot_ids[start : start + 500]]
            marks = ",".join(["%s"] * len(batch))
            cursor.execute(f"DELETE FROM {TABLE} WHERE snapshot_id IN ({marks})", batch)


def fts5_query(text: str) -> str:
    """User words as quoted FTS5 terms (AND), so punctuation never becomes query syntax."""
    terms = TERM_RE.findall(text)
    return " ".join('"' + t.replace('"', '""') + '"' for t in terms)


def search(text: str, limit: int = 50, offset: int = 0) -> list[Hit]:
    """Best matches first (higher rank is better on both databases), each with a snippet
    where the words appear ([word] marks them)."""
    if _postgres():
        sql = f"""
            SELECT snapshot_id, ts_rank(document, q) AS rank,
                   ts_headline('english', coalesce(title, '') || ' ' || content, q,
                               'StartSel=[,StopSel=],MaxWords=30,MinWords=10')
            FROM {TABLE}, websearch_to_tsquery('english', %s) AS q
            WHERE document @@ q ORDER BY rank DESC LIMIT %s OFFSET %s"""
        params = [text, limit, offset]
    else:
        query = fts5_query(text)
        if not query:
            return []
        sql = f"""
            SELECT snapshot_id, -bm25({TABLE}, 0, 2.0, 5.0, 3.0, 1.0) AS rank,
                   snippet({TABLE}, -1, '[', ']', '…', 16)
            FROM {TABLE} WHERE {TABLE} MATCH %s ORDER BY rank DESC LIMIT %s OFFSET %s"""
        params = [query, limit, offset]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [Hit(str(r[0]), float(r[1]), r[2] or "") for r in cursor.fetchall()]
