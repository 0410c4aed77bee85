"""The `waybox` command.

Machine-readable output goes alone to stdout; progress and logs go to stderr. Every command
that touches a collection goes through `App.boot()`, which starts Django and records the
command as a Process row.
"""

from __future__ import annotations

import importlib
import os
import sys
from functools import cached_property

import click
from rich.console import Console
from rich.markup import escape

from waybox.config import Config, ConfigError, load_config
from waybox.datadir import DataDir, resolve_data_dir

# soft_wrap: an error is one line however narrow the terminal (or a pipe's 80 columns) is
err_console = Console(stderr=True, highlight=False, soft_wrap=True)
out_console = Console(highlight=False, soft_wrap=True)


class App:
    """What a command needs: the data directory, its config, and a started Django."""

    def __init__(self, data_dir: str | None):
        try:
            self.datadir: DataDir = resolve_data_dir(data_dir)
        except ValueError as err:
            raise click.ClickException(str(err)) from None
        self.booted = False

    @cached_property
    def config(self) -> Config:
        config = load_config(self.datadir)
        for warning in config.warnings:
            err_console.print(f"[yellow]warning:[/] {escape(warning)}")
        return config

    def require_collection(self) -> None:
        if not self.datadir.is_collection():
            raise click.ClickException(
                f"{self.datadir.root} is not a waybox collection: run `waybox init` there, "
                "or pass --data-dir / set WAYBOX_DATA_DIR"
            )

    def boot(self, *, require: bool = True, process_type: str = "cli", need_schema: bool = True,
             web: bool = False) -> None:
        """Start Django on this collection and register this command as a Process.

        `need_schema=False` is for commands that create the tables (`init`, `manage migrate`);
        every other command stops with one line instead of a "no such table" traceback.
        `web=True` (the server, and whatever migrates) loads the admin, sessions and API apps too.
        """
        if self.booted:
            return
        if require:
            self.require_collection()
        from waybox.settings import setup_django

        setup_django(self.datadir, self.config["DATABASE_URL"], web=web)
        self.booted = True
        if self.database_ready():
            self.register_process(process_type)
        elif need_schema:
            raise click.ClickException(
                f"the database of {self.datadir.root} is missing or not initialised: run `waybox init` "
                "(add --rebuild to recover Snapshots from the archive folders)"
            )

    def database_ready(self) -> bool:
        """True when waybox's tables exist (checked before SQLite creates an empty file)."""
        if not self.config["DATABASE_URL"] and not self.datadir.db_file.exists():
            return False
        from django.db import OperationalError, connection

        try:
            return "waybox_process" in connection.introspection.table_names()
        except OperationalError as err:
            raise click.ClickException(f"cannot open the database: {err}") from None

    def register_process(self, process_type: str) -> None:
        from waybox.models.process import register_entry_point

        register_entry_point(process_type)


pass_app = click.make_pass_decorator(App)


# Each command's module, imported only when that command runs: `waybox list` does not pay for
# the import parsers, the server or the installer.
COMMAND_MODULES = {
    "add": "add", "config": "config_cmd", "init": "collection", "install": "install_cmd", "list": "listing",
    "manage": "manage", "plugins": "plugins_cmd", "process": "process_cmd", "remove": "listing",
    "run": "engine_cmd", "search": "search_cmd", "server": "server_cmd", "status": "collection",
    "token": "token_cmd", "update": "engine_cmd", "version": "collection", "worker": "engine_cmd",
}


class WayboxGroup(click.Group):
    """Loads commands lazily, and turns the errors a user can cause into one clear line and a
    non-zero exit."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        module_name = COMMAND_MODULES.get(name)
        if module_name is None:
            return None
        module = importlib.import_module(f"waybox.cli.{module_name}")
        return next(c for c in module.COMMANDS if c.name == name)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ConfigError as err:
            err_console.print(f"[red]config error:[/] {escape(str(err))}")
            sys.exit(2)
        except BrokenPipeError:
            # stdout closed early (e.g. `waybox list | head`): not an error worth a trace
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)


@click.group(cls=WayboxGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Collection folder (default: $WAYBOX_DATA_DIR, else the current directory).",
)
@click.version_option(package_name="waybox", message="waybox %(version)s")
@click.pass_context
def main(ctx: click.Context, data_dir: str | None) -> None:
    """waybox: a self-hosted web archiver."""
    ctx.obj = App(data_dir)


def run() -> None:
    """The console entry point: runs a command and records how this process ended."""
    try:
        main(standalone_mode=True)
    except SystemExit as exit_:
        _record_exit(exit_.code)
        raise
    except BaseException:
        _record_exit(1)
        raise


def _record_exit(code: object) -> None:
    from django.conf import settings

    if not settings.configured:
        return
    from waybox.models.process import register_exit

    try:
        register_exit(code)
    except Exception as err:  # the database may be what failed; the exit code must still go out
        err_console.print(f"[yellow]warning:[/] could not record exit: {escape(str(err))}")
