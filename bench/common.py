"""Shared pieces of the benchmarks: a throwaway collection with the no-op plugin, and timing."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOOP_PLUGINS = Path(__file__).resolve().parent / "plugins"
sys.path.insert(0, str(REPO))


def waybox(data_dir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "waybox", *args], check=True, capture_output=True, text=True,
        env={**os.environ, "WAYBOX_DATA_DIR": str(data_dir), **(env or {})},
    )


def noop_collection(parallel: int, database_url: str = "") -> Path:
    root = Path(tempfile.mkdtemp(prefix="waybox-bench-")) / "collection"
    root.mkdir()
    if database_url:
        (root / "waybox.toml").write_text(f'DATABASE_URL = "{database_url}"\n')
    waybox(root, "init")
    # one hook per Snapshot and step: `parallel` Snapshots in flight keep `parallel` hooks busy
    waybox(root, "config", "--set", f"PLUGIN_DIRS={NOOP_PLUGINS}", "--set", "PLUGINS=noop",
           "--set", f"MAX_CONCURRENT_HOOKS={parallel}", "--set", f"MAX_CONCURRENT_SNAPSHOTS={parallel}")
    return root


def queue_snapshots(root: Path, count: int) -> None:
    urls = "\n".join(f"http://127.0.0.1:9/bench/{i}" for i in range(count))
    subprocess.run([sys.executable, "-m", "waybox", "add", "--bg", "-"], input=urls, check=True, text=True,
                   capture_output=True, env={**os.environ, "WAYBOX_DATA_DIR": str(root)})


def timed(func) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def hook_times(root: Path) -> dict[str, list[tuple[int, float, float]]]:
    """snapshot id -> [(step, start, end)] from the no-op hooks' own nanosecond stamps."""
    runs: dict[str, list[tuple[int, float, float]]] = {}
    for line in (root / "bench-times.txt").read_text().splitlines():
        hook, snapshot, start, end = line.split()
        runs.setdefault(snapshot, []).append((int(hook.split("__")[1][0]), float(start), float(end)))
    return runs


def step_gaps(root: Path) -> list[float]:
    """Seconds from the end of each step's last hook to the start of the next step's first."""
    gaps = []
    for runs in hook_times(root).values():
        by_step: dict[int, list[tuple[float, float]]] = {}
        for step, start, end in runs:
            by_step.setdefault(step, []).append((start, end))
        steps = sorted(by_step)
        for a, b in zip(steps, steps[1:], strict=False):
            gaps.append(min(s for s, _ in by_step[b]) - max(e for _, e in by_step[a]))
    return gaps


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def summary(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (f"n={len(ms)} p50={percentile(ms, 50):.1f} ms p99={percentile(ms, 99):.1f} ms "
            f"mean={statistics.mean(ms):.1f} ms")


def cleanup(root: Path) -> None:
    shutil.rmtree(root.parent, ignore_errors=True)


def machine() -> str:
    return f"{os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"
