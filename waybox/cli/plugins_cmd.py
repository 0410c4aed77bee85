"""`waybox plugins`: every plugin, its hooks (step, background, exclusive) and config keys."""

from __future__ import annotations

import click

from waybox.cli import App, err_console, pass_app
from waybox.cli.output import emit, format_options


def plugin_rows(app: App) -> list[dict]:
    config = app.config
    rows = []
    for plugin in sorted(config.registry.plugins.values(), key=lambda p: p.name):
        keys = sorted(k for k, o in config.options.items() if o.plugin == plugin.name)
        rows.append({
            "plugin": plugin.name,
            "path": str(plugin.path),
            "enabled": config.plugin_enabled(plugin.name),
            "exclusive": plugin.exclusive,
            "binaries": [b["name"] for b in plugin.binaries],
            "config_keys": keys,
            "hooks": [
                {"name": h.name, "model": h.model, "step": h.step, "background": h.background,
                 "numbered": h.numbered}
                for h in plugin.hooks
            ],
        })
    return rows


@click.command(name="plugins")
@format_options(csv_ok=False)
@pass_app
def plugins_command(app: App, fmt) -> None:
    """List plugins with their hooks, steps, exclusive resources, enabled state and config keys."""
    rows = plugin_rows(app)
    for problem in app.config.registry.problems:
        err_console.print(f"[red]broken plugin skipped:[/] {problem}")
    if fmt:
        emit(rows, fmt, [])
        return
    table_rows = []
    for row in rows:
        for hook in row["hooks"] or [{"name": "(no hooks)", "step": "", "background": False, "model": ""}]:
            table_rows.append({
                "plugin": row["plugin"],
                "enabled": "yes" if row["enabled"] else "no",
                "hook": hook["name"],
                "step": hook["step"],
                "bg": "bg" if hook["background"] else "",
                "exclusive": row["exclusive"] or "",
                "config keys": ", ".join(row["config_keys"]),
            })
    emit(table_rows, None, ["plugin", "enabled", "hook", "step", "bg", "exclusive", "config keys"])


COMMANDS = [plugins_command]
