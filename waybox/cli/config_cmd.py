"""`waybox config`: every key with its value and where the value came from."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import click
import tomlkit
from rich.markup import escape

from waybox.cli import App, err_console, pass_app
from waybox.cli.output import emit, format_options
from waybox.config import Config, ConfigError, canonical_names, coerce, is_secret_key, load_config, to_env_string


def set_in_file(app: App, assignments: tuple[str, ...]) -> None:
    """Validate every KEY=VALUE first, then write them all to waybox.toml, keeping comments."""
    config = app.config
    path = app.datadir.config_file
    updates = {}
    for assignment in sorted(assignments, key=lambda a: not a.upper().startswith("PLUGIN_DIRS=")):
        key, value = parse_assignment(config, assignment)
        updates[key] = value
        if key == "PLUGIN_DIRS":  # the new folders' plugins bring keys the rest may set
            config = load_config(app.datadir, env={**os.environ, "PLUGIN_DIRS": value})
    doc = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    for key, value in updates.items():
        spellings = {key, *config.options[key].aliases}
        _remove_key(doc, spellings)[key] = value
    app.datadir.root.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, tomlkit.dumps(doc))
    for key, value in updates.items():
        shown = "********" if is_secret_key(key) and value else repr(value)
        err_console.print(f"set {key} = {escape(shown)} in {escape(str(path))}")
        if config.sources[key] in ("environment",):
            err_console.print(f"[yellow]note:[/] {key} is also set in the environment, which wins over {path.name}")


def parse_assignment(config: Config, assignment: str) -> tuple[str, Any]:
    """`KEY=VALUE` (KEY may be an alias, any case) as the canonical key and its typed value."""
    raw_key, sep, raw_value = assignment.partition("=")
    if not sep:
        raise click.BadParameter(f"{assignment!r}: expected KEY=VALUE", param_hint="--set")
    key = canonical_names(config.options).get(raw_key.strip().upper())
    if key is None:
        raise ConfigError(f"unknown config key {raw_key.strip()!r} in --set{_hint(config, raw_key)}")
    return key, coerce(config.options[key], raw_value, "--set", raw_key.strip())


def _hint(config: Config, raw_key: str) -> str:
    close = difflib.get_close_matches(raw_key.strip().upper(), list(canonical_names(config.options)), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _remove_key(doc: tomlkit.TOMLDocument, spellings: set[str]) -> Any:
    """Delete every spelling of a key, in any table; return the table it was in (else the top).

    Otherwise a `[section]` copy of the key would keep winning over the line `--set` writes.
    """
    target = None
    for table in [doc, *(v for v in doc.values() if isinstance(v, dict))]:
        for name in [k for k in table if str(k).upper() in spellings]:
            target = table if target is None else target
            del table[name]
    return doc if target is None else target


def _write_atomic(path: Path, text: str) -> None:
    """A crash while writing leaves the old waybox.toml, never half a new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@click.command(name="config")
@click.option("--get", "get_key", metavar="KEY", help="Print one resolved value.")
@click.option("--set", "assignments", metavar="KEY=VALUE", multiple=True, help="Write to waybox.toml.")
@click.option("--show-secrets", is_flag=True, help="Do not hide values of secret-looking keys.")
@format_options()
@pass_app
def config_command(
    app: App, get_key: str | None, assignments: tuple[str, ...], show_secrets: bool, fmt: str | None
) -> None:
    """Show every config key, its value and its source; or get/set one."""
    if assignments:
        app.require_collection()  # never drop a waybox.toml into whatever folder we are in
        set_in_file(app, assignments)
        return
    config = app.config
    if get_key:
        key = canonical_names(config.options).get(get_key.strip().upper())
        if key is None:
            raise ConfigError(f"unknown config key {get_key!r}{_hint(config, get_key)}")
        click.echo(to_env_string(config[key]))
        return
    rows = config_rows(config, show_secrets=show_secrets, typed=fmt in ("json", "jsonl"))
    emit(rows, fmt, ["key", "value", "source", "plugin"] if not fmt else list(rows[0]))


def config_rows(config: Config, *, show_secrets: bool, typed: bool) -> list[dict[str, Any]]:
    """One row per key; JSON keeps typed values, the table and CSV show them as hooks see them."""
    rows = []
    for key in sorted(config.options):
        value = config[key]
        if is_secret_key(key) and value and not show_secrets:
            value = "********"
        option = config.options[key]
        rows.append({
            "key": key,
            "value": value if typed else to_env_string(value),
            "source": config.sources[key],
            "type": option.type,
            "plugin": option.plugin or "",
            "description": option.description,
        })
    return rows


COMMANDS = [config_command]
