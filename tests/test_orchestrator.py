"""The orchestrator and its actors, through real `waybox` processes (issue 5)."""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.conftest import PY_PLUGINS, Waybox, kill_leftovers

LEDGER_HOOKS = {"on_Snapshot__00_first.sh", "on_Snapshot__20_second.sh", "on_Snapshot__50_fifth.sh",
                "on_Snapshot__90_last.sh"}


def start(wb: Waybox, *args: str, env: dict | None = None) -> subprocess.Popen:
    """A long-running waybox command in the background (its output kept in files)."""
    with open(wb.data_dir / f"bg-{time.monotonic_ns()}.log", "w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "waybox", *args],
            env={**os.environ, "WAYBOX_DATA_DIR": str(wb.data_dir), **(env or {})},
            stdout=log, stderr=subprocess.STDOUT, cwd=wb.data_dir,
        )


@contextlib.contextmanager
def running(wb: Waybox, *args: str, env: dict | None = None) -> Iterator[subprocess.Popen]:
    """`start`, and the process killed (if it still runs) and reaped however the test ends."""
    process = start(wb, *args, env=env)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def wait_for(predicate, timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def snapshots(wb: Waybox) -> list[dict]:
    return wb.json("list", "--json")


def ledger_lines(wb: Waybox) -> list[list[str]]:
    path = wb.data_dir / "ledger.txt"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def assert_consistent(wb: Waybox) -> None:
    """Every Snapshot sealed, no result left running, no hook attempt succeeded twice."""
    rows = snapshots(wb)
    assert rows and all(s["status"] == "sealed" for s in rows), [(s["url"], s["status"]) for s in rows]
    for s in rows:
        statuses = {r["hook_name"]: r["status"] for r in s["archiveresults"]}
        assert "started" not in statuses.values() and "queued" not in statuses.values(), statuses
    counts = collections.Counter((hook, snap) for hook, snap, *_ in ledger_lines(wb))
    assert counts and max(counts.values()) == 1, [k for k, v in counts.items() if v > 1]
    assert not kill_leftovers(wb.data_dir)


def test_run_archives_everything_and_exits(ledger: Waybox) -> None:
    ledger("add", "--bg", "http://127.0.0.1:9/a", "http://127.0.0.1:9/b")
    ledger("run", timeout=120)
    assert_consistent(ledger)
    for s in snapshots(ledger):
        statuses = {r["hook_name"]: r["status"] for r in s["archiveresults"]}
        assert statuses == {**dict.fromkeys(LEDGER_HOOKS, "succeeded"), "on_Snapshot__30_watch.bg.sh": "succeeded"}
    tree = ledger.json("process", "tree", "--json")
    types = set()

    def walk(node, parent_type=None):
        types.add((parent_type, node["type"]))
        for child in node["children"]:
            walk(child, node["type"])

    for root in tree:
        walk(root)
    assert {("cli", "orchestrator"), ("orchestrator", "worker"), ("worker", "hook")} <= types or \
        {("orchestrator", "worker"), ("worker", "hook")} <= types


def test_add_in_foreground_runs_every_step_and_seals(ledger: Waybox) -> None:
    result = ledger("add", "http://127.0.0.1:9/fg", timeout=120)
    assert "sealed" in result.stderr
    (row,) = snapshots(ledger)
    assert row["status"] == "sealed" and row["current_step"] == 9
    tree = ledger.json("process", "tree", "--json")
    add_row = next(r for r in tree if "add" in r["cmd"])
    assert [c["type"] for c in add_row["children"]] == ["orchestrator"]
    assert {c["type"] for c in add_row["children"][0]["children"]} == {"worker"}
    assert_consistent(ledger)


def test_only_one_orchestrator_and_stale_lock_is_taken_over(ledger: Waybox) -> None:
    first = start(ledger, "run", "--daemon")
    try:
        wait_for(lambda: any("orchestrator" in p["type"] for p in ledger.json("process", "list", "--json",
                                                                                "--running")), what="orchestrator")
        second = ledger("run", check=False, timeout=60)
        assert second.returncode == 3 and "already running" in second.stderr
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        ledger("add", "--bg", "http://127.0.0.1:9/after-kill")
        ledger("run", timeout=120)  # the dead orchestrator's lock does not block this one
    finally:
        if first.poll() is None:
            first.kill()
        first.wait()
    assert_consistent(ledger)


def test_second_add_queues_for_the_running_orchestrator(ledger: Waybox, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    ledger("config", "--set", f"LEDGER_GATE={gate}")
    first = start(ledger, "add", "http://127.0.0.1:9/one")
    second = None
    try:
        wait_for(lambda: any(p["type"] == "orchestrator" for p in ledger.json("process", "list", "--json",
                                                                               "--running")), what="orchestrator")
        second = start(ledger, "add", "http://127.0.0.1:9/two")
        wait_for(lambda: len(snapshots(ledger)) == 2, what="the second crawl")
        gate.touch()  # the first crawl's hooks were waiting for this
        assert second.wait(120) == 0
        assert first.wait(120) == 0
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
            if p is not None:
                p.wait()
    orchestrators = ledger.json("process", "list", "--json", "--type", "orchestrator")
    assert len(orchestrators) == 1, orchestrators
    assert_consistent(ledger)


def test_sigterm_stops_hooks_and_leaves_results_rerunnable(ledger: Waybox) -> None:
    ledger("config", "--set", "LEDGER_SLEEP=30")
    ledger("add", "--bg", "http://127.0.0.1:9/slow")
    with running(ledger, "run") as orchestrator:
        wait_for(lambda: any(r["status"] == "started" for s in snapshots(ledger) for r in s["archiveresults"]),
                 what="a running hook")
        orchestrator.send_signal(signal.SIGTERM)
        assert orchestrator.wait(60) == 130
    assert not kill_leftovers(ledger.data_dir)
    (row,) = snapshots(ledger)
    assert all(r["status"] in ("queued", "succeeded") for r in row["archiveresults"]), row["archiveresults"]
    assert all(r["attempts"] == 0 for r in row["archiveresults"] if r["status"] == "queued")
    ledger("config", "--set", "LEDGER_SLEEP=0")
    ledger("run", timeout=120)
    assert_consistent(ledger)


def kill_engine(orchestrator: subprocess.Popen) -> None:
    """kill -9 the orchestrator and every worker it started, as a power cut would."""
    for pid in [*worker_pids(orchestrator.pid), orchestrator.pid]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    orchestrator.wait(10)


def ledger_count(wb: Waybox, hook: str) -> int:
    return sum(1 for line in ledger_lines(wb) if line[0] == hook)


def test_hook_that_succeeds_while_its_worker_is_dead_is_not_run_again(ledger: Waybox, tmp_path: Path) -> None:
    """The orphaned hook finishes on its own; recovery must take its reported success, although
    its exit code is unknown (it was not the new worker's child)."""
    gate = tmp_path / "gate"
    ledger("config", "--set", f"LEDGER_GATE={gate}")
    ledger("add", "--bg", "http://127.0.0.1:9/orphan")
    with running(ledger, "run") as orchestrator:
        wait_for(lambda: any(r["status"] == "started" and r["hook_name"] == "on_Snapshot__00_first.sh"
                             for s in snapshots(ledger) for r in s["archiveresults"]), what="the first hook")
        kill_engine(orchestrator)
        gate.touch()
        wait_for(lambda: ledger_count(ledger, "on_Snapshot__00_first.sh") == 1, what="the orphan to finish")
    ledger("run", timeout=120)
    assert_consistent(ledger)
    (row,) = snapshots(ledger)
    first = next(r for r in row["archiveresults"] if r["hook_name"] == "on_Snapshot__00_first.sh")
    assert (first["status"], first["attempts"]) == ("succeeded", 1), first


def test_shutdown_keeps_a_success_reported_before_the_stop(ledger: Waybox) -> None:
    """A hook that reported success and is stopped by a shutdown before it exits is not re-run."""
    ledger("config", "--set", "LEDGER_LINGER=60")
    ledger("add", "--bg", "http://127.0.0.1:9/linger")
    with running(ledger, "run") as orchestrator:
        wait_for(lambda: ledger_count(ledger, "on_Snapshot__00_first.sh") == 1, what="a reported success")
        orchestrator.send_signal(signal.SIGTERM)
        assert orchestrator.wait(60) == 130
    (row,) = snapshots(ledger)
    first = next(r for r in row["archiveresults"] if r["hook_name"] == "on_Snapshot__00_first.sh")
    assert first["status"] == "succeeded", first
    ledger("config", "--set", "LEDGER_LINGER=0")
    ledger("run", timeout=120)
    assert_consistent(ledger)


def test_python_plugin_hookspecs_fire(ledger: Waybox, tmp_path: Path) -> None:
    record = tmp_path / "events.txt"
    env = {"PYTHONPATH": str(PY_PLUGINS), "RECORDER_FILE": str(record)}
    ledger("config", "--set", "PYTHON_PLUGINS=waybox_test_recorder", "--set", "MAX_TICK_TIME=1")
    ledger("add", "--bg", "http://127.0.0.1:9/hooks")
    (row,) = snapshots(ledger)
    folder = ledger.data_dir / "crawls" / row["crawl_id"]
    folder.write_text("a file where the Crawl folder should be: the tick must fail\n")
    with running(ledger, "run", env=env) as orchestrator:
        wait_for(lambda: record.exists() and "on_actor_tick_exception" in record.read_text(), what="tick exception")
        folder.unlink()
        assert orchestrator.wait(120) == 0
    fired = {line.split()[0] for line in record.read_text().splitlines()}
    expected = {
        "on_orchestrator_startup", "on_orchestrator_tick_started", "on_orchestrator_idle",
        "on_orchestrator_shutdown", "on_actor_startup", "on_actor_tick_start", "on_actor_tick_end",
        "on_actor_tick_exception", "on_actor_shutdown", "on_object_created", "on_object_updated",
        "on_transition_start", "on_transition_end",
    }
    assert expected <= fired, expected - fired
    assert_consistent(ledger)


def test_eight_concurrent_adds_on_sqlite(ledger: Waybox) -> None:
    orchestrator = start(ledger, "run", "--daemon")
    adds = []
    try:
        for i in range(8):
            urls = [f"http://127.0.0.1:9/p{i}-{j}" for j in range(5)]
            adds.append(start(ledger, "add", "--bg", *urls))
        codes = [p.wait(120) for p in adds]
        logs = [p.args for p in adds]
        assert codes == [0] * 8, logs
        wait_for(lambda: all(s["status"] == "sealed" for s in snapshots(ledger)), timeout=300, what="all sealed")
        orchestrator.send_signal(signal.SIGTERM)
        orchestrator.wait(60)
    finally:
        for p in [orchestrator, *adds]:
            if p.poll() is None:
                p.kill()
            p.wait()
    rows = snapshots(ledger)
    assert len(rows) == 40
    for log in ledger.data_dir.glob("bg-*.log"):
        assert "database is locked" not in log.read_text()
    assert_consistent(ledger)


def worker_pids(parent: int) -> list[int]:
    """Live actor processes of an orchestrator (children that already exited are skipped)."""
    pids = []
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(parent).children():
            with contextlib.suppress(psutil.Error):
                if "worker" in " ".join(child.cmdline()):
                    pids.append(child.pid)
    return pids


@pytest.mark.parametrize("trial", range(int(os.environ.get("WAYBOX_KILL_TRIALS", "20"))))
def test_kill_minus_nine_at_random_moments(ledger: Waybox, trial: int) -> None:
    """kill -9 of the orchestrator or an actor at a seeded random moment, then `waybox run`."""
    import random

    rng = random.Random(1000 + trial)
    ledger("config", "--set", f"LEDGER_SLEEP={rng.choice(['0.05', '0.2', '0.5'])}")
    ledger("add", "--bg", *[f"http://127.0.0.1:9/k{trial}-{i}" for i in range(3)])
    victim = None
    with running(ledger, "run") as orchestrator:
        time.sleep(rng.uniform(0.5, 4.0))
        candidates = [orchestrator.pid, *worker_pids(orchestrator.pid)] if orchestrator.poll() is None else []
        if candidates:
            victim = rng.choice(candidates)
            os.kill(victim, signal.SIGKILL)
        if orchestrator.poll() is None and victim != orchestrator.pid:
            orchestrator.wait(120)
    ledger("run", timeout=180)
    assert_consistent(ledger)
