"""`waybox server`: the web UI and API under gunicorn, plus the orchestrator, as one service.

This process is the supervisor (a Process row of type "server"). It launches, through
`Process.launch`, gunicorn (another "server" row; each gunicorn worker registers beneath it)
and, unless --no-orchestrator, `waybox run --daemon`. It restarts an orchestrator that dies,
waits while another one holds the lock, and on SIGTERM/SIGINT/SIGHUP stops both trees and
anything left below itself before exiting.

Why gunicorn: a pre-fork server that restarts a stuck or crashed worker, is the server the
Django docs name first, and is maintained; static files are served by WhiteNoise inside the
application, so no second server is needed.
"""

from __future__ import annotations

import signal
import sys
import threading
import time

import click
from rich.markup import escape

from waybox.cli import App, err_console, pass_app

READY_TIMEOUT_S = 60.0
LOOP_S = 0.5
ORCHESTRATOR_RETRY_S = (2.0, 5.0, 15.0, 30.0, 60.0)
GUNICORN_GRACE_S = 15.0
READY_MARK = "Listening at: "


def split_bind(bind: str) -> tuple[str, int]:
    """`host:port` (IPv6 as `[::1]:8000`) to a connectable address, or a usage error."""
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{bind!r} is not HOST:PORT (e.g. 127.0.0.1:8000)", param_hint="--bind")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def browse_host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


class Supervisor:
    def __init__(self, app: App, bind: str, orchestrator: bool, workers: int, threads: int):
        self.app = app
        self.datadir = app.datadir
        self.bind = bind
        self.host, self.port = split_bind(bind)
        self.want_orchestrator = orchestrator
        self.workers = workers
        self.threads = threads
        self.stop_signal: int | None = None
        self.wake = threading.Event()
        self.gunicorn = None
        self.orchestrator = None
        self.orchestrator_failures = 0
        self.next_orchestrator_try = 0.0
        self.waiting_note_shown = False
        self.log_offset = 0

    # -- signals ---------------------------------------------------------------------------

    def on_signal(self, signum: int, _frame: object) -> None:
        self.stop_signal = signum
        self.wake.set()

    def install_signals(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self.on_signal)

    # -- children --------------------------------------------------------------------------

    def start_gunicorn(self):
        from waybox.models import Process

        cmd = [
            sys.executable, "-m", "gunicorn",
            "--config", "python:waybox.web.gunicorn_conf",
            "--bind", self.bind,
            "--workers", str(self.workers),
            "--worker-class", "gthread",
            "--threads", str(self.threads),
            "--timeout", "120",
            "--graceful-timeout", "10",
            "--keep-alive", "5",
            "--access-logfile", str(self.datadir.logs / "server-access.log"),
            "--error-logfile", "-",
            "--name", "waybox-server",
            *(["--no-control-socket"] if _has_control_socket() else []),
            "waybox.web.wsgi:application",
        ]
        log = self.datadir.logs / "server.stderr.log"
        self.log_offset = log.stat().st_size if log.exists() else 0
        return Process.launch(
            cmd, cwd=self.datadir.root, process_type=Process.Type.SERVER,
            env={"WAYBOX_DATA_DIR": str(self.datadir.root)}, log_dir=self.datadir.logs, log_name="server",
        )

    def start_orchestrator(self):
        from waybox.models import Process
        from waybox.models.process import python_cmd

        return Process.launch(
            python_cmd(f"--data-dir={self.datadir.root}", "run", "--daemon"),
            cwd=self.datadir.root, process_type=Process.Type.ORCHESTRATOR,
            env={"WAYBOX_DATA_DIR": str(self.datadir.root)}, log_dir=self.datadir.logs, log_name="orchestrator",
        )

    def forward_log(self) -> str:
        """gunicorn's own messages (not the access log) on our stderr, as they come; returns them."""
        if self.gunicorn is None:
            return ""
        try:
            with open(self.gunicorn.stderr_path, "rb") as f:
                f.seek(self.log_offset)
                data = f.read()
        except OSError:
            return ""
        if not data:
            return ""
        self.log_offset += len(data)
        text = data.decode("utf-8", errors="replace")
        sys.stderr.write(text)
        sys.stderr.flush()
        return text

    def wait_ready(self) -> bool:
        """Until gunicorn says it listens (a connect test could reach another program on the port)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        seen = ""
        while time.monotonic() < deadline and self.stop_signal is None:
            seen += self.forward_log()
            if READY_MARK in seen:
                return True
            if self.gunicorn.poll() is not None or self.gunicorn.status == "exited":
                self.forward_log()
                return False
            self.wake.wait(0.1)
        return False

    def tend_orchestrator(self) -> None:
        from waybox.engine.orchestrator import ALREADY_RUNNING, OrchestratorLock

        now = time.monotonic()
        if self.orchestrator is not None:
            if self.orchestrator.poll() is None and self.orchestrator.status != "exited":
                return
            code = self.orchestrator.exit_code
            self.orchestrator = None
            if code == ALREADY_RUNNING:
                if not self.waiting_note_shown:
                    err_console.print("another orchestrator is running for this collection; "
                                      "this server will start one when it stops")
                    self.waiting_note_shown = True
                self.next_orchestrator_try = now + ORCHESTRATOR_RETRY_S[1]
                return
            delay = ORCHESTRATOR_RETRY_S[min(self.orchestrator_failures, len(ORCHESTRATOR_RETRY_S) - 1)]
            self.orchestrator_failures += 1
            err_console.print(f"[yellow]the orchestrator exited ({code}); restarting it in {delay:.0f}s[/] "
                              f"(log: {escape(str(self.datadir.logs / 'orchestrator.stderr.log'))})")
            self.next_orchestrator_try = now + delay
            return
        if now < self.next_orchestrator_try:
            return
        lock = OrchestratorLock(self.datadir)
        if not lock.acquire():
            self.next_orchestrator_try = now + ORCHESTRATOR_RETRY_S[1]
            return
        lock.release()
        self.orchestrator = self.start_orchestrator()
        self.waiting_note_shown = False

    def run(self) -> int:
        self.install_signals()
        self.gunicorn = self.start_gunicorn()
        try:
            if not self.wait_ready():
                if self.stop_signal is None:
                    err_console.print(f"[red]the web server did not start on {escape(self.bind)}[/] "
                                      f"(see {escape(self.gunicorn.stderr_path)})")
                    return 1
                return 0
            url = f"http://{browse_host(self.host)}:{self.port}/"
            err_console.print(f"[green]waybox is serving[/] [bold]{url}[/] (data: {escape(str(self.datadir.root))})")
            self.announce_setup(url)
            if not self.want_orchestrator:
                err_console.print("orchestrator not started (--no-orchestrator): added URLs wait for `waybox run`")
            while self.stop_signal is None:
                self.forward_log()
                if self.gunicorn.poll() is not None or self.gunicorn.status == "exited":
                    code = self.gunicorn.exit_code
                    err_console.print(f"[red]the web server exited ({code})[/]")
                    return code or 1
                if self.want_orchestrator:
                    self.tend_orchestrator()
                self.wake.wait(LOOP_S)
                self.wake.clear()
            err_console.print(f"stopping (signal {self.stop_signal})…")
            return 0
        finally:
            self.shutdown()

    def announce_setup(self, url: str) -> None:
        from waybox.web import setup

        if setup.needs_setup():
            token = setup.ensure_token(self.datadir)
            err_console.print(
                f"[bold yellow]No account yet.[/] Create the first one at {url}setup/?token={token}\n"
                "  (or run `waybox manage createsuperuser` in the collection folder)"
            )
        else:
            setup.discard_token(self.datadir)

    def shutdown(self) -> None:
        """Stop gunicorn and the orchestrator (each with its grace), then sweep our tree."""
        from waybox import proc as osproc
        from waybox.engine.orchestrator import SHUTDOWN_WAIT_S
        from waybox.models import Process

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        children = [p for p in (self.gunicorn, self.orchestrator) if p is not None]
        for child in children:  # both start stopping at once
            live = child.proc if child.status == "running" else None
            if live is not None:
                osproc.signal_group(live.pid, signal.SIGTERM)
        if self.orchestrator is not None:
            self.orchestrator.terminate(grace=SHUTDOWN_WAIT_S)
        if self.gunicorn is not None:
            self.gunicorn.terminate(grace=GUNICORN_GRACE_S)
            self.forward_log()
        Process.current().kill_tree(grace=2.0)


def _has_control_socket() -> bool:
    try:
        from gunicorn.config import Config
    except ImportError:
        return False
    return "control_socket_disable" in Config().settings


def apply_migrations(app: App) -> None:
    """A collection made by an older waybox gets the tables this one needs (e.g. API tokens)."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        from django.core.management import call_command

        err_console.print(f"updating the database ({len(plan)} migration(s))…")
        call_command("migrate", interactive=False, verbosity=0)


@click.command()
@click.option("--bind", default=None, metavar="HOST:PORT",
              help="Address to listen on (default: BIND_ADDR, 127.0.0.1:8000).")
@click.option("--no-orchestrator", is_flag=True, help="Serve only; do not run `waybox run --daemon` alongside.")
@click.option("--workers", type=click.IntRange(1, 64), default=2, show_default=True, help="gunicorn processes.")
@click.option("--threads", type=click.IntRange(1, 64), default=4, show_default=True, help="Threads per process.")
@pass_app
def server(app: App, bind: str | None, no_orchestrator: bool, workers: int, threads: int) -> None:
    """Serve the web UI and REST API (and archive what is added) until stopped."""
    app.boot(process_type="server", web=True)
    bind = bind or app.config["BIND_ADDR"] or "127.0.0.1:8000"
    split_bind(bind)
    app.datadir.create_layout()
    apply_migrations(app)
    reap_orphans()
    sys.exit(Supervisor(app, bind, not no_orchestrator, workers, threads).run())


def reap_orphans() -> None:
    """Stop gunicorn trees a killed `waybox server` left behind (their supervisor is gone)."""
    from waybox.models import Machine, Process

    Process.cleanup_stale_running()
    me = Process.current()
    rows = Process.objects.filter(machine=Machine.current(), process_type=Process.Type.SERVER,
                                  status=Process.Status.RUNNING).exclude(pk=me.pk).select_related("parent")
    for row in rows:
        if "gunicorn" not in " ".join(map(str, row.cmd)):
            continue
        parent = row.parent
        if parent is not None and parent.status == Process.Status.RUNNING and parent.proc is not None:
            continue
        if row.proc is not None:
            err_console.print(f"stopping a web server left running by an earlier `waybox server` (pid {row.pid})")
            row.kill_tree(grace=5.0)


COMMANDS = [server]
