"""The orchestrator: one per collection per machine; it spawns actors for due work.

It holds an exclusive `flock` on `logs/run/orchestrator.lock`, which the kernel releases if it
dies, so a stale lock never blocks the next one. Each loop it counts each actor type's queue,
spawns actors up to the limit, releases the leases of workers that died, and waits on its
wake-up socket (the timeout is the recovery timer). Signals only set a flag; shutdown then
stops the actors, which stop their hooks and leave their results re-runnable.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from collections.abc import Callable
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from waybox.datadir import DataDir
from waybox.engine import wakeup
from waybox.engine.actors import ACTOR_TYPES, ArchiveResultActor
from waybox.engine.context import Engine
from waybox.engine.errors import ERRORS_LOG, ErrorFeed
from waybox.hookspecs import fire
from waybox.models import ArchiveResult, Binary, Crawl, Process, Snapshot

LOOP_TIMEOUT_S = 1.0
MIN_LOOP_S = 0.02
STALE_CHECK_EVERY_S = 10.0
SHUTDOWN_WAIT_S = 30.0
LOCK_PREFIX = "orchestrator"
ALREADY_RUNNING = 3


class OrchestratorLock:
    """flock-based: held while the process lives, released by the kernel when it dies.

    One lock file per machine identity, so each machine sharing a collection (PostgreSQL)
    runs its own orchestrator, and never two on one machine.
    """

    def __init__(self, datadir: DataDir):
        from waybox.proc import machine_identity

        datadir.run.mkdir(parents=True, exist_ok=True)
        self.path = datadir.run / f"{LOCK_PREFIX}-{machine_identity().guid[:16]}.lock"
        self.fd: int | None = None

    def acquire(self) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return True

    def holder(self) -> int | None:
        try:
            text = self.path.read_text().strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def drain(fd: int) -> None:
    os.set_blocking(fd, False)
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def release_dead_leases() -> int:
    """Objects leased by workers that are gone become due now, for another actor to recover."""
    Process.cleanup_stale_running()
    dead = Process.objects.filter(process_type=Process.Type.WORKER, status=Process.Status.EXITED)
    released = 0
    for model, final in ((Crawl, ["sealed"]), (Snapshot, ["sealed"]), (ArchiveResult, ArchiveResult.FINAL_STATES)):
        released += model.objects.filter(lease_owner__in=dead).exclude(status__in=final).update(
            retry_at=timezone.now(), lease_owner=None
        )
    return released


def orphaned_objects() -> dict[str, int]:
    """Rows with a retry_at that no actor type will ever take."""
    orphans = {}
    for model, live in ((Binary, [Binary.Status.QUEUED]), (Process, [Process.Status.QUEUED])):
        n = model.objects.filter(retry_at__isnull=False, status__in=live).count()
        if n:
            orphans[model.__name__] = n
    return orphans


class Orchestrator:
    def __init__(self, datadir: DataDir, *, daemon: bool = False, on_tick: Callable[[], None] | None = None,
                 log: Callable[[str], None] = print):
        self.datadir = datadir
        self.engine = Engine(datadir)
        self.daemon = daemon
        self.on_tick = on_tick or (lambda: None)
        self.log = log
        self.lock = OrchestratorLock(datadir)
        self.stopping = False
        self.actors: dict[str, list[Process]] = {kind: [] for kind in ACTOR_TYPES}
        self.row: Process | None = None
        self.last_orphans: dict[str, int] = {}
        self.errors = ErrorFeed(datadir.logs / ERRORS_LOG)

    def limits(self) -> dict[str, int]:
        config = self.engine.base_config
        per_type = int(config["MAX_CONCURRENT_ACTORS"])
        hooks = int(config["MAX_CONCURRENT_HOOKS"])
        return {"crawl": min(per_type, 2), "snapshot": per_type, ArchiveResultActor.kind: min(per_type, hooks)}

    def request_stop(self, *_args) -> None:
        self.stopping = True

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> int:
        """Work until the queue is empty (or forever with daemon=True). Returns an exit code."""
        from waybox.models.process import register_entry_point

        if self.lock.fd is None and not self.lock.acquire():
            self.log(f"an orchestrator is already running for this collection (pid {self.lock.holder()})")
            return ALREADY_RUNNING
        self.row = register_entry_point(Process.Type.ORCHESTRATOR)
        previous = {sig: signal.signal(sig, self.request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        waiter = wakeup.Waiter("orchestrator")
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        old_wakeup_fd = signal.set_wakeup_fd(wake_w)
        fire("on_orchestrator_startup", orchestrator=self)
        released = release_dead_leases()
        if released:
            self.log(f"recovered {released} object(s) left by workers that died")
        last_stale_check = time.monotonic()
        try:
            while not self.stopping:
                queues = self.spawn_for_due_work()
                for line in self.errors.new_lines():
                    self.log(f"error: {line}")
                self.on_tick()
                if time.monotonic() - last_stale_check > STALE_CHECK_EVERY_S:
                    release_dead_leases()
                    self.report_orphans()
                    last_stale_check = time.monotonic()
                if not any(queues.values()):
                    fire("on_orchestrator_idle", orchestrator=self)
                    if not self.daemon and self.finished():
                        break
                waiter.wait(self.next_wakeup(), [wake_r])
                drain(wake_r)
                time.sleep(MIN_LOOP_S)  # coalesce bursts of notifications; actors hand off directly
        finally:
            self.shutdown()
            signal.set_wakeup_fd(old_wakeup_fd)
            os.close(wake_r)
            os.close(wake_w)
            waiter.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            fire("on_orchestrator_shutdown", orchestrator=self)
        return 130 if self.stopping else 0

    def spawn_for_due_work(self) -> dict[str, int]:
        queues = {kind: actor.get_queue().count() for kind, actor in ACTOR_TYPES.items()}
        fire("on_orchestrator_tick_started", orchestrator=self, actor_types=ACTOR_TYPES, queues=queues)
        limits = self.limits()
        for kind, actor in ACTOR_TYPES.items():
            self.reap(kind)
            if not queues[kind]:
                continue
            running = len(actor.get_running_actors())
            for _ in range(actor.get_actors_to_spawn(queues[kind], running, limits[kind])):
                self.actors[kind].append(actor.spawn_actor(self.engine, self.row))
        return queues

    def reap(self, kind: str) -> None:
        """Collect exited actors; release what they held at once rather than at lease expiry."""
        alive = []
        for row in self.actors[kind]:
            if row.poll() is None:
                alive.append(row)
            elif row.exit_code not in (0, None):
                self.log(f"{kind} worker pid {row.pid} exited with {row.exit_code}; see {row.stderr_path}")
                release_dead_leases()
        self.actors[kind] = alive

    def finished(self) -> bool:
        """Nothing due, every Crawl sealed and no hook running: idle actors can be told to go."""
        if Crawl.objects.filter(status__in=[Crawl.Status.QUEUED, Crawl.Status.STARTED]).exists():
            return False
        return not ArchiveResult.objects.filter(status=ArchiveResult.Status.STARTED).exists()

    def next_wakeup(self) -> float:
        """Sleep until the next retry_at comes due, at most the recovery interval."""
        soon = timezone.now() + timedelta(seconds=LOOP_TIMEOUT_S)
        queues = ((Crawl, ["sealed"]), (Snapshot, ["sealed"]), (ArchiveResult, ArchiveResult.FINAL_STATES))
        upcoming = [
            model.objects.filter(retry_at__lte=soon, retry_at__gt=timezone.now())
            .filter(~Q(status__in=final)).order_by("retry_at").values_list("retry_at", flat=True).first()
            for model, final in queues
        ]
        upcoming = [u for u in upcoming if u is not None]
        if not upcoming:
            return LOOP_TIMEOUT_S
        return max(0.005, (min(upcoming) - timezone.now()).total_seconds())

    def report_orphans(self) -> None:
        orphans = orphaned_objects()
        if orphans and orphans != self.last_orphans:
            detail = ", ".join(f"{n} {name}" for name, n in orphans.items())
            self.log(f"warning: {detail} row(s) have a retry_at but no actor type processes them")
        self.last_orphans = orphans

    def shutdown(self) -> None:
        """Ask every actor to stop (they stop their hooks), then make sure they are gone."""
        actors = [row for rows in self.actors.values() for row in rows if row.poll() is None]
        if self.finished():  # also idle actors a killed orchestrator left behind: nothing is left to do
            mine = {row.pk for row in actors}
            actors += [row for a in ACTOR_TYPES.values() for row in a.get_running_actors() if row.pk not in mine]
        for row in actors:
            live = row.proc
            if live is not None:
                live.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + SHUTDOWN_WAIT_S
        for row in actors:
            try:
                row.wait(max(0.1, deadline - time.monotonic()))
            except TimeoutError:
                row.kill_tree(grace=2)
        release_dead_leases()
        # the lock stays held until this process exits (the kernel drops it): "lock free"
        # then means "orchestrator gone", which `waybox add` relies on
