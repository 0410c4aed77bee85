"""`waybox add` in the foreground: run (or follow) the orchestrator until the Crawl seals,
with a live display of each Snapshot's step and running hooks."""

from __future__ import annotations

import time

from django.utils import timezone
from rich.console import Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from waybox.engine import wakeup
from waybox.engine.errors import ERRORS_LOG, ErrorFeed
from waybox.engine.orchestrator import ALREADY_RUNNING, SHUTDOWN_WAIT_S, OrchestratorLock
from waybox.models import ArchiveResult, Crawl, Process, Snapshot

MAX_ROWS = 15
REFRESH_S = 0.25


def progress_view(crawl: Crawl, started: float) -> Group:
    snapshots = list(Snapshot.objects.filter(crawl=crawl).order_by("created_at"))
    running = ArchiveResult.objects.filter(snapshot__crawl=crawl, status=ArchiveResult.Status.STARTED)
    hooks_by_snapshot: dict = {}
    for result in running:
        elapsed = (timezone.now() - result.started_at).total_seconds() if result.started_at else 0
        hooks_by_snapshot.setdefault(result.snapshot_id, []).append(f"{result.plugin} {elapsed:.0f}s")
    table = Table(show_header=True, header_style="bold", expand=False)
    for column in ("status", "step", "url", "running hooks"):
        table.add_column(column, overflow="fold")
    active = [s for s in snapshots if s.status != Snapshot.Status.SEALED][:MAX_ROWS]
    for snapshot in active:
        table.add_row(snapshot.status, str(snapshot.current_step), snapshot.url[:80],
                      ", ".join(hooks_by_snapshot.get(snapshot.id, [])))
    counts: dict[str, int] = {}
    for status in ArchiveResult.objects.filter(snapshot__crawl=crawl).values_list("status", flat=True):
        counts[status] = counts.get(status, 0) + 1
    sealed = sum(1 for s in snapshots if s.status == Snapshot.Status.SEALED)
    summary = Text(
        f"crawl {crawl.id}  {sealed}/{len(snapshots)} snapshots sealed  "
        + "  ".join(f"{k}={v}" for k, v in sorted(counts.items()))
        + f"  {time.monotonic() - started:.1f}s elapsed"
    )
    return Group(summary, table) if active else Group(summary)


def archive_in_foreground(app, crawl: Crawl) -> int:
    """Become the orchestrator, or follow the one already running; return an exit code."""
    from waybox.cli import err_console

    started = time.monotonic()
    errors = ErrorFeed(app.datadir.logs / ERRORS_LOG)
    with Live(progress_view(crawl, started), console=err_console, refresh_per_second=4, transient=False) as live:
        last = [0.0]

        def refresh() -> None:
            if time.monotonic() - last[0] >= REFRESH_S:
                for line in errors.new_lines():
                    live.console.print(f"[red]error:[/] {escape(line)}")
                crawl.refresh_from_db()
                live.update(progress_view(crawl, started))
                last[0] = time.monotonic()

        code = follow_or_orchestrate(app, crawl, refresh, lambda msg: err_console.print(msg))
        crawl.refresh_from_db()
        live.update(progress_view(crawl, started))
    summarize(crawl)
    return code


def follow_or_orchestrate(app, crawl: Crawl, refresh, log) -> int:
    """Start `waybox run` as a child if no orchestrator holds the lock, then follow the Crawl.

    Following is a display refresh every REFRESH_S, not a hand-off: it polls, so it never
    sits on the wake-up path the engine's processes use (waking on their notifications made
    this process the busiest one of a crawl).
    """
    lock = OrchestratorLock(app.datadir)
    launched: Process | None = None
    announced = False
    try:
        while True:
            crawl.refresh_from_db()
            if crawl.status == Crawl.Status.SEALED:
                wait_for_idle_exit(lock, launched)
                return 0
            if launched is not None and launched.poll() is not None:
                if launched.exit_code != ALREADY_RUNNING:
                    log(f"the orchestrator exited ({launched.exit_code}) before the crawl sealed; "
                        f"see {launched.stderr_path}")
                    return launched.exit_code or 1
                launched = None
            if launched is None and lock.acquire():
                lock.release()
                launched = launch_orchestrator(app.datadir)
            elif launched is None and not announced:
                wakeup.notify("crawl")  # another orchestrator's crawl actor: here is a new Crawl
                announced = True
            refresh()
            time.sleep(REFRESH_S)
    except KeyboardInterrupt:
        if launched is not None:
            log("stopping the orchestrator; unfinished work stays queued for `waybox run`")
            launched.terminate(grace=SHUTDOWN_WAIT_S)
        return 130


def wait_for_idle_exit(lock: OrchestratorLock, launched: Process | None, limit: float = 60.0) -> None:
    """The orchestrator exits once all work is done: wait for that, so `add` leaves nothing
    running behind it, unless other Crawls keep it (rightly) busy."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if Crawl.objects.exclude(status=Crawl.Status.SEALED).exists():
            return
        if lock.acquire():  # nobody holds it: the orchestrator is gone
            lock.release()
            if launched is not None:
                launched.poll()
            return
        time.sleep(REFRESH_S)  # a display refresh while the orchestrator winds down, not a hand-off


def launch_orchestrator(datadir) -> Process:
    from waybox.models.process import python_cmd

    return Process.launch(
        python_cmd(f"--data-dir={datadir.root}", "run"),
        cwd=datadir.root,
        process_type=Process.Type.ORCHESTRATOR,
        env={"WAYBOX_DATA_DIR": str(datadir.root)},
        log_dir=datadir.logs,
        log_name="orchestrator",
    )


def summarize(crawl: Crawl) -> None:
    from waybox.cli import err_console

    counts: dict[str, int] = {}
    for status in ArchiveResult.objects.filter(snapshot__crawl=crawl).values_list("status", flat=True):
        counts[status] = counts.get(status, 0) + 1
    n = Snapshot.objects.filter(crawl=crawl).count()
    err_console.print(
        f"crawl {crawl.id} {crawl.status}: {n} snapshot(s); results "
        + (", ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "none")
    )
