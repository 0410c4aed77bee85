"""Config resolution: one function that turns layered sources into typed values.

Precedence, lowest first: defaults (global schema and each plugin's config.json) <
waybox.toml < environment < per-Crawl overrides < per-Snapshot overrides.

A key set explicitly in any layer beats an `x-fallback`: `WGET_TIMEOUT` set in waybox.toml
wins over `TIMEOUT` set in the environment, because the more specific key says more. Only an
unset key takes its fallback's value. Aliases (`x-aliases`) are other names of the same key;
where a layer sets both, the canonical name wins.

This module does not import Django: the database settings themselves come from here.
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from waybox import plugin_registry
from waybox.datadir import DataDir

GLOBAL_SCHEMA_FILE = Path(__file__).parent / "config_schema.json"
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "COOKIE", "AUTH")
TRUE_WORDS = {"1", "true", "yes", "on", "y"}
FALSE_WORDS = {"0", "false", "no", "off", "n", ""}


class ConfigError(ValueError):
    """A config value or key that cannot be used; the message names key, value and source."""


@dataclass(frozen=True)
class Option:
    key: str
    schema: dict
    plugin: str | None = None

    @property
    def type(self) -> str:
        t = self.schema.get("type", "string")
        if isinstance(t, list):
            t = next((x for x in t if x != "null"), "string")
        return t

    @property
    def default(self) -> Any:
        return self.schema.get("default")

    @property
    def aliases(self) -> tuple[str, ...]:
        return tuple(self.schema.get("x-aliases", ()))

    @property
    def fallback(self) -> str | None:
        return self.schema.get("x-fallback")

    @property
    def description(self) -> str:
        return self.schema.get("description", "")


def is_secret_key(key: str) -> bool:
    upper = key.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def coerce(option: Option, value: Any, source: str, name: str | None = None) -> Any:
    """Bring a raw value (a string from env or the CLI, or a TOML value) to the option's type.

    The error names the key as the user wrote it (an alias too), the value and its source,
    because that is what they have to find and fix.
    """
    label = option.key if not name or name.upper() == option.key else f"{name} (alias of {option.key})"
    shown = "'********'" if is_secret_key(option.key) else repr(value)  # stderr ends up in logs
    try:
        value = _coerce_type(option.type, value)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{label}={shown} (from {source}): expected {_TYPE_WORDS.get(option.type, option.type)}"
                          f"{f', {err}' if str(err) else ''}") from None
    validator_schema = {k: v for k, v in option.schema.items() if not k.startswith("x-") and k != "default"}
    errors = sorted(jsonschema.Draft202012Validator(validator_schema).iter_errors(value), key=str)
    if errors:
        message = errors[0].message if not is_secret_key(option.key) else f"fails {errors[0].validator!r}"
        raise ConfigError(f"{label}={shown} (from {source}): {message}")
    return value


_TYPE_WORDS = {
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "string": "text",
    "array": "a list",
    "object": "a JSON object",
}


def _coerce_type(kind: str, value: Any) -> Any:
    """Parse `value` as `kind`; a ValueError's message says what would have been accepted."""
    if kind == "boolean":
        return _to_bool(value)
    if kind in ("integer", "number"):
        return _to_number(kind, value)
    if kind == "array":
        return _to_list(value)
    if kind == "object":
        return _to_object(value)
    if not isinstance(value, str):
        raise ValueError(f"got {_toml_type(value)}")
    return value


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    word = str(value).strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError("use true/false, yes/no, on/off or 1/0")


def _to_number(kind: str, value: Any) -> int | float:
    if isinstance(value, bool):
        raise ValueError(f"got {_toml_type(value)}")
    if kind == "integer" and isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise ValueError("")
    if isinstance(value, int) or (kind == "number" and isinstance(value, float)):
        return value
    if not isinstance(value, str):
        raise ValueError(f"got {_toml_type(value)}")
    try:
        return int(value.strip()) if kind == "integer" else float(value.strip())
    except ValueError:
        raise ValueError("") from None


def _to_list(value: Any) -> list:
    if isinstance(value, list):
        return value
    text = str(value).strip()
    if not text.startswith("["):
        return [part.strip() for part in text.split(",") if part.strip()]
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not valid JSON: {err.msg}") from None
    if not isinstance(parsed, list):
        raise ValueError("not a list")
    return parsed


def _to_object(value: Any) -> dict:
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(str(value))
    except json.JSONDecodeError as err:
        raise ValueError(f"not valid JSON: {err.msg}") from None
    if not isinstance(parsed, dict):
        raise ValueError("not an object")
    return parsed


def _toml_type(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "a table"}
    return names.get(type(value), type(value).__name__)


def to_env_string(value: Any) -> str:
    """How a typed value is handed to hooks in their environment."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, list | dict):
        return json.dumps(value)
    return "" if value is None else str(value)


def build_options(registry: plugin_registry.Registry | None) -> dict[str, Option]:
    """Global keys, then every plugin's keys with `<PLUGIN>_ENABLED` and `<PLUGIN>_TIMEOUT` implied."""
    global_schema = json.loads(GLOBAL_SCHEMA_FILE.read_text())
    options = {key: Option(key, schema) for key, schema in global_schema["properties"].items()}
    for plugin in (registry.plugins.values() if registry else ()):
        implied = {
            f"{plugin.prefix}_ENABLED": {
                "type": "boolean",
                "default": True,
                "x-aliases": [f"SAVE_{plugin.prefix}"],
                "description": f"Run the {plugin.name} plugin.",
            },
            f"{plugin.prefix}_TIMEOUT": {
                "type": "integer",
                "minimum": 1,
                "x-fallback": "TIMEOUT",
                "description": f"Seconds each {plugin.name} hook may run.",
            },
        }
        declared = plugin.schema.get("properties", {})
        for key, schema in {**implied, **declared}.items():
            options[key] = Option(key, schema, plugin=plugin.name)
    return options


@dataclass
class Config:
    options: dict[str, Option]
    values: dict[str, Any]
    sources: dict[str, str]
    registry: plugin_registry.Registry | None = None
    warnings: list[str] = field(default_factory=list)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def plugin_enabled(self, name: str) -> bool:
        allowed = {p.strip().lower() for p in self.values.get("PLUGINS", "").split(",") if p.strip()}
        if allowed and name not in allowed:
            return False
        return bool(self.values.get(f"{name.upper()}_ENABLED", True))

    def enabled_plugins(self) -> set[str]:
        if self.registry is None:
            return set()
        return {name for name in self.registry.plugins if self.plugin_enabled(name)}

    def hook_env(self, plugin: str) -> dict[str, str]:
        """The global keys and the plugin's own keys, as strings, for a hook's environment."""
        return {
            key: to_env_string(value)
            for key, value in self.values.items()
            if self.options[key].plugin in (None, plugin)
        }

    def overrides_layer(self, raw: Mapping[str, Any] | None, source: str) -> Config:
        """This config with one more layer on top (a Crawl's or a Snapshot's overrides)."""
        layers = [*self._layers, (source, dict(raw or {}), True)]
        return resolve(self.options, layers, self.registry)

    _layers: list = field(default_factory=list, repr=False)


def canonical_names(options: Mapping[str, Option]) -> dict[str, str]:
    names = {key: key for key in options}
    for key, option in options.items():
        for alias in option.aliases:
            names.setdefault(alias, key)
    return names


def _explicit_values(
    options: Mapping[str, Option], layers: Iterable[tuple[str, Mapping[str, Any], bool]]
) -> dict[str, tuple[Any, str]]:
    names = canonical_names(options)
    explicit: dict[str, tuple[Any, str]] = {}
    for source, raw, strict in layers:
        # canonical names after aliases, so a canonical key wins within one layer
        ordered = sorted(raw.items(), key=lambda kv: names.get(str(kv[0]).upper()) == str(kv[0]).upper())
        for raw_key, raw_value in ordered:
            upper = str(raw_key).upper()
            key = names.get(upper)
            if key is None:
                if strict:
                    hint = difflib.get_close_matches(upper, list(names), n=1)
                    suffix = f" (did you mean {hint[0]}?)" if hint else ""
                    raise ConfigError(f"unknown config key {raw_key!r} in {source}{suffix}")
                continue
            explicit[key] = (coerce(options[key], raw_value, source, str(raw_key)), source)
    return explicit


def resolve(
    options: dict[str, Option],
    layers: list[tuple[str, Mapping[str, Any], bool]],
    registry: plugin_registry.Registry | None = None,
) -> Config:
    explicit = _explicit_values(options, layers)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def value_of(key: str, seen: tuple[str, ...] = ()) -> tuple[Any, str]:
        if key in explicit:
            return explicit[key]
        option = options[key]
        if option.fallback and option.fallback in options and option.fallback not in seen:
            value, source = value_of(option.fallback, (*seen, key))
            if not source.startswith("fallback"):
                source = f"fallback {option.fallback} ({source})"
            return value, source
        return option.default, "default"

    for key in options:
        values[key], sources[key] = value_of(key)
    config = Config(options=options, values=values, sources=sources, registry=registry)
    config._layers = layers
    return config


def read_config_file(path: Path) -> dict[str, Any]:
    """waybox.toml as one flat mapping; `[sections]` are only for the reader's eyes."""
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read: {err.strerror or err}") from None
    flat: dict[str, Any] = {}
    where: dict[str, str] = {}
    for section, items in _sections(data):
        for key, value in items.items():
            if key.upper() in where:
                raise ConfigError(
                    f"{path}: {key} is set twice ({where[key.upper()]} and {section}); keep one"
                )
            where[key.upper()] = section
            flat[key] = value
    return flat


def _sections(data: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    """(name, keys) for the top level and each `[table]`, one level deep."""
    yield "top level", {k: v for k, v in data.items() if not isinstance(v, dict)}
    for name, table in data.items():
        if isinstance(table, dict):
            yield f"[{name}]", table


def load_config(
    datadir: DataDir | None,
    env: Mapping[str, str] | None = None,
    crawl: Mapping[str, Any] | None = None,
    snapshot: Mapping[str, Any] | None = None,
) -> Config:
    """Resolve every key for a collection, discovering plugins on the way."""
    env = os.environ if env is None else env
    env = {k: v for k, v in env.items() if k == k.upper()}  # `timeout=...` is not TIMEOUT
    file_values = read_config_file(datadir.config_file) if datadir else {}
    file_source = str(datadir.config_file.name) if datadir else "waybox.toml"
    base_layers = [(file_source, file_values, False), ("environment", env, False)]
    # PLUGIN_DIRS decides which plugins exist, so it is resolved from global keys first
    global_only = resolve(build_options(None), base_layers)
    dirs = plugin_registry.plugin_dirs(datadir.plugins if datadir else None, global_only["PLUGIN_DIRS"])
    registry = plugin_registry.discover(dirs)
    options = build_options(registry)
    layers = [(file_source, file_values, True), ("environment", env, False)]
    if crawl:
        layers.append(("crawl overrides", crawl, True))
    if snapshot:
        layers.append(("snapshot overrides", snapshot, True))
    config = resolve(options, layers, registry)
    config.warnings = [*registry.problems, *registry.warnings]
    return config


def check_overrides(config: Config, raw: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Validate user-given overrides now, so a bad key fails at `add` time, not mid-crawl."""
    _explicit_values(config.options, [(source, raw, True)])
    return dict(raw)
