"""What a worker process knows once: the collection, its config and its plugins.

Config and plugin discovery read files, so they are resolved once per process and
layered per Crawl and per Snapshot from there.
"""

from __future__ import annotations

from functools import cached_property

from waybox.binaries import detect
from waybox.config import Config, load_config
from waybox.datadir import DataDir
from waybox.models import ArchiveResult, Crawl, Snapshot
from waybox.plugin_registry import Hook


class Engine:
    def __init__(self, datadir: DataDir):
        self.datadir = datadir
        self._configs: dict[tuple, Config] = {}
        self._missing: dict[str, list[str]] = {}

    @cached_property
    def base_config(self) -> Config:
        return load_config(self.datadir)

    @property
    def registry(self):
        return self.base_config.registry

    def config_for(self, crawl: Crawl, snapshot: Snapshot | None = None) -> Config:
        key = (crawl.id, snapshot.id if snapshot is not None and snapshot.config else None)
        if key not in self._configs:
            config = self.base_config
            if crawl.config:
                config = config.overrides_layer(crawl.config, f"crawl {crawl.id} overrides")
            if snapshot is not None and snapshot.config:
                config = config.overrides_layer(snapshot.config, f"snapshot {snapshot.id} overrides")
            if len(self._configs) > 1000:
                self._configs.clear()
            self._configs[key] = config
        return self._configs[key]

    def hooks_for(self, model: str, config: Config) -> list[Hook]:
        return self.registry.hooks_for(model, config.enabled_plugins())

    def hook_of(self, result: ArchiveResult) -> Hook | None:
        plugin = self.registry.plugins.get(result.plugin)
        if plugin is None:
            return None
        return next((h for h in plugin.hooks if h.name == result.hook_name), None)

    def exclusive_of(self, plugin_name: str) -> str | None:
        plugin = self.registry.plugins.get(plugin_name)
        return plugin.exclusive if plugin else None

    def plugins_sharing(self, resource: str) -> list[str]:
        return [p.name for p in self.registry.plugins.values() if p.exclusive == resource]

    def missing_binaries(self, plugin_name: str) -> list[str]:
        """Binaries a plugin needs that are not installed (checked once per process)."""
        if plugin_name not in self._missing:
            plugin = self.registry.plugins[plugin_name]
            self._missing[plugin_name] = [
                spec["name"] for spec in plugin.binaries if not spec.get("optional") and not detect(spec).ok
            ]
        return self._missing[plugin_name]
