"""`waybox install`: detect every binary the plugins need, record it, install what is missing."""

from __future__ import annotations

import shutil
import sys

import click

from waybox.binaries import Found, detect
from waybox.cli import App, err_console, pass_app
from waybox.cli.output import emit, format_options

INSTALLERS = {
    "apt": lambda pkg: ["apt-get", "install", "-y", "--no-install-recommends", pkg],
    "pip": lambda pkg: [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", pkg],
    "npm": lambda pkg: ["npm", "install", "-g", "--no-audit", "--no-fund", pkg],
}


def needed_binaries(app: App) -> dict[str, tuple[dict, list[str]]]:
    """Each binary spec once, with the plugins that need it."""
    needed: dict[str, tuple[dict, list[str]]] = {}
    for plugin in app.config.registry.plugins.values():
        for spec in plugin.binaries:
            entry = needed.setdefault(spec["name"], (spec, []))
            entry[1].append(plugin.name)
    return needed


def record(found: Found, spec: dict) -> None:
    from waybox.models import Binary, Machine

    Binary.objects.update_or_create(
        machine=Machine.current(), name=found.name,
        defaults={
            "abspath": found.abspath, "version": found.version, "sha256": found.sha256,
            "binprovider": spec.get("binproviders", "").split(",")[0] if not found.ok else "env",
            "status": Binary.Status.INSTALLED if found.ok else Binary.Status.MISSING, "retry_at": None,
        },
    )


def install_one(spec: dict) -> bool:
    """Try each of the binary's providers in order; every installer runs as a tracked Process."""
    from waybox.models import Process

    for provider in [p.strip() for p in spec.get("binproviders", "").split(",") if p.strip()]:
        make = INSTALLERS.get(provider)
        if make is None or shutil.which(make("x")[0]) is None:
            continue
        package = (spec.get("packages") or {}).get(provider, spec["name"])
        err_console.print(f"installing {spec['name']} with {provider} ({package})")
        proc = Process.launch(make(package), cwd=".", process_type=Process.Type.BINARY, log_name="install")
        if proc.wait(900) == 0 and detect(spec).ok:
            return True
        err_console.print(f"[yellow]{provider} could not install {package}[/]; see {proc.stderr_path}")
    return False


@click.command(name="install")
@click.option("--missing", "install_missing", is_flag=True, help="Install missing binaries with apt, pip or npm.")
@format_options(csv_ok=False)
@pass_app
def install_command(app: App, install_missing: bool, fmt) -> None:
    """Detect every binary the plugins need (path, version, sha256) and record it."""
    app.boot()
    rows = []
    for name, (spec, plugins) in sorted(needed_binaries(app).items()):
        found = detect(spec)
        if not found.ok and install_missing and install_one(spec):
            found = detect(spec)
        record(found, spec)
        rows.append({"binary": name, "status": "installed" if found.ok else "missing", "version": found.version,
                     "path": found.abspath, "sha256": found.sha256, "plugins": plugins,
                     "install_with": spec.get("binproviders", "")})
    emit(rows, fmt, ["binary", "status", "version", "path", "plugins", "install_with"])
    missing = [r["binary"] for r in rows if r["status"] == "missing"]
    if missing:
        err_console.print(f"missing: {', '.join(missing)}; their plugins will be skipped "
                          "(`waybox install --missing` installs them)")


COMMANDS = [install_command]
