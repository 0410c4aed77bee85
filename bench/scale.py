"""How waybox behaves with 100,000 Snapshots: the everyday commands, the web index, a big add.

    .venv/bin/python bench/scale.py [--snapshots 100000] [--add 10000] [--keep]

A throwaway SQLite collection is filled directly (rows through the ORM's bulk_create, one
folder with an `index.json` per Snapshot, a search row per Snapshot, five ArchiveResults and
a tag each), because archiving 100,000 pages for real would measure the plugins, not the
collection. Then each command runs as a real `waybox` process, three times, and the median
wall time is printed beside the target and beside the same command on the same collection
while it was still empty, measured in the same run: the difference is what size costs, the
rest is starting Python and Django.
Peak memory is each command's own max RSS (from `wait4`), and the web index is fetched over
HTTP from a real `waybox server`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNS = 3
WORDS = ["archive", "harbor", "lantern", "quiet", "meadow", "copper", "signal", "river", "orbit", "velvet",
         "granite", "saffron", "echo", "willow", "cipher", "tundra", "falcon", "amber", "prism", "cobalt"]


def waybox_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "waybox", *args]


def run_measured(root: Path, *args: str, stdin: str = "") -> tuple[float, int, str]:
    """(seconds, peak RSS in MiB, stdout) of one `waybox` process, its rusage read by `wait4`."""
    env = {**os.environ, "WAYBOX_DATA_DIR": str(root)}
    with tempfile.TemporaryFile("w+") as inp, tempfile.TemporaryFile("w+") as out, \
            tempfile.TemporaryFile("w+") as err:
        inp.write(stdin)
        inp.seek(0)
        start = time.perf_counter()
        proc = subprocess.Popen(waybox_argv(*args), env=env, cwd=root, stdin=inp, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            raise SystemExit(f"waybox {' '.join(args)} failed ({proc.returncode}): {err.read()[-2000:]}")
        return elapsed, usage.ru_maxrss // 1024, out.read()


def timed_median(root: Path, *args: str) -> tuple[float, int, str]:
    runs = [run_measured(root, *args) for _ in range(RUNS)]
    return statistics.median(r[0] for r in runs), max(r[1] for r in runs), runs[-1][2]


POPULATE = r'''
import json, random, sys
from datetime import timedelta
from pathlib import Path
from waybox.datadir import DataDir
from waybox.settings import setup_django

root, n, words = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split()
datadir = DataDir(root)
setup_django(datadir)
from django.db import connection, transaction
from django.utils import timezone
from waybox.models import ArchiveResult, Crawl, Snapshot, Tag

rng = random.Random(7)
start = timezone.now() - timedelta(days=700)
crawl = Crawl.objects.create(urls="bench/scale", status="sealed", retry_at=None)
tags = [Tag.objects.create(name=f"topic-{i}") for i in range(20)]
plugins = ["wget", "screenshot", "singlefile", "title", "favicon"]
for first in range(0, n, 5000):
    with transaction.atomic():
        snaps = [Snapshot(url=f"https://site-{i % 5000}.example/{rng.choice(words)}/{i}",
                          title=f"{rng.choice(words).title()} {rng.choice(words)} page {i}", crawl=crawl,
                          status="sealed", retry_at=None, current_step=10, created_at=start + timedelta(minutes=10 * i),
                          output_size=20000 + i) for i in range(first, min(n, first + 5000))]
        Snapshot.objects.bulk_create(snaps)
        through = Snapshot.tags.through
        through.objects.bulk_create([through(snapshot_id=s.id, tag_id=tags[k % 20].id) for k, s in enumerate(snaps)])
        ArchiveResult.objects.bulk_create([
            ArchiveResult(snapshot=s, plugin=p, hook_name=f"on_Snapshot__5{j}_{p}.py", status="succeeded",
                          retry_at=None, attempts=1, output_files=[f"{p}/output"], output_str="ok")
            for s in snaps for j, p in enumerate(plugins)])
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO waybox_search (snapshot_id, url, title, tags, content) VALUES (%s, %s, %s, %s, %s)",
                [(str(s.id), s.url, s.title, tags[k % 20].name, " ".join(rng.choices(words, k=60)))
                 for k, s in enumerate(snaps)])
    for s in snaps:
        folder = datadir.snapshot_dir(s.id)
        folder.mkdir(parents=True)
        (folder / "index.json").write_text(json.dumps({"id": str(s.id), "url": s.url, "title": s.title}))
print(Snapshot.objects.count())
'''


def populate(root: Path, n: int) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", POPULATE, str(root), str(n), " ".join(WORDS)], check=True, cwd=REPO,
                   env={**os.environ, "WAYBOX_DATA_DIR": str(root), "PYTHONPATH": str(REPO)})
    return time.perf_counter() - start


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch_seconds(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
        assert response.status == 200, response.status
    return time.perf_counter() - start


def measure_web(root: Path) -> dict[str, float]:
    """Median of five fetches of each page after one warm-up, from a real `waybox server`."""
    port = free_port()
    server = subprocess.Popen(waybox_argv("server", "--no-orchestrator", "--bind", f"127.0.0.1:{port}",
                                          "--workers", "1"),
                              env={**os.environ, "WAYBOX_DATA_DIR": str(root)}, cwd=root,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                fetch_seconds(base + "/")
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("waybox server did not come up") from None
                time.sleep(0.2)
        pages = {"web index": "/", "web index page 1000": "/?page=1000", "web index search": "/?q=harbor+lantern",
                 "web index tag": "/?tag=topic-3"}
        figures = {}
        for name, path in pages.items():
            fetch_seconds(base + path)
            figures[name] = statistics.median(fetch_seconds(base + path) for _ in range(5))
        return figures
    finally:
        os.killpg(server.pid, 15)
        server.wait(30)


def folder_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.glob("index.sqlite3*")) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshots", type=int, default=100_000)
    parser.add_argument("--add", type=int, default=10_000, help="URLs queued by the `add --bg` figure")
    parser.add_argument("--keep", action="store_true", help="keep the collection and print its path")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="waybox-scale-"))
    root = tmp / "collection"
    root.mkdir()
    try:
        run_measured(root, "init")
        run_measured(root, "config", "--set", "PUBLIC_INDEX=True")
        empty = measure_all(root)
        print(f"filling {args.snapshots} Snapshots ...", flush=True)
        fill_s = populate(root, args.snapshots)
        full = measure_all(root)
        seconds, rss = measure_add(root, args.add)
        summary = {"snapshots": args.snapshots, "fill_s": round(fill_s, 1), "db_mib": round(folder_mib(root), 1),
                   "add_urls": args.add, "add_s": round(seconds, 2), "add_rss_mib": rss}
        report(empty, full, summary)
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


COMMANDS = {"list --limit 50": ["list", "--limit", "50"], "list --limit 50 --json": ["list", "--limit", "50", "--json"],
            "status": ["status"], "search": ["search", "harbor lantern"]}
TARGETS = {"list --limit 50": 0.3, "status": 0.3, "web index": 0.2}
ADD_TARGET_S = 10.0


def measure_all(root: Path) -> dict:
    """Seconds (median) and peak RSS of each command, and seconds of each web page."""
    figures: dict = {}
    for name, argv in COMMANDS.items():
        seconds, rss, _ = timed_median(root, *argv)
        figures[name] = {"s": round(seconds, 3), "rss_mib": rss}
    for name, seconds in measure_web(root).items():
        figures[name] = {"s": round(seconds, 3)}
    return figures


def measure_add(root: Path, count: int) -> tuple[float, int]:
    urls = "\n".join(f"https://new-{i}.example/path/{i}" for i in range(count))
    seconds, rss, _ = run_measured(root, "add", "--bg", "-", stdin=urls)
    return seconds, rss


def report(empty: dict, full: dict, summary: dict) -> None:
    """Each figure on the full collection beside the same figure on the empty one (the same
    run's baseline: what is left once start-up costs are taken out is what size costs)."""
    print(f"\n{summary['snapshots']} Snapshots (filled in {summary['fill_s']} s), database {summary['db_mib']} MiB")
    print(f"{'figure':24} {'empty s':>8} {'full s':>8} {'ratio':>6} {'peak RSS':>9}  target")
    for name, row in full.items():
        target = TARGETS.get(name)
        verdict = "" if target is None else f"<= {target} s " + ("met" if row["s"] <= target else "MISSED")
        rss = f"{row['rss_mib']} MiB" if "rss_mib" in row else ""
        base = empty[name]["s"]
        print(f"{name:24} {base:>8.3f} {row['s']:>8.3f} {row['s'] / base:>6.2f} {rss:>9}  {verdict}")
    verdict = "met" if summary["add_s"] <= ADD_TARGET_S else "MISSED"
    print(f"add --bg {summary['add_urls']} URLs: {summary['add_s']} s, peak RSS {summary['add_rss_mib']} MiB"
          f"  (<= {ADD_TARGET_S} s {verdict})")
    print(json.dumps({"empty": empty, "full": full, **summary}))


if __name__ == "__main__":
    main()
