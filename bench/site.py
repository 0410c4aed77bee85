#!/usr/bin/env python3
"""A depth-1 crawl of a local multi-page site with every built-in plugin, at 1 and at 4 concurrent
Snapshots: pages per minute, CPU seconds per page and peak memory of waybox's own processes.

    .venv/bin/python bench/site.py [--concurrency 1,4] [--repeat 1] [--pages 8] [--actors N] [--keep]

The site is a copy of tests/fixtures/site in a temp dir whose index.html links to the fixture's
HTML pages and to --pages generated articles; the script serves it itself (threaded HTTP server
on 127.0.0.1, free port), so nothing but 127.0.0.1 is needed. Each run gets a fresh collection
(`waybox init`, the default plugins, every one enabled) with MAX_CONCURRENT_SNAPSHOTS = the level
and MAX_CONCURRENT_ACTORS = the level too (the engine sized for that many Snapshots; --actors
pins it, e.g. to the default 1), MAX_CONCURRENT_HOOKS at its default 8 (two per Snapshot above
4), and runs `waybox add --depth 1 <site>/index.html` in the foreground until it exits. Levels
alternate when --repeat > 1, so drifting load on the machine hits them alike; figures are medians.

How it measures, and what it may miss:
- CPU, everything: this script makes itself a child subreaper (prctl), so every process under
  `waybox add` (orchestrator, workers, hooks, chromium, wget, node, including double-forked
  daemons) ends up reaped by a wait in its own parent or in this script, and the growth of
  getrusage(RUSAGE_CHILDREN) across the run is their exact total. The HTTP server is a thread
  of this script: its CPU is not counted, but this script's own CPU (sampler and server) is
  reported apart, since on a small machine it competes with the crawl.
- CPU by kind: every ~0.15 s the script walks its descendants with psutil and keeps each
  process's last-seen user+system time (pid and start time as the key; cmdline re-read every
  time, so a fork that execs into a hook is re-classified). Kinds, by cmdline: "engine" is
  waybox's own Python (`-m waybox` / bin/waybox: the `add` CLI, the orchestrator, workers);
  "hooks" the plugin hook scripts; "driver" the Playwright driver (a node process) that every
  browser-using hook starts; "browser" chromium and everything below it; "tools" the rest
  (wget, node/single-file, yt-dlp, git). Sampling misses processes that live less than one
  interval and the CPU a process spends after its last sample: the "sampled" column says how
  much of the rusage total the samples account for. The engine's CPU is also split by role
  (add, run, worker --type=...), and the JSON has the Process rows by type
  (`waybox process list --json`) next to the pids the samples saw, as a cross-check.
- Memory: the RSS of each kind summed at each sample (peak over the run; a peak between two
  samples is missed, and a fork caught before its exec counts its parent's pages twice), and
  the largest single process from /proc/<pid>/status VmHWM (exact up to its last sample).
  The browser is left out of the table ("non-browser" = engine + hooks + driver + tools); the
  JSON has it too, but summed RSS overstates chromium, whose processes share much memory.
- Pages: Snapshots sealed (`waybox list --json`), also per plugin: succeeded / failed /
  skipped / other (backoff means a hard failure left for `waybox update`), so a plugin that
  fails quietly shows. Wall time is from starting `waybox add` to its exit (which includes
  the orchestrator's idle exit).
At the end of each run anything still alive under the script, or naming the collection in its
cmdline, cwd or environment, is reported as a leftover and killed.

Prints a table, a ratio line (highest vs lowest level) and one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import http.server
import json
import os
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from common import REPO, machine, waybox

SITE = REPO / "tests" / "fixtures" / "site"
FIXTURE_PAGES = ["page2.html", "links.html", "media.html", "browser/article.html", "browser/tall.html",
                 "browser/meta-refresh.html"]
KINDS = ("engine", "hooks", "driver", "tools", "browser")
PR_SET_CHILD_SUBREAPER = 36
DRAIN_S = 15.0  # how long processes may outlive `waybox add` before they count as leftovers
MB = 2**20
WORDS = ["archive", "marmoset", "quokka", "lantern", "harbour", "meadow", "copper", "violet", "signal", "orchard",
         "beacon", "ember", "glacier", "tundra", "prism", "saffron", "walnut", "compass", "meridian", "atlas"]


# -- the site ------------------------------------------------------------------------------

def article(number: int, total: int) -> str:
    """A generated page with enough text for readability, a stylesheet, an image and links back."""
    paragraphs = []
    for p in range(6):
        words = random.Random(number * 100 + p).choices(WORDS, k=70)  # same text every run
        paragraphs.append(f"<p>{' '.join(words).capitalize()}.</p>")
    following = f"page{number % total + 1:02d}.html"
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>Generated page {number}</title>'
            f'<link rel="stylesheet" href="../style.css"></head>\n<body><article><h1>Generated page {number}</h1>'
            f'<img src="../browser/pixel.png" alt="a red square" width="40" height="30">\n'
            + "\n".join(paragraphs)
            + f'\n</article><nav><a href="../index.html">Home</a> <a href="{following}">Next</a></nav></body></html>\n')


def build_site(root: Path, generated: int) -> list[str]:
    """Copy the fixture site and write an index.html linking every page; return the pages (index first)."""
    shutil.copytree(SITE, root)
    (root / "generated").mkdir()
    pages = list(FIXTURE_PAGES)
    for number in range(1, generated + 1):
        name = f"generated/page{number:02d}.html"
        (root / name).write_text(article(number, generated))
        pages.append(name)
    links = "\n".join(f'<li><a href="{page}">{page}</a></li>' for page in pages)
    (root / "index.html").write_text(
        '<!doctype html>\n<html><head><title>Bench site</title><link rel="stylesheet" href="style.css"></head>\n'
        f"<body><h1>Bench site</h1><ul>\n{links}\n</ul></body></html>\n")
    return ["index.html", *pages]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextlib.contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve `root` on 127.0.0.1 (free port) from a thread of this process; yield the base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(root)))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# -- processes -----------------------------------------------------------------------------

def become_subreaper() -> None:
    """Orphans (double-forked daemons, hooks whose worker died) get reparented to this script, so
    they stay in the walked tree and their CPU reaches RUSAGE_CHILDREN when reaped here."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def reap(watch: int | None = None) -> int | None:
    """Reap every exited child (orphans included); return `watch`'s exit code if it was one of them."""
    code = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return code
        if pid == 0:
            return code
        if pid == watch:
            code = os.waitstatus_to_exitcode(status)


def is_engine(cmd: list[str]) -> bool:
    if len(cmd) > 2 and "-m" in cmd[1:3] and cmd[cmd.index("-m") + 1] == "waybox":
        return True
    return len(cmd) > 1 and Path(cmd[1]).name == "waybox"


def is_browser(cmd: list[str]) -> bool:
    """chromium itself, its helpers (chrome_crashpad_handler), or /bin/sh running the /usr/bin/chromium wrapper."""
    names = [Path(arg).name for arg in cmd[:2]]
    if names and "chrom" in names[0]:
        return True
    return len(names) > 1 and names[0] in ("sh", "bash", "dash") and names[1].startswith("chrom")


def kind_of(cmd: list[str], parent_kind: str | None) -> str:
    """Which kind a process is; hooks are tested before the browser (the chrome plugin's hooks
    have "chrome" in their file names), and a process with no cmdline (a zombie never seen
    alive) takes its parent's hint: a worker's children are hooks."""
    if parent_kind == "browser":
        return "browser"
    if not cmd:
        return "hooks" if parent_kind == "engine" else "tools"
    if is_engine(cmd):
        return "engine"
    if len(cmd) > 1 and cmd[1].endswith(".py") and "/plugins/" in cmd[1]:
        return "hooks"
    if any("/playwright/driver/" in arg for arg in cmd[:2]):
        return "driver"
    return "browser" if is_browser(cmd) else "tools"


def engine_role(cmd: list[str]) -> str:
    """'add', 'run', 'worker --type=snapshot': the waybox subcommand and its --type."""
    start = cmd.index("waybox", 1) + 1 if "waybox" in cmd[1:3] else 2
    args = [arg for arg in cmd[start:] if not arg.startswith("--data-dir")]
    return " ".join(args[:1] + [arg for arg in args if arg.startswith("--type=")])


def vm_hwm(pid: int) -> int:
    """Peak resident set of a live process (bytes), from the kernel's own high-water mark."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class Seen:
    """What the samples know of one process."""

    cmd: list[str]
    kind: str
    cpu: float = 0.0
    peak_rss: int = 0


@dataclass
class Sampler:
    """Walks this script's descendants: last-seen CPU per process, RSS per kind summed per sample."""

    seen: dict[tuple[int, float], Seen] = field(default_factory=dict)
    peak_sum: Counter = field(default_factory=Counter)
    samples: int = 0

    def sample(self) -> None:
        sums: Counter = Counter()
        kinds: dict[int, str] = {}
        for proc in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                seen = self.update(proc, kinds)
                kinds[proc.pid] = seen.kind
                rss = proc.memory_info().rss
                seen.peak_rss = max(seen.peak_rss, rss, vm_hwm(proc.pid))
                sums[seen.kind] += rss
        sums["non-browser"] = sum(sums[kind] for kind in KINDS if kind != "browser")
        for kind, total in sums.items():
            self.peak_sum[kind] = max(self.peak_sum[kind], total)
        self.samples += 1

    def update(self, proc: psutil.Process, kinds: dict[int, str]) -> Seen:
        """Record `proc`'s CPU; (re)classify it when its cmdline is new (an exec keeps the pid and
        start time, and a new program image starts a new peak)."""
        key = (proc.pid, proc.create_time())
        seen = self.seen.get(key)
        try:
            cmd = proc.cmdline()
        except psutil.ZombieProcess:  # exited, not reaped yet: its final CPU times are still readable
            cmd = []
        if seen is None or (cmd and cmd != seen.cmd):
            parent = kinds.get(proc.ppid()) or self.kind_by_pid(proc.ppid())
            seen = self.seen[key] = Seen(cmd, kind_of(cmd, parent))
        times = proc.cpu_times()
        seen.cpu = times.user + times.system
        return seen

    def kind_by_pid(self, pid: int) -> str | None:
        kinds = [seen.kind for (seen_pid, _), seen in self.seen.items() if seen_pid == pid]
        return kinds[-1] if kinds else None

    def cpu(self, kind: str) -> float:
        return sum(seen.cpu for seen in self.seen.values() if seen.kind == kind)

    def largest(self, kinds: tuple[str, ...]) -> tuple[int, str]:
        """Largest single peak RSS among `kinds`, with what the process was."""
        best = max((s for s in self.seen.values() if s.kind in kinds), key=lambda s: s.peak_rss, default=None)
        if best is None:
            return 0, ""
        label = engine_role(best.cmd) if best.kind == "engine" else Path(best.cmd[0]).name if best.cmd else "?"
        return best.peak_rss, f"{best.kind}: {label}"

    def pids(self) -> dict[str, int]:
        return dict(Counter(seen.kind for seen in self.seen.values()))

    def engine_roles(self) -> dict[str, list[float]]:
        """role -> [processes, CPU seconds]: which part of the engine the CPU goes to."""
        roles: dict[str, list[float]] = {}
        for seen in self.seen.values():
            if seen.kind == "engine":
                entry = roles.setdefault(engine_role(seen.cmd), [0, 0.0])
                entry[0] += 1
                entry[1] = round(entry[1] + seen.cpu, 2)
        return dict(sorted(roles.items()))


def names_path(proc: psutil.Process, needle: str) -> bool:
    with contextlib.suppress(psutil.Error):
        if needle in " ".join(proc.cmdline()) or needle in (proc.cwd() or ""):
            return True
        return any(needle in value for value in proc.environ().values())
    return False


def strays(root: Path) -> list[psutil.Process]:
    """Live processes under this script, or anywhere naming the collection (a process that left the tree)."""
    found = {proc.pid: proc for proc in psutil.Process().children(recursive=True)}
    for proc in psutil.process_iter():
        if proc.pid not in found and proc.pid != os.getpid() and names_path(proc, str(root)):
            found[proc.pid] = proc
    return [proc for proc in found.values() if alive(proc)]


def alive(proc: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return proc.status() != psutil.STATUS_ZOMBIE
    return False


def stop(procs: list[psutil.Process]) -> None:
    """SIGTERM, then SIGKILL after 5 s, each process by its own pid."""
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, remaining = psutil.wait_procs(procs, timeout=5)
    for proc in remaining:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(remaining, timeout=5)
    reap()


def describe(proc: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return f"pid {proc.pid}: {' '.join(proc.cmdline())[:160]}"
    return f"pid {proc.pid}"


def drain(sampler: Sampler, root: Path, interval: float) -> list[str]:
    """Give what outlives `waybox add` DRAIN_S to exit (still sampled), then kill and report it."""
    deadline = time.monotonic() + DRAIN_S
    while psutil.Process().children() and time.monotonic() < deadline:
        sampler.sample()
        reap()
        time.sleep(interval)
    left = strays(root)
    described = [describe(proc) for proc in left]
    if left:
        sampler.sample()
        stop(left)
    return described


# -- one run -------------------------------------------------------------------------------

def make_collection(root: Path, level: int, actors: int | None) -> dict:
    """A fresh collection with the default plugins and `level` Snapshots at a time (actors per type:
    `actors`, else `level`; hook slots: the default 8, or two per Snapshot); returns its config."""
    root.mkdir(parents=True)
    waybox(root, "init")
    settings = {"MAX_CONCURRENT_SNAPSHOTS": level, "MAX_CONCURRENT_ACTORS": actors or level,
                "MAX_CONCURRENT_HOOKS": max(8, 2 * level)}
    waybox(root, "config", *(arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")))
    disabled = [p["plugin"] for p in json.loads(waybox(root, "plugins", "--json").stdout) if not p["enabled"]]
    reap()
    return {**settings, "disabled_plugins": sorted(set(disabled))}


def follow(proc: subprocess.Popen, sampler: Sampler, interval: float, timeout: float) -> tuple[int | None, bool]:
    """Sample until `waybox add` exits (SIGINT, then a kill, after `timeout`); (exit code, timed out)."""
    deadline = time.monotonic() + timeout
    timed_out = False
    while True:
        sampler.sample()
        code = reap(proc.pid)
        if code is not None:
            proc.returncode = code
            return code, timed_out
        if time.monotonic() > deadline:
            if timed_out:
                stop([psutil.Process(proc.pid)])
                proc.returncode = -signal.SIGKILL
                return None, True
            timed_out = True
            proc.send_signal(signal.SIGINT)  # add stops the orchestrator; work stays queued
            deadline = time.monotonic() + 60
        time.sleep(interval)


def crawl(root: Path, url: str, sampler: Sampler, interval: float, timeout: float) -> dict:
    """Run `waybox add --depth 1 url` in the foreground; wall time, exit code and rusage CPU of the tree."""
    env = {**os.environ, "WAYBOX_DATA_DIR": str(root), "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1"}
    before, own_before = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    with open(root / "bench-add.stdout.log", "wb") as out, open(root / "bench-add.stderr.log", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "waybox", "add", "--depth", "1", url],
                                cwd=root, env=env, stdout=out, stderr=err)
        code, timed_out = follow(proc, sampler, interval, timeout)
    wall = time.perf_counter() - start
    leftovers = drain(sampler, root, interval)
    after, own_after = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    return {"wall_s": wall, "exit_code": code, "timed_out": timed_out, "cpu_all_s": cpu_between(before, after),
            "bench_own_cpu_s": cpu_between(own_before, own_after), "leftovers": leftovers}


def cpu_between(before: resource.struct_rusage, after: resource.struct_rusage) -> float:
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def outcomes(snapshots: list[dict]) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    """ArchiveResult statuses per plugin, and up to two distinct messages of its failures."""
    counts: dict[str, Counter] = {}
    reasons: dict[str, list[str]] = {}
    for snapshot in snapshots:
        for result in snapshot.get("archiveresults", []):
            counts.setdefault(result["plugin"], Counter())[result["status"]] += 1
            if result["status"] not in ("succeeded", "skipped"):
                seen = reasons.setdefault(result["plugin"], [])
                message = f"{result['status']}: {(result.get('output_str') or '')[:120]}"
                if message not in seen and len(seen) < 2:
                    seen.append(message)
    return {plugin: dict(counts[plugin]) for plugin in sorted(counts)}, reasons


def figures(level: int, repeat: int, timing: dict, sampler: Sampler, root: Path) -> dict:
    """Every figure of one run, from the timing, the samples and the collection's own listings."""
    snapshots = json.loads(waybox(root, "list", "--json").stdout)
    rows = json.loads(waybox(root, "process", "list", "--json", "--limit", "100000").stdout)
    sealed = sum(1 for s in snapshots if s["status"] == "sealed")
    per_page = max(sealed, 1)
    sampled = {kind: sampler.cpu(kind) for kind in KINDS}
    largest, largest_what = sampler.largest(("engine",))
    peak = {kind: round(sampler.peak_sum[kind] / MB, 1) for kind in (*KINDS, "non-browser")}
    errors = root / "logs" / "errors.log"
    plugin_counts, reasons = outcomes(snapshots)
    return {
        "concurrency": level, "run": repeat, "snapshots": len(snapshots), "sealed": sealed,
        "wall_s": round(timing["wall_s"], 2), "pages_per_min": round(sealed / timing["wall_s"] * 60, 2),
        "cpu_s_per_page": {"all": round(timing["cpu_all_s"] / per_page, 2),
                           **{kind: round(sampled[kind] / per_page, 2) for kind in KINDS}},
        "cpu_all_s": round(timing["cpu_all_s"], 2), "bench_own_cpu_s": round(timing["bench_own_cpu_s"], 2),
        "sampled_share": round(sum(sampled.values()) / timing["cpu_all_s"], 3) if timing["cpu_all_s"] else None,
        "engine_rss_peak_sum_mb": peak["engine"],
        "engine_rss_largest_mb": round(largest / MB, 1), "engine_rss_largest_is": largest_what,
        "non_browser_rss_peak_sum_mb": peak["non-browser"], "rss_peak_sum_mb": peak,
        "rss_largest_mb": {kind: round(sampler.largest((kind,))[0] / MB, 1) for kind in KINDS},
        "engine_cpu_s_by_role": sampler.engine_roles(), "samples": sampler.samples, "pids_seen": sampler.pids(),
        "process_rows": dict(Counter(row["type"] for row in rows)),
        "exit_code": timing["exit_code"], "timed_out": timing["timed_out"], "leftovers": timing["leftovers"],
        "errors_log_lines": len(errors.read_text().splitlines()) if errors.exists() else 0,
        "plugins": plugin_counts, "failure_messages": reasons,
    }


def one_run(level: int, repeat: int, url: str, work: Path, args: argparse.Namespace) -> dict:
    root = work / f"collection-c{level}-r{repeat}"
    config = make_collection(root, level, args.actors)
    load = os.getloadavg()[0]
    sampler = Sampler()
    timing = crawl(root, url, sampler, args.interval, args.timeout)
    result = figures(level, repeat, timing, sampler, root)
    result.update(config=config, load_1min_at_start=round(load, 2), collection=str(root))
    print(f"  c={level} run {repeat}: {result['sealed']} sealed in {result['wall_s']:.1f} s"
          f" (exit {result['exit_code']}, load {load:.1f})", file=sys.stderr, flush=True)
    return result


# -- report --------------------------------------------------------------------------------

NUMERIC = ("sealed", "wall_s", "pages_per_min", "cpu_all_s", "sampled_share", "engine_rss_peak_sum_mb",
           "engine_rss_largest_mb", "non_browser_rss_peak_sum_mb")


def median_of(runs: list[dict]) -> dict:
    """Median of each figure over a level's repeats."""
    med = {key: round(statistics.median(r[key] for r in runs), 3) for key in NUMERIC if runs[0][key] is not None}
    for key in ("cpu_s_per_page", "rss_peak_sum_mb", "rss_largest_mb"):
        med[key] = {kind: round(statistics.median(r[key][kind] for r in runs), 3) for kind in runs[0][key]}
    return med


HEADER = (f"{'':>14} {'':>7} {'':>9} | {'CPU seconds per page':^48} | {'peak RSS MB, browser excluded':^42}\n"
          f"{'conc run pages':>14} {'wall s':>7} {'pages/min':>9} | {'all':>6} {'engine':>6} {'hooks':>6} "
          f"{'driver':>6} {'tools':>6} {'browser':>7} {'sampled':>7} | {'engine':>7} {'largest':>7} {'hooks':>6} "
          f"{'driver':>6} {'all':>7}")


def table_row(level: int, label: str, f: dict) -> str:
    cpu, rss = f["cpu_s_per_page"], f["rss_peak_sum_mb"]
    share = f"{f['sampled_share'] * 100:.0f}%" if f.get("sampled_share") is not None else "-"
    return (f"{level:>4} {label:>4} {f['sealed']:>5.0f} {f['wall_s']:>7.1f} {f['pages_per_min']:>9.2f} | "
            f"{cpu['all']:>6.2f} {cpu['engine']:>6.2f} {cpu['hooks']:>6.2f} {cpu['driver']:>6.2f} {cpu['tools']:>6.2f} "
            f"{cpu['browser']:>7.2f} {share:>7} | {rss['engine']:>7.1f} {f['engine_rss_largest_mb']:>7.1f} "
            f"{rss['hooks']:>6.1f} {rss['driver']:>6.1f} {rss['non-browser']:>7.1f}")


LEGEND = ("engine = waybox's own Python (add CLI, orchestrator, workers); hooks = plugin hook scripts; driver = the\n"
          "Playwright node driver each browser hook starts; tools = wget, single-file, yt-dlp, git...; 'all' CPU is\n"
          "rusage of the whole tree, the kinds are sampled ('sampled' = their share of it); RSS columns are the peak\n"
          "of the kind's RSS summed at one moment, 'largest' the largest single engine process (VmHWM).")


def print_table(runs: list[dict], medians: dict[int, dict], repeat: int) -> None:
    print(HEADER)
    print("-" * len(HEADER.splitlines()[-1]))
    for run in runs:
        print(table_row(run["concurrency"], str(run["run"]), run))
    if repeat > 1:
        for level, med in medians.items():
            print(table_row(level, "med", med))
    largest = {(r["concurrency"], r["engine_rss_largest_is"]) for r in runs}
    print("largest engine process: " + "; ".join(f"c={level}: {what}" for level, what in sorted(largest)))
    for run in runs:
        roles = ", ".join(f"{role.replace('--type=', '')} {cpu:.1f} ({count:.0f})"
                          for role, (count, cpu) in run["engine_cpu_s_by_role"].items())
        print(f"engine CPU s (processes) c={run['concurrency']} r{run['run']}: {roles}; "
              f"this script (sampler, HTTP server) {run['bench_own_cpu_s']:.1f}")
    print(LEGEND)


def ratios(medians: dict[int, dict]) -> dict:
    """Highest level over lowest level, figure by figure."""
    low, high = medians[min(medians)], medians[max(medians)]

    def ratio(a: float, b: float) -> float | None:
        return round(b / a, 2) if a else None

    return {
        "pages_per_min": ratio(low["pages_per_min"], high["pages_per_min"]),
        "wall_s": ratio(low["wall_s"], high["wall_s"]),
        "cpu_s_per_page_all": ratio(low["cpu_s_per_page"]["all"], high["cpu_s_per_page"]["all"]),
        "cpu_s_per_page_engine": ratio(low["cpu_s_per_page"]["engine"], high["cpu_s_per_page"]["engine"]),
        "engine_rss_peak_sum_mb": ratio(low["engine_rss_peak_sum_mb"], high["engine_rss_peak_sum_mb"]),
        "engine_rss_largest_mb": ratio(low["engine_rss_largest_mb"], high["engine_rss_largest_mb"]),
        "driver_rss_peak_sum_mb": ratio(low["rss_peak_sum_mb"]["driver"], high["rss_peak_sum_mb"]["driver"]),
        "non_browser_rss_peak_sum_mb": ratio(low["non_browser_rss_peak_sum_mb"], high["non_browser_rss_peak_sum_mb"]),
    }


def print_ratio(medians: dict[int, dict], ratio: dict) -> None:
    if len(medians) < 2:
        return
    parts = ", ".join(f"{key} x{value}" for key, value in ratio.items() if value is not None)
    print(f"ratio {max(medians)} vs {min(medians)} concurrent Snapshots: {parts}")


def print_plugins(runs: list[dict]) -> None:
    """succeeded/failed/skipped/other per plugin and run; then why things failed."""
    plugins = sorted({plugin for run in runs for plugin in run["plugins"]})
    heads = [f"c={r['concurrency']} r{r['run']}" for r in runs]
    print(f"\nArchiveResults per plugin (succeeded/failed/skipped/other):\n{'plugin':<20}"
          + "".join(f"{h:>16}" for h in heads))
    for plugin in plugins:
        cells = []
        for run in runs:
            c = run["plugins"].get(plugin, {})
            other = sum(v for k, v in c.items() if k not in ("succeeded", "failed", "skipped"))
            cells.append(f"{c.get('succeeded', 0)}/{c.get('failed', 0)}/{c.get('skipped', 0)}/{other}")
        print(f"{plugin:<20}" + "".join(f"{cell:>16}" for cell in cells))
    for run in runs:
        for plugin, messages in run["failure_messages"].items():
            print(f"  c={run['concurrency']} r{run['run']} {plugin}: " + " | ".join(messages))


def print_problems(runs: list[dict], expected: int) -> None:
    """Anything that makes a run's figures suspect: missing pages, a bad exit, leftovers, errors."""
    print("\nproblems:")
    lines = []
    for run in runs:
        tag = f"c={run['concurrency']} r{run['run']}"
        if run["sealed"] != expected or run["snapshots"] != expected:
            lines.append(f"{tag}: {run['sealed']} sealed of {run['snapshots']} Snapshots, site has {expected} pages")
        if run["exit_code"] != 0 or run["timed_out"]:
            lines.append(f"{tag}: waybox add exit code {run['exit_code']}, timed out: {run['timed_out']}")
        lines += [f"{tag}: left running (killed): {line}" for line in run["leftovers"]]
        if run["errors_log_lines"]:
            lines.append(f"{tag}: {run['errors_log_lines']} line(s) in logs/errors.log")
        if run["config"]["disabled_plugins"]:
            lines.append(f"{tag}: disabled plugins: {', '.join(run['config']['disabled_plugins'])}")
    print("\n".join(f"  {line}" for line in lines) or "  none")


def report(runs: list[dict], pages: list[str], args: argparse.Namespace, elapsed: float) -> None:
    levels = sorted({r["concurrency"] for r in runs})
    medians = {level: median_of([r for r in runs if r["concurrency"] == level]) for level in levels}
    ratio = ratios(medians) if len(levels) > 1 else {}
    actors = "= level" if args.actors is None else str(args.actors)
    loads = ", ".join(f"{r['load_1min_at_start']:.1f}" for r in runs)
    print(f"\nbench/site: depth-1 crawl of {len(pages)} local pages, every built-in plugin, {machine()}; "
          f"MAX_CONCURRENT_SNAPSHOTS = level, MAX_CONCURRENT_ACTORS {actors}; load at start of runs: {loads}")
    print_table(runs, medians, args.repeat)
    print_ratio(medians, ratio)
    print_plugins(runs)
    print_problems(runs, len(pages))
    print(f"\ntotal time {elapsed:.0f} s")
    print(json.dumps({"bench": "site", "machine": machine(), "pages": len(pages), "levels": levels,
                      "repeat": args.repeat, "medians": {str(k): v for k, v in medians.items()}, "ratio": ratio,
                      "runs": runs, "total_s": round(elapsed, 1)}, separators=(",", ":")))


# -- main ----------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--concurrency", default="1,4", help="comma-separated MAX_CONCURRENT_SNAPSHOTS levels")
    parser.add_argument("--repeat", type=int, default=1, help="runs per level (levels alternate)")
    parser.add_argument("--actors", type=int, default=None,
                        help="MAX_CONCURRENT_ACTORS (per actor type) for every run; default: the level")
    parser.add_argument("--pages", type=int, default=8, help="generated pages added to the fixture's own")
    parser.add_argument("--interval", type=float, default=0.15, help="seconds between process samples")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds one crawl may take")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (site and collections)")
    args = parser.parse_args()
    args.levels = [int(level) for level in args.concurrency.split(",") if level.strip()]
    return args


def main() -> None:
    args = parse_args()
    become_subreaper()
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="waybox-bench-site-"))
    runs: list[dict] = []
    try:
        pages = build_site(work / "site", args.pages)
        with serve(work / "site") as base:
            for repeat in range(1, args.repeat + 1):
                for level in args.levels:
                    runs.append(one_run(level, repeat, f"{base}/index.html", work, args))
        report(runs, pages, args, time.perf_counter() - started)
    finally:
        left = strays(work)
        if left:
            print(f"killing {len(left)} leftover process(es): {[describe(p) for p in left]}", file=sys.stderr)
            stop(left)
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
