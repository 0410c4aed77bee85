"""`waybox config`: every key with its value and where the value came from."""

from __future__ import annotations

import click
import tomlkit

from waybox.cli import App, err_console, pass_app
from waybox.cli.output import emit, format_options
from waybox.config import ConfigError, canonical_names, coerce, is_secret_key, to_env_string


def set_in_file(app: App, assignments: tuple[str, ...]) -> None:
    """Validate every KEY=VALUE first, then write them all to waybox.toml, keeping comments."""
    config = app.config
    names = canonical_names(config.options)
    path = app.datadir.config_file
    doc = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    updates = {}
    for assignment in assignments:
        raw_key, sep, raw_value = assignment.partition("=")
        if not sep:
            raise click.BadParameter(f"{assignment!r}: expected KEY=VALUE", param_hint="--set")
        key = names.get(raw_key.strip().upper())
        if key is None:
            raise ConfigError(f"unknown config key {raw_key.strip()!r} in --set")
        updates[key] = coerce(config.options[key], raw_value, "--set")
    for key, value in updates.items():
        for alias in config.options[key].aliases:
            doc.pop(alias, None)
        doc[key] = value
    app.datadir.root.mkdir(parents=True, exist_ok=True)
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    for key, value in updates.items():
        err_console.print(f"set {key} = {value!r} in {path}")


@click.command(name="config")
@click.option("--get", "get_key", metavar="KEY", help="Print one resolved value.")
@click.option("--set", "assignments", metavar="KEY=VALUE", multiple=True, help="Write to waybox.toml.")
@click.option("--show-secrets", is_flag=True, help="Do not hide values of secret-looking keys.")
@format_options()
@pass_app
def config_command(app: App, get_key, assignments, show_secrets, fmt) -> None:
    """Show every config key, its value and its source; or get/set one."""
    if assignments:
        set_in_file(app, assignments)
        return
    config = app.config
    if get_key:
        key = canonical_names(config.options).get(get_key.upper())
        if key is None:
            raise ConfigError(f"unknown config key {get_key!r}")
        click.echo(to_env_string(config[key]))
        return
    rows = []
    for key in sorted(config.options):
        value = config[key]
        if is_secret_key(key) and value and not show_secrets:
            value = "********"
        option = config.options[key]
        rows.append({
            "key": key,
            "value": value if fmt in ("json", "jsonl") else to_env_string(value),
            "source": config.sources[key],
            "type": option.type,
            "plugin": option.plugin or "",
            "description": option.description,
        })
    emit(rows, fmt, ["key", "value", "source", "plugin"] if not fmt else list(rows[0]))


COMMANDS = [config_command]
