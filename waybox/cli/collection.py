"""Commands about the collection as a whole: init, status, version."""

from __future__ import annotations

import platform
import sqlite3
import sys

import click
from rich.markup import escape

from waybox import __version__
from waybox.cli import App, err_console, pass_app
from waybox.cli.output import dumps, emit, emit_table, format_options

CONFIG_HEADER = """\
# waybox collection config. Keys are UPPER_CASE; `waybox config` lists them all.
# Precedence: defaults < this file < environment < per-Crawl < per-Snapshot overrides.
"""


def _refuse_foreign_folder(app: App, force: bool) -> None:
    """Never scatter archive/, logs/ and a database among someone's own files by accident."""
    root = app.datadir.root
    if root.exists() and not root.is_dir():
        raise click.ClickException(f"{root} is a file, not a folder")
    if not root.exists() or app.datadir.is_collection() or force:
        return
    entries = sorted(p.name for p in root.iterdir())
    if entries:
        shown = ", ".join(entries[:5]) + (" ..." if len(entries) > 5 else "")
        raise click.ClickException(
            f"{root} is not empty and is not a waybox collection ({shown}); "
            "choose an empty folder or pass --force"
        )


@click.command()
@click.option("--force", is_flag=True, help="Initialise even in a non-empty folder.")
@click.option("--rebuild", is_flag=True, help="Recreate database rows from archive/*/index.json.")
@pass_app
def init(app: App, force: bool, rebuild: bool) -> None:
    """Create the collection layout and database (safe to run again)."""
    _refuse_foreign_folder(app, force)
    datadir = app.datadir
    datadir.create_layout()
    if not datadir.config_file.exists():
        datadir.config_file.write_text(CONFIG_HEADER)
    datadir.secret_key()
    app.boot(require=True, need_schema=False, web=True)
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    app.register_process("cli")
    err_console.print(f"[green]waybox collection ready[/] in {escape(str(datadir.root))}")
    if rebuild:
        from waybox.archive import rebuild_from_archive

        report = rebuild_from_archive(datadir)
        for error in report.errors:
            err_console.print(f"[red]skipped:[/] {escape(error)}")
        err_console.print(
            f"rebuilt {report.snapshots} snapshots, {report.results} results, "
            f"{report.crawls} crawls recreated; {len(report.errors)} folders skipped"
        )
        if report.errors:
            sys.exit(1)


def _dir_size(path) -> int:
    return path.stat().st_size if path.exists() else 0


def collect_status(app: App) -> dict:
    from django.db.models import Count, Sum

    from waybox.cli.process_cmd import process_row, running_processes
    from waybox.models import ArchiveResult, Binary, Crawl, Process, Snapshot

    counts = {}
    for model in (Crawl, Snapshot, ArchiveResult, Process, Binary):
        rows = model.objects.order_by().values("status").annotate(n=Count("*"))  # "*": the status index covers it
        counts[model.__name__] = {r["status"]: r["n"] for r in rows}
    db = app.datadir.db_file
    disk = {
        "archive_bytes_indexed": Snapshot.objects.aggregate(s=Sum("output_size"))["s"] or 0,
        "database_bytes": sum(_dir_size(db.with_name(db.name + sfx)) for sfx in ("", "-wal", "-shm")),
    }
    running = [process_row(p) for p in running_processes()]
    return {"data_dir": str(app.datadir.root), "counts": counts, "disk": disk, "running_processes": running}


@click.command()
@format_options(csv_ok=False)
@pass_app
def status(app: App, fmt: str | None) -> None:
    """Counts by status for each model, disk used and running processes."""
    app.boot()
    data = collect_status(app)
    if fmt:
        click.echo(dumps(data, indent=2 if fmt == "json" else None))
        return
    rows = [
        {"model": model, **{"total": sum(c.values())}, "by status": ", ".join(f"{k}={v}" for k, v in c.items())}
        for model, c in data["counts"].items()
    ]
    emit_table(rows, ["model", "total", "by status"], title=f"waybox collection {data['data_dir']}")
    emit_table([{"what": k, "bytes": v} for k, v in data["disk"].items()], ["what", "bytes"], title="disk")
    emit_table(data["running_processes"], ["id", "type", "pid", "started_at", "cmd"], title="running processes")


def binary_versions(app: App) -> list[dict]:
    from waybox.binaries import detect

    rows = []
    registry = app.config.registry
    seen = set()
    for plugin in registry.plugins.values() if registry else ():
        for spec in plugin.binaries:
            if spec["name"] in seen:
                continue
            seen.add(spec["name"])
            found = detect(spec)
            rows.append({"binary": spec["name"], "version": found.version, "path": found.abspath})
    return rows


@click.command()
@format_options(csv_ok=False)
@pass_app
def version(app: App, fmt: str | None) -> None:
    """Versions of waybox, Python, Django, SQLite and every binary the plugins need."""
    import django

    rows = [
        {"component": "waybox", "version": __version__, "path": str(sys.modules["waybox"].__file__)},
        {"component": "python", "version": platform.python_version(), "path": sys.executable},
        {"component": "django", "version": django.get_version(), "path": ""},
        {"component": "sqlite", "version": sqlite3.sqlite_version, "path": ""},
    ]
    rows += [{"component": r["binary"], "version": r["version"] or "not found", "path": r["path"]}
             for r in binary_versions(app)]
    emit(rows, fmt, ["component", "version", "path"])


COMMANDS = [init, status, version]
