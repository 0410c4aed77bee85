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


def search(text: str, limit: int = 50, offset: int = 0, *, snippets: bool = True) -> list[Hit]:
    """Best matches first (higher rank is better on both databases), each with a snippet
    where the words appear ([word] marks them) unless `snippets=False`.

    Ranking happens in an inner query and snippets are made for the returned page only: a
    snippet for every match (most of a big collection, for common words) is what made a
    search take as long as a full scan.
    """
    if _postgres():
        top = f"""
            SELECT snapshot_id, title, content, ts_rank(document, q) AS rank, q
            FROM {TABLE}, websearch_to_tsquery('english', %s) AS q
            WHERE document @@ q ORDER BY rank DESC LIMIT %s OFFSET %s"""
        headline = ("ts_headline('english', coalesce(top.title, '') || ' ' || top.content, top.q, "
                    "'StartSel=[,StopSel=],MaxWords=30,MinWords=10')")
        sql = f"SELECT top.snapshot_id, top.rank, {headline if snippets else 'NULL'} FROM ({top}) AS top"
        params = [text, limit, offset]
    else:
        query = fts5_query(text)
        if not query:
            return []
        top = f"""
            SELECT rowid AS id, snapshot_id, -bm25({TABLE}, 0, 2.0, 5.0, 3.0, 1.0) AS rank
            FROM {TABLE} WHERE {TABLE} MATCH %s ORDER BY rank DESC LIMIT %s OFFSET %s"""
        params = [query, limit, offset]
        sql = f"SELECT snapshot_id, rank, NULL FROM ({top})"
        if snippets:
            sql = f"""
                SELECT top.snapshot_id, top.rank, snippet({TABLE}, -1, '[', ']', '…', 16)
                FROM ({top}) AS top JOIN {TABLE} ON {TABLE}.rowid = top.id
                WHERE {TABLE} MATCH %s ORDER BY top.rank DESC"""
            params.append(query)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [Hit(str(r[0]), float(r[1]), r[2] or "") for r in cursor.fetchall()]
