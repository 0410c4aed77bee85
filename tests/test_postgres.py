"""waybox on a real PostgreSQL server (Debian's `postgresql` package), started by the tests.

Two orchestrators with different machine identities (the second runs in its own PID
namespace, as a container would) share one queue: every hook attempt runs exactly once.
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import pgserver
from tests.conftest import ENGINE_PLUGINS, Waybox, kill_leftovers
from tests.test_orchestrator import ledger_lines, snapshots, wait_for


@pytest.fixture(scope="module")
def postgres_server():
    """A throwaway PostgreSQL cluster on 127.0.0.1 (trust auth), stopped after the module."""
    try:
        with pgserver.postgres_server() as port:
            yield port
    except pgserver.PostgresUnavailable as err:
        if os.environ.get("CI"):
            pytest.fail(str(err))
        pytest.skip(str(err))


@pytest.fixture
def pg_ledger(postgres_server: int, tmp_path: Path):
    url = pgserver.create_database(postgres_server, f"waybox_{os.getpid()}_{time.monotonic_ns()}")
    wb = Waybox(tmp_path / "collection")
    wb.data_dir.mkdir()
    (wb.data_dir / "waybox.toml").write_text(f'DATABASE_URL = "{url}"\n')
    wb("init")
    wb("config", "--set", f"PLUGIN_DIRS={ENGINE_PLUGINS}", "--set", "PLUGINS=ledger", "--set", "RETRY_BACKOFF=0",
       "--set", "BG_HOOK_GRACE=1")
    wb("config", "--set", "LEDGER_SLEEP=0.3")
    yield wb
    left = kill_leftovers(wb.data_dir)
    assert not left, f"processes left running: {left}"


def start_orchestrator(wb: Waybox, *, own_pid_namespace: bool) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "waybox", "run", "--daemon"]
    if own_pid_namespace:
        cmd = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGTERM", *cmd]
    with open(wb.data_dir / f"orchestrator-{len(cmd)}.log", "w") as log:
        return subprocess.Popen(cmd, env={**os.environ, "WAYBOX_DATA_DIR": str(wb.data_dir)}, stdout=log,
                                stderr=subprocess.STDOUT, cwd=wb.data_dir)


def test_add_run_and_search_on_postgres(pg_ledger: Waybox) -> None:
    pg_ledger("add", "--bg", "http://127.0.0.1:9/pg-one", "--tag", "pgtag")
    pg_ledger("run", timeout=180)
    (row,) = snapshots(pg_ledger)
    assert row["status"] == "sealed" and row["tags"] == ["pgtag"]
    assert all(r["status"] == "succeeded" for r in row["archiveresults"])


def test_two_orchestrators_share_one_queue_exactly_once(pg_ledger: Waybox) -> None:
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed to give the second orchestrator its own PID namespace")
    first = start_orchestrator(pg_ledger, own_pid_namespace=False)
    second = start_orchestrator(pg_ledger, own_pid_namespace=True)
    try:
        wait_for(lambda: len(pg_ledger.json("process", "list", "--json", "--type", "orchestrator",
                                            "--status", "running")) == 2, what="two orchestrators")
        pg_ledger("add", "--bg", *[f"http://127.0.0.1:9/shared-{i}" for i in range(12)])
        wait_for(lambda: all(s["status"] == "sealed" for s in snapshots(pg_ledger)), timeout=300, what="all sealed")
    finally:
        for proc in (first, second):
            proc.send_signal(signal.SIGTERM)
        for proc in (first, second):
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    rows = snapshots(pg_ledger)
    assert len(rows) == 12
    runs = collections.Counter((hook, snap) for hook, snap, *_ in ledger_lines(pg_ledger))
    assert len(runs) == 12 * 4 and set(runs.values()) == {1}, [k for k, v in runs.items() if v != 1]
    hooks = pg_ledger.json("process", "list", "--json", "--type", "hook", "--limit", "1000")
    per_machine = collections.Counter(h["machine_id"] for h in hooks)
    assert len(per_machine) == 2, f"both machines should have run hooks: {per_machine}"
