"""A throwaway PostgreSQL server from Debian's `postgresql` package, for tests and benchmarks."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


class PostgresUnavailable(RuntimeError):
    pass


def postgres_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def postgres_server() -> Iterator[int]:
    """Yield the port of a new cluster on 127.0.0.1 (trust auth); stop and delete it after."""
    initdb, server = postgres_bin("initdb"), postgres_bin("postgres")
    if not initdb or not server:
        raise PostgresUnavailable("PostgreSQL is not installed (scripts/install.sh --dev installs it)")
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        raise PostgresUnavailable("starting PostgreSQL as its own user needs root")
    root = Path(tempfile.mkdtemp(prefix="waybox-pg-", dir="/tmp"))
    root.chmod(0o755)
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    shutil.chown(root, "postgres")
    shutil.chown(sockets, "postgres")
    proc = None
    try:
        subprocess.run(["runuser", "-u", "postgres", "--", initdb, "-D", str(data), "--auth=trust", "-U",
                        "postgres", "--no-sync"], check=True, capture_output=True)
        port = free_port()
        proc = subprocess.Popen(
            ["runuser", "-u", "postgres", "--", server, "-D", str(data), "-k", str(sockets), "-p", str(port),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_ready(port, proc)
        yield port
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(root, ignore_errors=True)


def wait_ready(port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise
            time.sleep(0.2)


def create_database(port: int, name: str) -> str:
    """A new database; returns its DATABASE_URL."""
    import psycopg

    with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"postgres://postgres@127.0.0.1:{port}/{name}"
