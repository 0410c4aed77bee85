"""`waybox process list | tree | kill`: the Process rows, as a list or as the tree they form."""

from __future__ import annotations

import click
from django.utils import timezone
from rich.markup import escape

from waybox.cli import App, err_console, out_console, pass_app
from waybox.cli.output import emit, format_options

PROCESS_COLUMNS = ["id", "type", "status", "pid", "exit_code", "started_at", "duration", "cmd"]


def duration(p) -> str:
    if not p.started_at:
        return ""
    end = p.ended_at or timezone.now()
    return f"{(end - p.started_at).total_seconds():.1f}s"


def process_row(p) -> dict:
    return {
        "id": str(p.id),
        "type": p.process_type,
        "status": p.status,
        "pid": p.pid,
        "exit_code": p.exit_code,
        "parent_id": str(p.parent_id) if p.parent_id else None,
        "machine_id": str(p.machine_id),
        "started_at": p.started_at,
        "ended_at": p.ended_at,
        "duration": duration(p),
        "cmd": " ".join(p.cmd) if isinstance(p.cmd, list) else str(p.cmd),
        "pwd": p.pwd,
        "env": p.env,
        "timeout": p.timeout,
        "stdout_path": p.stdout_path,
        "stderr_path": p.stderr_path,
    }


def running_processes():
    """Rows marked running whose process really is alive (stale rows are cleaned first)."""
    from waybox.models import Process

    Process.cleanup_stale_running()
    return [p for p in Process.objects.filter(status=Process.Status.RUNNING).order_by("created_at") if p.is_running]


@click.group(name="process")
def process_group() -> None:
    """Every OS process waybox ran: list, tree, kill."""


@process_group.command(name="list")
@click.option("--status", type=click.Choice(["queued", "running", "exited"]))
@click.option("--type", "ptype", type=click.Choice(["cli", "orchestrator", "worker", "hook", "binary", "server"]))
@click.option("--running", is_flag=True, help="Only processes alive now (verified against the OS).")
@click.option("--limit", type=click.IntRange(min=1), default=200, show_default=True)
@format_options()
@pass_app
def process_list(app: App, status, ptype, running, limit, fmt) -> None:
    """List Process rows, newest first."""
    app.boot()
    from waybox.models import Process

    if running:
        rows = running_processes()
        rows = [p for p in rows if not ptype or p.process_type == ptype][:limit]
    else:
        qs = Process.objects.all().order_by("-created_at")
        if status:
            qs = qs.filter(status=status)
        if ptype:
            qs = qs.filter(process_type=ptype)
        rows = list(qs[:limit])
    emit([process_row(p) for p in rows], fmt, PROCESS_COLUMNS)


def render_tree(root, children_of, lines, prefix="", last=True, top=True) -> None:
    """Rich markup lines; the command is escaped, since a `[...]` in it is not markup."""
    connector = "" if top else ("└── " if last else "├── ")
    cmd = " ".join(root.cmd)[:100] if isinstance(root.cmd, list) else str(root.cmd)
    code = "" if root.exit_code is None else f" exit={root.exit_code}"
    lines.append(
        f"{prefix}{connector}[bold]{root.process_type}[/] pid={root.pid} {root.status}{code} "
        f"{duration(root)}  [dim]{escape(cmd)}[/]"
    )
    kids = children_of.get(root.pk, [])
    child_prefix = prefix + ("" if top else ("    " if last else "│   "))
    for i, kid in enumerate(kids):
        render_tree(kid, children_of, lines, child_prefix, i == len(kids) - 1, top=False)


@process_group.command(name="tree")
@click.argument("process_id", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the tree as nested JSON.")
@pass_app
def process_tree(app: App, process_id, as_json) -> None:
    """Show the process tree (of one process, or every root when no ID is given)."""
    app.boot()
    from waybox.models import Process

    if process_id:
        node = Process.objects.filter(pk=process_id).first()
        if node is None:
            raise click.ClickException(f"no process with id {process_id}")
        roots = [node]
        rows = [node, *node.get_descendants()]
    else:
        rows = list(Process.objects.order_by("created_at"))
        ids = {r.pk for r in rows}
        roots = [r for r in rows if r.parent_id not in ids]
    children_of: dict = {}
    for row in rows:
        children_of.setdefault(row.parent_id, []).append(row)
    if as_json:
        import json

        def nested(p):
            return {**process_row(p), "children": [nested(c) for c in children_of.get(p.pk, [])]}

        click.echo(json.dumps([nested(r) for r in roots], indent=2, default=str))
        return
    lines: list[str] = []
    for root in roots:
        render_tree(root, children_of, lines)
    for line in lines:
        out_console.print(line)


@process_group.command(name="kill")
@click.argument("process_id")
@click.option("--grace", type=float, default=5.0, show_default=True, help="Seconds between SIGTERM and SIGKILL.")
@pass_app
def process_kill(app: App, process_id, grace) -> None:
    """Stop a process and all its descendants.

    Also when the process itself has ended: daemons it double-forked may still be running.
    """
    app.boot()
    from waybox.models import Machine, Process

    row = Process.objects.filter(pk=process_id).first()
    if row is None:
        raise click.ClickException(f"no process with id {process_id}")
    if row.machine_id != Machine.current().id:
        raise click.ClickException(f"process {process_id} ran on another machine ({row.machine}); run this there")
    was_running = row.proc is not None
    if not was_running:
        row.poll()
        err_console.print(f"process {process_id} is not running (pid {row.pid} is gone or belongs to another process)")
    stopped = row.kill_tree(grace)
    if was_running:
        err_console.print(f"[green]stopped[/] {process_id} and its descendants ({stopped} processes)")
    elif stopped:
        err_console.print(f"[green]stopped[/] {stopped} leftover descendants of {process_id}")


COMMANDS = [process_group]
