"""Shared fixtures: real `waybox` subprocesses on temporary collections, a real local HTTP
server, and (for tests that call waybox's Python API) one Django setup per test session.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


class Waybox:
    """Runs the real `waybox` command against one data directory."""

    def __init__(self, data_dir: Path):
        self.data_dir = data_dir

    def __call__(self, *args: str, input: str | None = None, env: dict | None = None, check: bool = True,
                 timeout: float = 120) -> subprocess.CompletedProcess:
        full_env = {**os.environ, "WAYBOX_DATA_DIR": str(self.data_dir), **(env or {})}
        result = subprocess.run(
            [sys.executable, "-m", "waybox", *args], input=input, env=full_env, capture_output=True,
            text=True, timeout=timeout, cwd=self.data_dir if self.data_dir.exists() else None,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"waybox {' '.join(args)} exited {result.returncode}\n"
                f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
            )
        return result

    def json(self, *args: str, **kw) -> object:
        return json.loads(self(*args, **kw).stdout)


@pytest.fixture
def waybox(tmp_path: Path) -> Waybox:
    """A freshly initialised collection in a temporary folder."""
    wb = Waybox(tmp_path / "collection")
    wb.data_dir.mkdir()
    wb("init")
    return wb


@pytest.fixture
def fresh_waybox(tmp_path: Path) -> Waybox:
    """A Waybox runner on a folder that does not exist yet."""
    return Waybox(tmp_path / "collection")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="session")
def http_server():
    """Serves tests/fixtures/site on 127.0.0.1 (random port); yields the base URL."""
    root = FIXTURES / "site"
    handler = functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def django_collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One initialised collection with Django set up in this test process (for API-level tests)."""
    root = tmp_path_factory.mktemp("inproc") / "collection"
    root.mkdir()
    Waybox(root)("init")
    from waybox.datadir import DataDir
    from waybox.settings import setup_django

    setup_django(DataDir(root))
    return root


ENGINE_PLUGINS = FIXTURES / "engine_plugins"
PY_PLUGINS = FIXTURES / "pyplugins"


def leftover_processes(path: Path) -> list:
    """Live processes that belong to a test collection: their command line, working folder or
    environment names it (hooks and their daemons inherit WAYBOX_DATA_DIR / DATA_DIR)."""
    import psutil

    needle = str(path)
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "cwd", "environ", "status"]):
        if proc.pid == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        info = proc.info
        cmd = " ".join(info["cmdline"] or [])
        env = info["environ"] or {}
        if needle in cmd or needle in (info["cwd"] or "") or any(needle in v for v in env.values()):
            found.append(proc)
    return found


def kill_leftovers(path: Path) -> list[str]:
    """Kill (and describe) whatever a test left running under `path`."""
    import psutil

    procs = leftover_processes(path)
    described = [f"pid {p.pid}: {' '.join(p.info['cmdline'] or [])[:200]}" for p in procs]
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(procs, timeout=5)
    return described


@pytest.fixture
def ledger(tmp_path: Path) -> Waybox:
    """A collection whose only plugin is the `ledger` fixture plugin (fast bash hooks)."""
    wb = Waybox(tmp_path / "collection")
    wb.data_dir.mkdir()
    wb("init")
    wb("config", "--set", f"PLUGIN_DIRS={ENGINE_PLUGINS}", "--set", "PLUGINS=ledger",
       "--set", "RETRY_BACKOFF=0", "--set", "BG_HOOK_GRACE=1", "--set", "TIMEOUT=30")
    yield wb
    left = kill_leftovers(wb.data_dir)
    assert not left, f"processes left running: {left}"
