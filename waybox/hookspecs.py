"""Lifecycle hooks for Python plugins (pluggy), as in spec/states-and-lifecycles.md.

Python plugins are found through the `waybox` entry-point group and the PYTHON_PLUGINS
config key (comma-separated module names). Every hook takes keyword arguments and returns
nothing; an exception in a plugin is logged, never allowed to stop the engine.
"""

from __future__ import annotations

import importlib
import logging
import os

import pluggy

PROJECT = "waybox"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
log = logging.getLogger(__name__)


class Specs:
    @hookspec
    def on_orchestrator_startup(self, orchestrator): ...

    @hookspec
    def on_orchestrator_tick_started(self, orchestrator, actor_types, queues): ...

    @hookspec
    def on_orchestrator_idle(self, orchestrator): ...

    @hookspec
    def on_orchestrator_shutdown(self, orchestrator): ...

    @hookspec
    def on_actor_startup(self, actor): ...

    @hookspec
    def on_actor_tick_start(self, actor, obj): ...

    @hookspec
    def on_actor_tick_end(self, actor, obj): ...

    @hookspec
    def on_actor_tick_exception(self, actor, obj, exception): ...

    @hookspec
    def on_actor_shutdown(self, actor): ...

    @hookspec
    def on_object_created(self, obj): ...

    @hookspec
    def on_object_updated(self, obj): ...

    @hookspec
    def on_transition_start(self, obj, from_state, to_state): ...

    @hookspec
    def on_transition_end(self, obj, from_state, to_state): ...


_manager: pluggy.PluginManager | None = None
_manager_pid = 0
_modules: list[str] = []


def configure(python_plugins: str) -> None:
    """Set the PYTHON_PLUGINS modules (from config) before the first hook fires."""
    global _manager, _modules
    _modules = [m.strip() for m in python_plugins.split(",") if m.strip()]
    _manager = None


def manager() -> pluggy.PluginManager:
    global _manager, _manager_pid
    if _manager is None or _manager_pid != os.getpid():
        pm = pluggy.PluginManager(PROJECT)
        pm.add_hookspecs(Specs)
        pm.load_setuptools_entrypoints(PROJECT)
        for name in _modules:
            if not pm.has_plugin(name):
                pm.register(importlib.import_module(name), name=name)
        _manager, _manager_pid = pm, os.getpid()
    return _manager


def fire(name: str, **kwargs) -> None:
    """Call every plugin's implementation of `name`; plugin errors are logged and swallowed."""
    pm = manager()
    if not pm.get_plugins():
        return
    try:
        getattr(pm.hook, name)(**kwargs)
    except Exception:
        log.exception("python plugin failed in %s", name)
