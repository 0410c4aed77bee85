"""Commands that run the engine: run, update, and the internal worker command."""

from __future__ import annotations

import sys

import click
from rich.markup import escape

from waybox.cli import App, err_console, pass_app


@click.command()
@click.option("--daemon", is_flag=True, help="Keep waiting for new work instead of exiting when idle.")
@pass_app
def run(app: App, daemon: bool) -> None:
    """Run the orchestrator: archive everything queued, then exit (or wait, with --daemon)."""
    app.boot(process_type="orchestrator")
    from waybox.engine.orchestrator import Orchestrator
    from waybox.hookspecs import configure

    configure(app.config["PYTHON_PLUGINS"])
    sys.exit(Orchestrator(app.datadir, daemon=daemon, log=lambda m: err_console.print(escape(m))).run())


@click.command()
@click.option("--failed", is_flag=True, help="Also re-run results that failed for good.")
@click.option("--bg", is_flag=True, help="Only mark the work due; do not run the orchestrator.")
@pass_app
def update(app: App, failed: bool, bg: bool) -> None:
    """Re-run what is due: results in back-off now, and failed ones with --failed."""
    app.boot()
    from django.utils import timezone

    from waybox.engine import wakeup
    from waybox.models import ArchiveResult, Crawl

    AR = ArchiveResult.Status
    due = ArchiveResult.objects.filter(status=AR.BACKOFF).update(retry_at=timezone.now())
    if failed:
        due += ArchiveResult.objects.filter(status=AR.FAILED).update(
            status=AR.BACKOFF, attempts=0, retry_at=timezone.now()
        )
    err_console.print(f"{due} result(s) due to run again")
    wakeup.notify("archiveresult")
    if bg or not due:
        return
    from waybox.engine.orchestrator import ALREADY_RUNNING, Orchestrator

    code = Orchestrator(app.datadir, log=lambda m: err_console.print(escape(m))).run()
    if code == ALREADY_RUNNING:
        err_console.print("the running orchestrator will pick them up")
        code = 0
    _ = Crawl
    sys.exit(code)


@click.command(hidden=True)
@click.option("--type", "kind", type=click.Choice(["crawl", "snapshot", "archiveresult"]), required=True)
@pass_app
def worker(app: App, kind: str) -> None:
    """Internal: an actor process spawned by the orchestrator."""
    app.boot(process_type="worker")
    from waybox.engine.actors import ACTOR_TYPES
    from waybox.engine.context import Engine
    from waybox.hookspecs import configure
    from waybox.models import Process

    configure(app.config["PYTHON_PLUGINS"])
    actor = ACTOR_TYPES[kind](Engine(app.datadir), Process.current())
    actor.runloop()


COMMANDS = [run, update, worker]
