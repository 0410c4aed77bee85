"""`waybox manage ...`: Django's management commands on this collection."""

import click

from waybox.cli import App, pass_app


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    short_help="Run a Django management command on this collection.",
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@pass_app
def manage(app: App, args: tuple[str, ...]) -> None:
    """Run a Django management command (e.g. `waybox manage createsuperuser`)."""
    app.boot(need_schema=False, web=True)
    from django.core.management import execute_from_command_line

    execute_from_command_line(["waybox manage", *args])


COMMANDS = [manage]
