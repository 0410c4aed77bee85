"""Fills a collection with N Snapshots and measures the index page (run as a script by
test_web.py, in its own process so the big collection stays out of the test process).

Prints JSON: for each page, the number of SQL queries, the time, and the query plan of the
main query.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import timedelta
from pathlib import Path


def main(root: str, n: int) -> None:
    from waybox.datadir import DataDir
    from waybox.settings import setup_django

    setup_django(DataDir(Path(root)))
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from waybox.models import ArchiveResult, Crawl, Snapshot, Tag
    from waybox.web.queries import filter_snapshots

    start = timezone.now() - timedelta(days=400)
    crawl = Crawl.objects.create(urls="bulk", status="sealed", retry_at=None)
    tags = [Tag.objects.create(name=f"tag-{i}") for i in range(20)]
    snaps = [Snapshot(url=f"https://example-{i}.com/page/{i}", title=f"Page number {i}", crawl=crawl,
                      status="sealed", retry_at=None, created_at=start + timedelta(minutes=5 * i),
                      output_size=1000 + i) for i in range(n)]
    Snapshot.objects.bulk_create(snaps, batch_size=2000)
    through = Snapshot.tags.through
    through.objects.bulk_create([through(snapshot_id=s.id, tag_id=tags[i % 20].id) for i, s in enumerate(snaps)],
                                batch_size=2000)
    ArchiveResult.objects.bulk_create(
        [ArchiveResult(snapshot=s, plugin="favicon" if i % 2 else "webshot", hook_name="on_Snapshot__64_x.py",
                       status="succeeded", retry_at=None, output_files=["favicon/favicon.ico"])
         for i, s in enumerate(snaps)], batch_size=2000)
    user = get_user_model().objects.create_superuser("bench", "", "bench-password-1")
    client = Client()
    client.force_login(user)
    day = (start + timedelta(days=200)).date().isoformat()
    pages = ["/", "/?page=2", f"/?page={n // 50}", "/?q=example-77", "/?tag=tag-3", "/?status=sealed",
             f"/?since={day}", "/?q=number&tag=tag-5&page=3", "/progress.json"]
    report = {}
    for path in pages:
        client.get(path)  # warm caches (templates, config) once
        with CaptureQueriesContext(connection) as ctx:
            t0 = time.perf_counter()
            response = client.get(path)
            elapsed = time.perf_counter() - t0
        report[path] = {"status": response.status_code, "queries": len(ctx.captured_queries),
                        "seconds": round(elapsed, 4)}
    sql, params = filter_snapshots()[:50].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        report["plan"] = " | ".join(str(row[-1]) for row in cursor.fetchall())
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
