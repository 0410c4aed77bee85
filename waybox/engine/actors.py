"""Actors: worker processes that claim one due object at a time and tick it.

An actor claims with a lease: one compare-and-swap that bumps `retry_at` past now and stamps
`lease_owner`. It ticks, lets the lease go, and claims again; it waits on its wake-up socket
when nothing is due and exits once it has been idle for `IDLE_EXIT_S` with no background
hooks left to watch. A dead actor's leases expire (or are released by the orchestrator) and
another actor recovers its objects.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from waybox.engine import machines, policy, wakeup
from waybox.engine.context import Engine
from waybox.engine.errors import report_error
from waybox.engine.hookrun import FOLLOW_INTERVAL_S, Attempt, Target, hook_timeout, lives_until_seal
from waybox.hookspecs import fire
from waybox.models import ArchiveResult, Crawl, Machine, Process, Snapshot

# An idle actor lingers this long: a Crawl's actor is needed again at each Snapshot seal, and a
# restart costs ~0.5 s of CPU. `waybox run` does not wait for it: its orchestrator stops idle
# actors once all work is done.
IDLE_EXIT_S = 30.0
RECOVERY_POLL_S = 1.0
LEASE_MARGIN_S = 30
OWNER_CHECK_S = 2.0
LONG_LEASE_S = 365 * 24 * 3600
CLAIM_BATCH = 25
AR = ArchiveResult.Status
# A Crawl's seed list (one line per URL: MBs for a big import) is never needed to claim or tick.
LARGE_CRAWL_FIELDS = ("snapshot__crawl__urls", "crawl__urls")


class Actor:
    """Base actor: the claim-tick loop. Subclasses say what their queue is and how to tick."""

    kind = ""
    model: type = Crawl
    channel = ""

    def __init__(self, engine: Engine, worker: Process):
        self.engine = engine
        self.worker = worker
        self.stopping = False
        self.max_tick = int(engine.base_config["MAX_TICK_TIME"])

    # -- the spec's ActorType interface (used by the orchestrator) ----------------------

    queue_states: tuple[str, ...] = ()

    @classmethod
    def get_queue(cls):
        """Objects due now (retry_at passed) in a state this actor type moves forward."""
        return cls.model.objects.filter(status__in=cls.queue_states, retry_at__lte=timezone.now())

    @classmethod
    def get_running_actors(cls) -> list[Process]:
        """Live worker processes of this type on this machine (also orphans of a dead orchestrator)."""
        rows = Process.objects.filter(
            machine=Machine.current(), process_type=Process.Type.WORKER, status=Process.Status.RUNNING
        )
        return [r for r in rows if f"--type={cls.kind}" in r.cmd and r.proc is not None]

    @classmethod
    def get_actors_to_spawn(cls, queue_size: int, running: int, limit: int) -> int:
        """One actor per due object, up to the limit."""
        return max(0, min(queue_size, limit) - running)

    @classmethod
    def spawn_actor(cls, engine: Engine, parent: Process) -> Process:
        from waybox.models.process import python_cmd

        datadir = engine.datadir
        return Process.launch(
            python_cmd(f"--data-dir={datadir.root}", "worker", f"--type={cls.kind}"),
            cwd=datadir.root,
            process_type=Process.Type.WORKER,
            env={"WAYBOX_DATA_DIR": str(datadir.root)},
            parent=parent,
            log_dir=datadir.logs / "workers",
            log_name=f"{cls.kind}-{timezone.now():%Y%m%d-%H%M%S-%f}",
        )

    # -- the loop ------------------------------------------------------------------------

    def request_stop(self, *_args) -> None:
        self.stopping = True

    def runloop(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        fire("on_actor_startup", actor=self)
        waiter = wakeup.Waiter(self.channel)
        idle_since = time.monotonic()
        try:
            while not self.stopping:
                self.between_ticks()
                claimed = self.claim()
                if claimed is not None:
                    self.run_tick(*claimed)
                    idle_since = time.monotonic()
                    continue
                idle_for = time.monotonic() - idle_since
                if not self.busy() and idle_for >= IDLE_EXIT_S:
                    break
                waiter.wait(self.wait_timeout(idle_for), self.extra_fds())
        finally:
            self.on_shutdown()
            waiter.close()
            fire("on_actor_shutdown", actor=self)

    def run_tick(self, obj, lease_until, previous_status) -> None:
        fire("on_actor_tick_start", actor=self, obj=obj)
        try:
            self.tick(obj, lease_until, previous_status)
        except Exception as err:  # one bad object must not stop the actor
            traceback.print_exc()
            report_error(self.engine.datadir, f"{type(obj).__name__} {obj.pk}: {type(err).__name__}: {err}")
            fire("on_actor_tick_exception", actor=self, obj=obj, exception=err)
            machines.release(obj, lease_until, timezone.now() + timedelta(seconds=self.max_tick))
        fire("on_actor_tick_end", actor=self, obj=obj)

    def claim(self):
        """(object, lease_until, previous status) for the first due object we win, or None."""
        now = timezone.now()
        lease_until = now + timedelta(seconds=self.max_tick)
        for candidate in self.get_queue().order_by("retry_at", "created_at")[:CLAIM_BATCH]:
            won = type(candidate).objects.filter(
                pk=candidate.pk, status=candidate.status, retry_at=candidate.retry_at
            ).update(retry_at=lease_until, lease_owner=self.worker)
            if won:
                candidate.retry_at, candidate.lease_owner = lease_until, self.worker
                return candidate, lease_until, candidate.status
        return None

    def tick(self, obj, lease_until, previous_status) -> None:
        raise NotImplementedError

    def between_ticks(self) -> None:
        """Hook for actors that watch things between ticks (background hooks)."""

    def busy(self) -> bool:
        return False

    def wait_timeout(self, idle_for: float) -> float:
        """The recovery timer while idle; never past the moment we would exit."""
        return min(RECOVERY_POLL_S, max(0.01, IDLE_EXIT_S - idle_for))

    def extra_fds(self) -> list:
        return []

    def on_shutdown(self) -> None:
        """Release whatever this actor still holds."""


class CrawlActor(Actor):
    kind = "crawl"
    model = Crawl
    channel = "crawl"
    queue_states = (Crawl.Status.QUEUED, Crawl.Status.STARTED)

    def tick(self, crawl, lease_until, previous_status) -> None:
        machines.tick_crawl(self.engine, crawl, lease_until)


class SnapshotActor(Actor):
    kind = "snapshot"
    model = Snapshot
    channel = "snapshot"
    queue_states = (Snapshot.Status.QUEUED, Snapshot.Status.STARTED)

    def tick(self, snapshot, lease_until, previous_status) -> None:
        snapshot = Snapshot.objects.select_related("crawl").defer("crawl__urls").get(pk=snapshot.pk)
        machines.tick_snapshot(self.engine, snapshot, lease_until)


@dataclass
class Running:
    """A hook this actor launched and supervises until it ends."""

    attempt: Attempt
    pidfd: int | None


class ArchiveResultActor(Actor):
    """Runs hooks: claims due results, launches their hooks and supervises them all at once.

    A tick only launches; between ticks the actor follows every running hook's stdout,
    notices exits through pidfds (which wake it at once), enforces timeouts and finishes the
    results. Foreground and background hooks are supervised the same way, so one actor keeps
    up to MAX_CONCURRENT_HOOKS hooks busy.
    """

    kind = "archiveresult"
    model = ArchiveResult
    channel = "archiveresult"

    def __init__(self, engine: Engine, worker: Process):
        super().__init__(engine, worker)
        self.running: dict = {}  # result pk -> Running
        self.owners_checked = 0.0
        self.max_hooks = int(engine.base_config["MAX_CONCURRENT_HOOKS"])
        self.max_attempts = int(engine.base_config["MAX_ATTEMPTS"])
        self.backoff = float(engine.base_config["RETRY_BACKOFF"])

    queue_states = (AR.QUEUED, AR.BACKOFF, AR.STARTED)

    # -- claiming ------------------------------------------------------------------------

    def claim(self):
        with transaction.atomic():
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [int(Machine.current().guid[:15], 16)])
            running = self.running_hooks()
            waiting_owners = set()  # owners with a hook waiting for a slot: keep filename order
            queue = self.get_queue().select_related("snapshot__crawl", "crawl").defer(*LARGE_CRAWL_FIELDS)
            for candidate in queue.order_by("retry_at", "snapshot_id", "hook_name")[:CLAIM_BATCH]:
                owner = (candidate.snapshot_id, candidate.crawl_id)
                if candidate.status != AR.STARTED:
                    if owner in waiting_owners or not self.has_room(candidate, running):
                        waiting_owners.add(owner)
                        continue
                    if self.blocked_by_exclusive(candidate):
                        continue
                claimed = self.try_claim(candidate)
                if claimed is not None:
                    return claimed
        return None

    def has_room(self, candidate: ArchiveResult, running: int) -> bool:
        """MAX_CONCURRENT_HOOKS bounds foreground hooks. Background hooks are not counted:
        they live until their Snapshot seals, so counting them could let a step's own
        listeners hold every slot and the Snapshot never seal; MAX_CONCURRENT_SNAPSHOTS
        bounds them instead."""
        return candidate.is_background or running < self.max_hooks

    def running_hooks(self) -> int:
        """Foreground hooks claimed by this machine's workers and not finished (counted from the
        claim, so workers claiming at once never overshoot)."""
        started = ArchiveResult.objects.filter(
            status=AR.STARTED, lease_owner__machine=Machine.current()
        ).exclude(hook_name__contains=".bg.")
        return started.count()

    def blocked_by_exclusive(self, result: ArchiveResult) -> bool:
        resource = self.engine.exclusive_of(result.plugin)
        if not resource:
            return False
        owner = Q(snapshot_id=result.snapshot_id) if result.snapshot_id else Q(crawl_id=result.crawl_id, snapshot=None)
        siblings = ArchiveResult.objects.filter(owner, plugin__in=self.engine.plugins_sharing(resource)).exclude(
            pk=result.pk
        )
        return not policy.claimable_exclusive(result.hook_name, siblings.values_list("hook_name", "status"))

    def lease_seconds(self, result: ArchiveResult) -> float:
        hook = self.engine.hook_of(result)
        crawl = result.snapshot.crawl if result.snapshot_id else result.crawl
        if hook is None:
            return self.max_tick
        if lives_until_seal(hook):
            return LONG_LEASE_S  # released at once by the orchestrator if this worker dies
        config = self.engine.config_for(crawl, result.snapshot)
        return hook_timeout(hook, config) + float(config["BG_HOOK_GRACE"]) + LEASE_MARGIN_S

    def try_claim(self, candidate: ArchiveResult):
        now = timezone.now()
        lease_until = now + timedelta(seconds=self.lease_seconds(candidate))
        update = {"retry_at": lease_until, "lease_owner": self.worker, "modified_at": now}
        if candidate.status != AR.STARTED:
            update.update(status=AR.STARTED, attempts=F("attempts") + 1, started_at=now, ended_at=None)
        won = ArchiveResult.objects.filter(
            pk=candidate.pk, status=candidate.status, retry_at=candidate.retry_at
        ).update(**update)
        if not won:
            return None
        previous = candidate.status
        candidate.refresh_from_db()
        return candidate, lease_until, previous

    # -- ticking: launch -------------------------------------------------------------------

    def tick(self, result, lease_until, previous_status) -> None:
        snapshot = result.snapshot
        crawl = snapshot.crawl if snapshot is not None else result.crawl
        target = Target(self.engine.datadir, crawl, snapshot)
        config = self.engine.config_for(crawl, snapshot)
        hook = self.engine.hook_of(result)
        if previous_status == AR.STARTED:
            self.recover(result, hook, target, config)
            return
        reason = self.reason_to_skip(result, hook, config)
        if reason:
            machines.skip_result(result, self.worker, reason)
            return
        attempt = Attempt(result, hook, target, config, self.worker)
        try:
            process = attempt.launch()
        except OSError as err:
            attempt.follow()
            self.finish(attempt, policy.HookRun(None, None, False), f"could not start: {err}")
            return
        self.supervise(attempt, process.pid)
        if hook.background:
            machines.wake_owner(result)  # a launched background hook no longer holds its step

    def reason_to_skip(self, result: ArchiveResult, hook, config) -> str:
        if hook is None:
            return f"hook {result.hook_name} of plugin {result.plugin} no longer exists"
        if not config.plugin_enabled(result.plugin):
            return f"plugin {result.plugin} is disabled"
        missing = self.engine.missing_binaries(result.plugin)
        if missing:
            return f"missing binary: {', '.join(missing)} (install it, or run `waybox install`)"
        return ""

    def recover(self, result: ArchiveResult, hook, target: Target, config) -> None:
        """A started result whose lease ran out: the worker that ran its hook is gone.

        Whatever is left of the hook is stopped: also when its row still says queued (the
        worker died mid-launch) or exited (it was marked stale), since its process is found by
        the WAYBOX_PROCESS_ID it carries. The result is then finished from what the hook wrote,
        so a hook that reported success is never run again.
        """
        row = result.process
        if row is not None:
            row.kill_tree(float(config["BG_HOOK_GRACE"]))
        if row is None or hook is None or not Path(row.stdout_path or "").exists():
            machines.requeue_result(result, self.worker, "its worker stopped before the hook started")
            return
        attempt = Attempt(result, hook, target, config, self.worker)
        attempt.process = row
        sealed = hook.background and self.owner_sealed(result)
        self.finish(attempt, attempt.conclude(row.exit_code, stopped_at_seal=sealed))

    def finish(self, attempt: Attempt, run: policy.HookRun, error: str = "") -> None:
        result = attempt.result
        outcome = policy.decide(run, result.attempts, self.max_attempts, self.backoff)
        if outcome.status == AR.QUEUED:
            machines.requeue_result(result, self.worker, outcome.message)
            return
        fields = attempt.output_fields()
        if error:
            fields["output_str"] = f"{fields.get('output_str') or ''} {error}".strip()
        machines.finish_result(result, outcome, self.worker, fields)

    # -- supervising ---------------------------------------------------------------------

    def supervise(self, attempt: Attempt, pid: int) -> None:
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            pidfd = None
        self.running[attempt.result.pk] = Running(attempt, pidfd)

    def busy(self) -> bool:
        return bool(self.running)

    def wait_timeout(self, idle_for: float) -> float:
        if self.running:
            return FOLLOW_INTERVAL_S
        return super().wait_timeout(idle_for)

    def extra_fds(self) -> list:
        return [r.pidfd for r in self.running.values() if r.pidfd is not None]

    def between_ticks(self) -> None:
        check_owners = time.monotonic() - self.owners_checked >= OWNER_CHECK_S
        if check_owners:
            self.owners_checked = time.monotonic()
        for pk, running in list(self.running.items()):
            attempt = running.attempt
            attempt.follow()
            code = attempt.process.poll()
            exited = code is not None or attempt.process.status == Process.Status.EXITED
            timed_out = not exited and time.monotonic() >= attempt.deadline
            # backstop for a seal whose SIGTERM never came (its worker died right after sealing)
            orphaned = not exited and attempt.hook.background and check_owners and self.owner_sealed(attempt.result)
            if exited or timed_out or orphaned:
                self.settle(pk, timed_out=timed_out)

    def settle(self, pk, *, timed_out: bool = False, interrupted: bool = False) -> None:
        """Stop the hook if it still runs, stop watching it and finish its result."""
        attempt = self.running[pk].attempt
        still_running = attempt.process.poll() is None and attempt.process.status != Process.Status.EXITED
        if still_running:
            attempt.stop()
        self.forget(pk)
        sealed = attempt.hook.background and not timed_out and self.owner_sealed(attempt.result)
        run = attempt.conclude(attempt.process.exit_code, timed_out=timed_out, stopped_at_seal=sealed,
                               interrupted=interrupted and still_running)
        self.finish(attempt, run)

    def forget(self, pk) -> None:
        running = self.running.pop(pk)
        if running.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(running.pidfd)

    @staticmethod
    def owner_sealed(result: ArchiveResult) -> bool:
        if result.snapshot_id:
            return Snapshot.objects.filter(pk=result.snapshot_id, status=Snapshot.Status.SEALED).exists()
        return Crawl.objects.filter(pk=result.crawl_id, status=Crawl.Status.SEALED).exists()

    def on_shutdown(self) -> None:
        """Stop every hook we supervise. A hook that had not reported is left re-runnable
        (without using up an attempt); one that ended or reported first keeps its verdict;
        background hooks of a sealed owner were done anyway and are finished."""
        for pk in list(self.running):
            self.settle(pk, interrupted=True)


ACTOR_TYPES: dict[str, type[Actor]] = {a.kind: a for a in (CrawlActor, SnapshotActor, ArchiveResultActor)}
