"""Finding plugins and their hooks on disk.

A plugin is a folder with an optional `config.json` (JSON Schema of its config keys plus
the top-level `exclusive` key), an optional `binaries.jsonl` and hook scripts named
`on_<Model>__<NN>_<description>[.bg].<ext>`. This module only reads files: it never runs a
hook and never touches the database, so config resolution can use it before Django starts.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

BUILTIN_PLUGINS_DIR = Path(__file__).parent / "plugins"
HOOK_MODELS = ("Crawl", "CrawlEnd", "Snapshot")
HOOK_RE = re.compile(
    r"^on_(?P<model>[A-Za-z]+)__(?:(?P<num>\d{2})_)?(?P<desc>[A-Za-z0-9_\-]+)"
    r"(?P<flags>(?:\.[a-z]+)*)\.(?P<ext>[A-Za-z0-9]+)$"
)
INTERPRETERS = {"py": [sys.executable], "js": ["node"], "sh": ["bash"]}
PLUGIN_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


class PluginError(Exception):
    """A plugin that cannot be used; the message names the file and the reason."""


@dataclass(frozen=True)
class Hook:
    plugin: str
    path: Path
    model: str
    step: int
    order: str
    background: bool
    numbered: bool

    @property
    def name(self) -> str:
        return self.path.name

    def argv(self) -> list[str]:
        """The command that runs this hook, interpreter first."""
        ext = self.path.suffix.lstrip(".")
        return [*INTERPRETERS.get(ext, []), str(self.path)]


@dataclass
class Plugin:
    name: str
    path: Path
    schema: dict = field(default_factory=dict)
    exclusive: str | None = None
    binaries: list[dict] = field(default_factory=list)
    hooks: list[Hook] = field(default_factory=list)

    @property
    def prefix(self) -> str:
        return self.name.upper()

    def hooks_for(self, model: str) -> list[Hook]:
        return [h for h in self.hooks if h.model == model]


@dataclass
class Registry:
    plugins: dict[str, Plugin]
    problems: list[str]
    warnings: list[str]

    def hooks_for(self, model: str, enabled: set[str] | None = None) -> list[Hook]:
        """Every hook of `model` in launch order: by filename, then by plugin."""
        hooks = [
            h for p in self.plugins.values() if enabled is None or p.name in enabled for h in p.hooks_for(model)
        ]
        return sorted(hooks, key=lambda h: (h.step, h.name, h.plugin))


def parse_hook_name(plugin: str, path: Path) -> Hook:
    m = HOOK_RE.match(path.name)
    if not m:
        raise PluginError(f"{path}: hook name does not parse (expected on_<Model>__<NN>_<name>[.bg].<ext>)")
    if m["model"] not in HOOK_MODELS:
        raise PluginError(f"{path}: unknown model {m['model']!r} in hook name (expected one of {HOOK_MODELS})")
    ext = m["ext"]
    if ext not in INTERPRETERS and not os.access(path, os.X_OK):
        raise PluginError(f"{path}: no interpreter for .{ext} files and the file is not executable")
    num = m["num"]
    return Hook(
        plugin=plugin,
        path=path,
        model=m["model"],
        step=int(num[0]) if num else 9,
        order=num or "99",
        background=".bg." in path.name,
        numbered=num is not None,
    )


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PluginError(f"{path}: not valid JSON: {err}") from err
    if not isinstance(data, dict):
        raise PluginError(f"{path}: expected a JSON object at the top level")
    return data


def _read_binaries(path: Path) -> list[dict]:
    binaries = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise PluginError(f"{path}:{lineno}: not valid JSON: {err}") from err
        if not isinstance(record, dict) or not record.get("name"):
            raise PluginError(f"{path}:{lineno}: a binary record needs a 'name'")
        binaries.append(record)
    return binaries


def load_plugin(path: Path) -> Plugin:
    name = path.name
    if not PLUGIN_NAME_RE.match(name):
        raise PluginError(f"{path}: plugin folder names are lower_case letters, digits and _")
    plugin = Plugin(name=name, path=path)
    if (path / "config.json").exists():
        plugin.schema = _read_json(path / "config.json")
        exclusive = plugin.schema.get("exclusive")
        if exclusive is not None and not isinstance(exclusive, str):
            raise PluginError(f"{path / 'config.json'}: 'exclusive' must be a string")
        plugin.exclusive = exclusive
        if not isinstance(plugin.schema.get("properties", {}), dict):
            raise PluginError(f"{path / 'config.json'}: 'properties' must be an object")
    if (path / "binaries.jsonl").exists():
        plugin.binaries = _read_binaries(path / "binaries.jsonl")
    for entry in sorted(path.iterdir()):
        if entry.is_file() and entry.name.startswith("on_"):
            plugin.hooks.append(parse_hook_name(name, entry))
    return plugin


def plugin_dirs(data_plugins: Path | None, extra: str = "") -> list[Path]:
    """Built-in plugins first, then the collection's, then PLUGIN_DIRS: later ones win by name."""
    dirs = [BUILTIN_PLUGINS_DIR]
    if data_plugins is not None:
        dirs.append(data_plugins)
    dirs += [Path(p).expanduser() for p in extra.split(":") if p.strip()]
    return dirs


def discover(dirs: list[Path]) -> Registry:
    plugins: dict[str, Plugin] = {}
    problems: list[str] = []
    warnings: list[str] = []
    for root in dirs:
        if not root.is_dir():
            if root != BUILTIN_PLUGINS_DIR:
                warnings.append(f"{root}: plugin folder does not exist")
            continue
        for entry in sorted(root.iterdir()):
            if not entry.is_dir() or entry.name.startswith((".", "_")):
                continue
            try:
                plugin = load_plugin(entry)
            except PluginError as err:
                problems.append(str(err))
                continue
            except OSError as err:
                problems.append(f"{entry}: cannot be read: {err}")
                continue
            for hook in plugin.hooks:
                if not hook.numbered:
                    warnings.append(f"{hook.path}: hook has no step number; it runs in step 9")
            plugins[plugin.name] = plugin
    return Registry(plugins=plugins, problems=problems, warnings=warnings)
