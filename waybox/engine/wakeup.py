"""Waking waiting workers the moment their queue changes, instead of polling.

On one machine every waiting process binds an abstract Unix datagram socket named
`waybox:<collection>:<channel>:<pid>`; `notify()` finds the listeners of a channel in
/proc/net/unix (the kernel is the registry, so no stale files exist) and sends each one byte.
With PostgreSQL, `notify()` also issues `NOTIFY`, and waiters `LISTEN`, so orchestrators
on other machines wake too. `retry_at` polling stays as the recovery path: a waiter's
timeout is its recovery timer.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import select
import socket
from functools import lru_cache

CHANNELS = ("crawl", "snapshot", "archiveresult", "orchestrator")
PG_CHANNEL_PREFIX = "waybox_"


@lru_cache(maxsize=1)
def collection_key() -> str:
    """Names a collection by its database, so two collections on one host never cross-talk."""
    from django.db import connection

    s = connection.settings_dict
    ident = f"{s['ENGINE']}|{s.get('HOST', '')}|{s.get('PORT', '')}|{s['NAME']}"
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def _prefix(channel: str) -> str:
    return f"waybox:{collection_key()}:{channel}:"


def _is_postgres() -> bool:
    from django.db import connection

    return connection.vendor == "postgresql"


def listeners(channel: str) -> list[str]:
    """Abstract socket names currently bound for this channel."""
    prefix = "@" + _prefix(channel)
    found = []
    try:
        with open("/proc/net/unix") as f:
            for line in f:
                name = line.rstrip("\n").rsplit(" ", 1)[-1]
                if name.startswith(prefix):
                    found.append(name[1:])
    except OSError:
        return []
    return found


def notify(*channels: str) -> None:
    """Wake every process waiting on these channels (and the orchestrator)."""
    wanted = set(channels) | {"orchestrator"}
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        for channel in wanted:
            for name in listeners(channel):
                with contextlib.suppress(OSError):  # full buffer = already awake; gone = fine
                    sock.sendto(b"!", "\0" + name)
    if _is_postgres():
        from django.db import connection

        with connection.cursor() as cursor:
            for channel in wanted:
                cursor.execute("SELECT pg_notify(%s, '')", [PG_CHANNEL_PREFIX + channel])


class Waiter:
    """Blocks until notified on one of its channels, or until a timeout (the recovery timer)."""

    def __init__(self, *channels: str):
        self.socks = []
        for channel in channels:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.bind("\0" + _prefix(channel) + str(os.getpid()))
            sock.setblocking(False)
            self.socks.append(sock)
        self.pg = self._listen_pg(channels) if _is_postgres() else None

    @staticmethod
    def _listen_pg(channels: tuple[str, ...]):
        import psycopg
        from django.db import connection

        s = connection.settings_dict
        conn = psycopg.connect(
            dbname=s["NAME"], user=s["USER"] or None, password=s["PASSWORD"] or None,
            host=s["HOST"] or None, port=s["PORT"] or None, autocommit=True,
        )
        for channel in channels:
            conn.execute(f'LISTEN "{PG_CHANNEL_PREFIX}{channel}"')
        return conn

    def fileno_list(self) -> list:
        fds: list = list(self.socks)
        if self.pg is not None:
            fds.append(self.pg.fileno())
        return fds

    def wait(self, timeout: float | None, extra: list | tuple = ()) -> bool:
        """True if woken by a notification (or one of `extra` fds), False on timeout."""
        ready, _, _ = select.select([*self.fileno_list(), *extra], [], [], timeout)
        self.drain()
        return bool(ready)

    def drain(self) -> None:
        for sock in self.socks:
            with contextlib.suppress(BlockingIOError, OSError):
                while sock.recv(64):
                    pass
        if self.pg is not None:
            for _ in self.pg.notifies(timeout=0, stop_after=1000):
                pass

    def close(self) -> None:
        for sock in self.socks:
            sock.close()
        if self.pg is not None:
            self.pg.close()
