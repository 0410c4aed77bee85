#!/usr/bin/env python3
"""Delay between the end of a step's last foreground hook and the start of the next step's
first hook, p50 and p99, on SQLite and on PostgreSQL (target: p50 <= 10 ms, p99 <= 50 ms).

    .venv/bin/python bench/step_latency.py [--snapshots 50] [--parallel 4] [--no-postgres]

Times come from the no-op hooks' own nanosecond stamps (Process.started_at is the kernel's
start time, which has 10 ms resolution).
"""

from __future__ import annotations

import argparse
import os
import time

from common import cleanup, machine, noop_collection, queue_snapshots, step_gaps, summary, waybox


def measure(count: int, parallel: int, database_url: str = "") -> str:
    root = noop_collection(parallel, database_url)
    try:
        queue_snapshots(root, count)
        waybox(root, "run")
        return summary(step_gaps(root))
    finally:
        cleanup(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshots", type=int, default=50)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    print(f"step_latency: {args.snapshots} snapshots x 10 steps, parallelism {args.parallel}, {machine()}")
    print(f"  sqlite:     {measure(args.snapshots, args.parallel)}")
    if args.no_postgres:
        return
    from tests import pgserver

    try:
        with pgserver.postgres_server() as port:
            url = pgserver.create_database(port, f"bench_{os.getpid()}_{time.monotonic_ns()}")
            print(f"  postgresql: {measure(args.snapshots, args.parallel, url)}")
    except pgserver.PostgresUnavailable as err:
        print(f"  postgresql: not measured ({err})")


if __name__ == "__main__":
    main()
