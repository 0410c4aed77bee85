"""The state machines of Crawl, Snapshot and ArchiveResult: every transition lives here.

Each transition is one compare-and-swap write (filter on the previous state, update state and
`retry_at` together) followed by its side effects. A transition that finds the row already
moved does nothing, so applying one twice, or from two workers at once, changes state once.
Ticks read, decide (with `policy`), and call at most one transition.

    Crawl:          queued -> started -> sealed
    Snapshot:       queued -> started (current_step 0..9) -> sealed
    ArchiveResult:  queued -> started -> succeeded | failed | skipped
                                     -> backoff -> started ... -> failed
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from django.db import transaction
from django.db.models import F
from django.db.models.expressions import Combinable
from django.utils import timezone

from waybox import proc as osproc
from waybox.archive import write_json_atomic, write_snapshot_index
from waybox.datadir import DataDir
from waybox.engine import policy, wakeup
from waybox.engine.context import Engine
from waybox.engine.errors import report_error
from waybox.hookspecs import fire
from waybox.models import ArchiveResult, Crawl, Process, Snapshot

RECOVERY_INTERVAL = timedelta(seconds=60)
AR = ArchiveResult.Status


def now():
    return timezone.now()


def cas(obj, expect: dict, **update) -> bool:
    """The one write of a transition: succeeds only if the row is still in the expected state."""
    model = type(obj)
    changed = model.objects.filter(pk=obj.pk, **expect).update(**update, modified_at=now()) == 1
    if changed:
        for key, value in update.items():
            if not isinstance(value, Combinable):
                setattr(obj, key, value)
        fire("on_object_updated", obj=obj)
    return changed


def transition(obj, expect: dict, to: str, **update) -> bool:
    start = expect.get("status", getattr(obj, "status", ""))
    fire("on_transition_start", obj=obj, from_state=start, to_state=to)
    changed = cas(obj, expect, status=to, **update)
    if changed:
        fire("on_transition_end", obj=obj, from_state=start, to_state=to)
    return changed


def wake(model, pk, channel: str) -> None:
    """Make another object due now (the only write a side effect may do to other objects)."""
    final = ("sealed",) if model is not ArchiveResult else ArchiveResult.FINAL_STATES
    if model.objects.filter(pk=pk).exclude(status__in=final).update(retry_at=now()):
        wakeup.notify(channel)


def release(obj, lease_until, next_retry) -> bool:
    """Give back a lease: fails (harmlessly) if someone woke the object meanwhile."""
    return type(obj).objects.filter(pk=obj.pk, retry_at=lease_until).update(
        retry_at=next_retry, lease_owner=None
    ) == 1


def step_items(results) -> list[policy.StepItem]:
    return [policy.StepItem(r.step, r.is_background, r.status) for r in results]


def enqueue_steps_upto(results, step: int) -> int:
    """Make the queued hooks of every step up to `step` due now."""
    ids = [r.pk for r in results if r.status == AR.QUEUED and r.retry_at is None and r.step <= step]
    if ids:
        ArchiveResult.objects.filter(pk__in=ids, status=AR.QUEUED, retry_at=None).update(retry_at=now())
        wakeup.notify("archiveresult")
    return len(ids)


def create_results(engine: Engine, model: str, config, **owner) -> None:
    hooks = engine.hooks_for(model, config)
    rows = [ArchiveResult(plugin=h.plugin, hook_name=h.name, retry_at=None, **owner) for h in hooks]
    ArchiveResult.objects.bulk_create(rows, ignore_conflicts=True)
    for row in rows:
        fire("on_object_created", obj=row)


# -- Crawl -----------------------------------------------------------------------------


def crawl_results(crawl: Crawl, model: str) -> list[ArchiveResult]:
    return list(ArchiveResult.objects.filter(crawl=crawl, snapshot=None, hook_name__startswith=f"on_{model}__"))


def release_snapshots(engine: Engine, crawl: Crawl) -> None:
    """The Crawl's own hooks are done: make as many of its Snapshots due as there is room for
    (each seal makes room for the next)."""
    room = int(engine.base_config["MAX_CONCURRENT_SNAPSHOTS"]) - Snapshot.objects.filter(
        status=Snapshot.Status.STARTED).count()
    waiting = Snapshot.objects.filter(crawl=crawl, status=Snapshot.Status.QUEUED, retry_at=None)
    ids = list(waiting.order_by("created_at").values_list("pk", flat=True)[: max(room, 1)])
    if ids and Snapshot.objects.filter(pk__in=ids, retry_at=None).update(retry_at=now()):
        wakeup.notify("snapshot")


def crawl_hooks_done(crawl: Crawl) -> bool:
    return crawl.status == Crawl.Status.STARTED and policy.pending_step(
        step_items(crawl_results(crawl, "Crawl"))
    ) is None


def start_crawl(engine: Engine, crawl: Crawl) -> None:
    """queued -> started, creating the Crawl hooks' results in the same transaction."""
    engine.datadir.crawl_dir(crawl.id).mkdir(parents=True, exist_ok=True)
    with transaction.atomic():
        if not transition(crawl, {"status": Crawl.Status.QUEUED}, Crawl.Status.STARTED,
                          retry_at=now(), started_at=now(), lease_owner=None):
            return
        create_results(engine, "Crawl", engine.config_for(crawl), crawl=crawl)
    write_crawl_json(engine, crawl)
    wakeup.notify("crawl")


def tick_crawl(engine: Engine, crawl: Crawl, lease_until) -> None:
    if crawl.status == Crawl.Status.QUEUED:
        start_crawl(engine, crawl)
        return
    if crawl.status != Crawl.Status.STARTED:
        return
    results = crawl_results(crawl, "Crawl")
    step = policy.pending_step(step_items(results))
    if step is not None:
        cas(crawl, {"status": Crawl.Status.STARTED}, current_step=step)
        enqueue_steps_upto(results, step)
        release(crawl, lease_until, now() + RECOVERY_INTERVAL)
        return
    release_snapshots(engine, crawl)
    if Snapshot.objects.filter(crawl=crawl).exclude(status=Snapshot.Status.SEALED).exists():
        release(crawl, lease_until, now() + RECOVERY_INTERVAL)
        return
    create_results(engine, "CrawlEnd", engine.config_for(crawl), crawl=crawl)
    end_results = crawl_results(crawl, "CrawlEnd")
    step = policy.pending_step(step_items(end_results))
    if step is not None:
        enqueue_steps_upto(end_results, step)
        release(crawl, lease_until, now() + RECOVERY_INTERVAL)
        return
    seal_crawl(engine, crawl)


def seal_crawl(engine: Engine, crawl: Crawl) -> None:
    if not transition(crawl, {"status": Crawl.Status.STARTED}, Crawl.Status.SEALED,
                      retry_at=None, ended_at=now(), lease_owner=None):
        return
    stop_background_hooks(engine, ArchiveResult.objects.filter(crawl=crawl, snapshot=None),
                          engine.datadir.crawl_dir(crawl.id), engine.config_for(crawl))
    write_crawl_json(engine, crawl)
    wakeup.notify("crawl")


def write_crawl_json(engine: Engine, crawl: Crawl) -> None:
    from waybox.archive import crawl_dict

    write_json_atomic(engine.datadir.crawl_dir(crawl.id) / "crawl.json", {**crawl_dict(crawl), "urls": crawl.urls})


# -- Snapshot --------------------------------------------------------------------------


def start_snapshot(engine: Engine, snapshot: Snapshot) -> bool:
    """queued -> started, creating one result per enabled hook in the same transaction, so a
    crash can never leave a started Snapshot without its results. False when
    MAX_CONCURRENT_SNAPSHOTS are already in progress (checked in the same transaction)."""
    make_folder(engine.datadir, snapshot)
    limit = int(engine.base_config["MAX_CONCURRENT_SNAPSHOTS"])
    with transaction.atomic():
        if Snapshot.objects.filter(status=Snapshot.Status.STARTED).count() >= limit:
            return False
        if not transition(snapshot, {"status": Snapshot.Status.QUEUED}, Snapshot.Status.STARTED,
                          retry_at=now(), started_at=now(), current_step=0, lease_owner=None):
            return True
        create_results(engine, "Snapshot", engine.config_for(snapshot.crawl, snapshot), snapshot=snapshot)
    refresh_index(engine.datadir, snapshot)
    wakeup.notify("snapshot")
    return True


def wake_waiting_snapshots(limit: int) -> None:
    """Make the oldest Snapshots waiting for a free place due (their Crawls are ready)."""
    waiting = Snapshot.objects.filter(status=Snapshot.Status.QUEUED, retry_at=None,
                                      crawl__status=Crawl.Status.STARTED).order_by("created_at")
    ids = list(waiting.values_list("pk", flat=True)[:limit])
    if ids and Snapshot.objects.filter(pk__in=ids, retry_at=None).update(retry_at=now()):
        wakeup.notify("snapshot")


def tick_snapshot(engine: Engine, snapshot: Snapshot, lease_until) -> None:
    if snapshot.status == Snapshot.Status.QUEUED:
        if not crawl_hooks_done(snapshot.crawl):  # the Crawl wakes its Snapshots when its hooks are done
            release(snapshot, lease_until, None)
            wake(Crawl, snapshot.crawl_id, "crawl")
        elif not start_snapshot(engine, snapshot):  # full: the next seal wakes a waiting Snapshot
            release(snapshot, lease_until, None)
        return
    if snapshot.status != Snapshot.Status.STARTED:
        return
    results = list(snapshot.results.all())
    step = policy.pending_step(step_items(results))
    if step is None:
        seal_snapshot(engine, snapshot)
        return
    step = max(step, snapshot.current_step)
    advanced = step != snapshot.current_step and cas(
        snapshot, {"status": Snapshot.Status.STARTED, "current_step": snapshot.current_step}, current_step=step
    )
    enqueue_steps_upto(results, step)
    release(snapshot, lease_until, now() + RECOVERY_INTERVAL)
    if advanced:  # after the next step's hooks are due: the index never delays them
        refresh_index(engine.datadir, snapshot)


def seal_snapshot(engine: Engine, snapshot: Snapshot) -> None:
    if not transition(snapshot, {"status": Snapshot.Status.STARTED}, Snapshot.Status.SEALED,
                      retry_at=None, ended_at=now(), current_step=9, lease_owner=None):
        return
    folder = engine.datadir.snapshot_dir(snapshot.id)
    stop_background_hooks(engine, snapshot.results.all(), folder, engine.config_for(snapshot.crawl, snapshot))
    Snapshot.objects.filter(pk=snapshot.pk).update(output_size=folder_size(folder))
    refresh_index(engine.datadir, snapshot)
    wake(Crawl, snapshot.crawl_id, "crawl")
    wake_waiting_snapshots(1)


def stop_background_hooks(engine: Engine, results, folder: Path, config) -> None:
    """SIGTERM what the owner's hooks left running, then SIGKILL after the grace.

    That is every running background hook with its descendants, anything still carrying one
    of the owner's hook process ids in its environment (children a foreground hook left
    behind), and daemons that declared themselves in `.pid` files under `folder`. The hooks'
    own workers reap them and record their ArchiveResults.
    """
    results = list(results.select_related("process"))
    rows = [r.process for r in results if r.process is not None]
    procs = {}
    for r in results:
        if r.status == AR.STARTED and r.is_background and r.process is not None:
            for p in r.process.tree_procs():
                procs[p.pid] = p
    for p in osproc.processes_with_marker({str(row.id) for row in rows}) if rows else ():
        procs.setdefault(p.pid, p)
    for p in pid_file_procs(folder, rows):
        procs.setdefault(p.pid, p)
    if procs:
        osproc.terminate_procs(list(procs.values()), float(config["BG_HOOK_GRACE"]))


def pid_file_procs(folder: Path, rows: list[Process]):
    """Live daemons named in `.pid` files under `folder` that one of these hooks could have
    started: begun after the earliest hook and before their pid file was written."""
    starts = [row.started_at.timestamp() - osproc.START_TIME_TOLERANCE_S for row in rows if row.started_at]
    if not starts:
        return []
    found = []
    for pid, written_at in osproc.pid_files(folder):
        proc = osproc.declared_process(pid, written_at, min(starts))
        if proc is not None:
            found.append(proc)
    return found


def folder_size(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


# -- ArchiveResult ---------------------------------------------------------------------


def finish_result(result: ArchiveResult, outcome: policy.Outcome, worker: Process, fields: dict) -> bool:
    """started -> succeeded | failed | skipped | backoff, then wake its owner."""
    retry_at = now() + timedelta(seconds=outcome.retry_in) if outcome.retry_in is not None else None
    output_str = fields.pop("output_str", "") or ""
    explains = outcome.status in ("failed", "backoff") or not output_str
    if outcome.message and explains and outcome.message not in output_str:
        output_str = f"{output_str} ({outcome.message})" if output_str else outcome.message
    changed = transition(
        result, {"status": AR.STARTED, "lease_owner": worker}, outcome.status,
        retry_at=retry_at, ended_at=now(), lease_owner=None, output_str=output_str, **fields,
    )
    if changed:
        after_result_change(result)
    return changed


def skip_result(result: ArchiveResult, worker: Process, message: str) -> bool:
    changed = transition(result, {"status": AR.STARTED, "lease_owner": worker}, AR.SKIPPED,
                         retry_at=None, ended_at=now(), lease_owner=None, output_str=message)
    if changed:
        after_result_change(result)
    return changed


def requeue_result(result: ArchiveResult, worker: Process, reason: str) -> bool:
    """started -> queued without using up an attempt (shutdown, or a hook we stopped)."""
    changed = transition(result, {"status": AR.STARTED, "lease_owner": worker}, AR.QUEUED,
                         retry_at=now(), lease_owner=None, attempts=F("attempts") - 1,
                         output_str=reason)
    if changed:
        result.refresh_from_db(fields=["attempts"])
    return changed


def wake_owner(result: ArchiveResult) -> None:
    if result.snapshot_id:
        wake(Snapshot, result.snapshot_id, "snapshot")
    elif result.crawl_id:
        wake(Crawl, result.crawl_id, "crawl")


def after_result_change(result: ArchiveResult) -> None:
    """Wake the owner first (the next step waits on it), then refresh index.json if nobody
    else will: while the Snapshot is in progress its actor rewrites index.json at each step
    change and at the seal (once per step rather than once per result); results that end
    after the seal (background hooks, late retries) are written here."""
    wake_owner(result)
    in_progress = Snapshot.objects.filter(pk=result.snapshot_id, status=Snapshot.Status.STARTED)
    if result.snapshot_id and not in_progress.exists():
        from django.conf import settings

        refresh_index(DataDir(Path(settings.WAYBOX_DATA_DIR)), Snapshot(pk=result.snapshot_id))


def make_folder(datadir: DataDir, snapshot: Snapshot) -> None:
    """A Snapshot whose folder cannot be made (a read-only or full archive folder) still
    starts: its hooks then fail to launch and are retried with back-off like any other
    failure, so `waybox run` ends and `waybox update --failed` picks them up later."""
    try:
        datadir.snapshot_dir(snapshot.id).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        report_error(datadir, f"Snapshot {snapshot.id}: cannot create its folder: {err}")


def refresh_index(datadir: DataDir, snapshot: Snapshot) -> None:
    """index.json is a copy of the database (for `init --rebuild`); failing to write it is
    reported, never fatal: the next change of the Snapshot writes it again."""
    try:
        write_snapshot_index(datadir, snapshot)
    except OSError as err:
        report_error(datadir, f"Snapshot {snapshot.pk}: cannot write index.json: {err}")
