"""waybox.config through its Python API, without Django: layers, aliases, fallbacks, types.

Every test builds a throwaway data directory with its own waybox.toml and plugin folder and
passes the environment explicitly, so the real process environment never leaks in.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from waybox.config import ConfigError, check_overrides, coerce, load_config, to_env_string
from waybox.datadir import DataDir

DEMO_SCHEMA = {
    "type": "object",
    "exclusive": "browser_tab",
    "properties": {
        "DEMOX_TIMEOUT": {"type": "integer", "minimum": 1, "x-fallback": "TIMEOUT", "x-aliases": ["DEMOX_WAIT"]},
        "DEMOX_ARGS": {"type": "array", "items": {"type": "string"}, "default": ["--quiet"]},
        "DEMOX_MODE": {"type": "string", "enum": ["fast", "full"], "default": "fast"},
        "DEMOX_RATIO": {"type": "number", "default": 0.5},
        "DEMOX_API_KEY": {"type": "string", "minLength": 8, "default": ""},
    },
}


def make_datadir(root: Path, toml: str = "", plugin_schema: dict | None = None) -> DataDir:
    """A data directory with waybox.toml and, optionally, plugins/demox/config.json."""
    datadir = DataDir(root)
    root.mkdir(parents=True, exist_ok=True)
    datadir.config_file.write_text(toml, encoding="utf-8")
    if plugin_schema is not None:
        plugin = datadir.plugins / "demox"
        plugin.mkdir(parents=True)
        (plugin / "config.json").write_text(json.dumps(plugin_schema))
    return datadir


@pytest.fixture
def demo(tmp_path: Path) -> DataDir:
    return make_datadir(tmp_path / "c", plugin_schema=DEMO_SCHEMA)


def test_defaults_without_any_layer(tmp_path: Path) -> None:
    config = load_config(make_datadir(tmp_path / "c"), env={})
    assert config["TIMEOUT"] == 60
    assert config.sources["TIMEOUT"] == "default"
    assert config["CHECK_SSL_VALIDITY"] is True


def test_precedence_file_env_crawl_snapshot(tmp_path: Path) -> None:
    datadir = make_datadir(tmp_path / "c", 'TIMEOUT = 10\nUSER_AGENT = "from-file"\nMAX_ATTEMPTS = 5\n')
    env = {"TIMEOUT": "20", "USER_AGENT": "from-env"}
    config = load_config(datadir, env=env, crawl={"TIMEOUT": 30}, snapshot={"TIMEOUT": "40"})
    assert (config["MAX_ATTEMPTS"], config.sources["MAX_ATTEMPTS"]) == (5, "waybox.toml")
    assert (config["USER_AGENT"], config.sources["USER_AGENT"]) == ("from-env", "environment")
    assert (config["TIMEOUT"], config.sources["TIMEOUT"]) == (40, "snapshot overrides")
    assert load_config(datadir, env=env, crawl={"TIMEOUT": 30})["TIMEOUT"] == 30
    assert load_config(datadir, env=env)["TIMEOUT"] == 20
    assert load_config(datadir, env={})["TIMEOUT"] == 10


def test_overrides_layer_stacks_on_a_loaded_config(tmp_path: Path) -> None:
    """How the engine applies a Crawl's and then a Snapshot's overrides to the base config."""
    base = load_config(make_datadir(tmp_path / "c", "TIMEOUT = 10\n"), env={"MAX_ATTEMPTS": "4"})
    crawl = base.overrides_layer({"TIMEOUT": 30, "MAX_ATTEMPTS": 2}, "crawl overrides")
    snap = crawl.overrides_layer({"TIMEOUT": 5}, "snapshot overrides")
    assert (base["TIMEOUT"], crawl["TIMEOUT"], snap["TIMEOUT"]) == (10, 30, 5)
    assert (base["MAX_ATTEMPTS"], snap["MAX_ATTEMPTS"]) == (4, 2)
    assert snap.sources["MAX_ATTEMPTS"] == "crawl overrides"
    with pytest.raises(ConfigError, match="unknown config key 'NOPE' in snapshot overrides"):
        crawl.overrides_layer({"NOPE": 1}, "snapshot overrides")


def test_plugin_keys_fallback_to_global(demo: DataDir) -> None:
    config = load_config(demo, env={"TIMEOUT": "33"})
    assert config["DEMOX_TIMEOUT"] == 33
    assert config.sources["DEMOX_TIMEOUT"] == "fallback TIMEOUT (environment)"
    assert config["DEMOX_ARGS"] == ["--quiet"]
    assert config.options["DEMOX_TIMEOUT"].plugin == "demox"


def test_explicit_plugin_key_beats_fallback_from_any_layer(demo: DataDir) -> None:
    demo.config_file.write_text("DEMOX_TIMEOUT = 7\n")
    config = load_config(demo, env={"TIMEOUT": "33"}, crawl={"TIMEOUT": 99})
    assert (config["DEMOX_TIMEOUT"], config.sources["DEMOX_TIMEOUT"]) == (7, "waybox.toml")
    assert config["TIMEOUT"] == 99


def test_alias_sets_the_canonical_key_and_canonical_wins_in_one_layer(demo: DataDir) -> None:
    assert load_config(demo, env={"DEMOX_WAIT": "12"})["DEMOX_TIMEOUT"] == 12
    both = load_config(demo, env={"DEMOX_WAIT": "12", "DEMOX_TIMEOUT": "13"})
    assert both["DEMOX_TIMEOUT"] == 13
    demo.config_file.write_text("DEMOX_WAIT = 3\n")
    later_layer = load_config(demo, env={"DEMOX_WAIT": "12"})
    assert (later_layer["DEMOX_TIMEOUT"], later_layer.sources["DEMOX_TIMEOUT"]) == (12, "environment")


def test_implied_enabled_key_and_save_alias(demo: DataDir) -> None:
    assert load_config(demo, env={})["DEMOX_ENABLED"] is True
    config = load_config(demo, env={"SAVE_DEMOX": "off"})
    assert config["DEMOX_ENABLED"] is False
    assert "demox" not in config.enabled_plugins()
    assert not load_config(demo, env={"PLUGINS": "other"}).plugin_enabled("demox")
    assert load_config(demo, env={"PLUGINS": "demox"}).plugin_enabled("demox")


def test_plugin_dirs_adds_plugin_folders(tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    (extra / "extplug").mkdir(parents=True)
    (extra / "extplug" / "config.json").write_text(json.dumps({"properties": {"EXTPLUG_X": {"type": "string"}}}))
    datadir = make_datadir(tmp_path / "c")
    assert "EXTPLUG_X" not in load_config(datadir, env={}).options
    config = load_config(datadir, env={"PLUGIN_DIRS": f"{tmp_path / 'missing'}:{extra}"})
    assert "EXTPLUG_X" in config.options
    assert any("missing" in w for w in config.warnings)


def test_environment_keys_are_case_sensitive(demo: DataDir) -> None:
    """`timeout=1` in the environment is somebody else's variable, not TIMEOUT."""
    assert load_config(demo, env={"timeout": "1"})["TIMEOUT"] == 60


def test_unknown_key_in_file_is_an_error_with_a_hint(tmp_path: Path) -> None:
    datadir = make_datadir(tmp_path / "c", "TIMEOUTT = 5\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'TIMEOUTT' in waybox.toml \(did you mean TIMEOUT\?\)"):
        load_config(datadir, env={})


def test_unknown_key_in_environment_is_ignored(tmp_path: Path) -> None:
    load_config(make_datadir(tmp_path / "c"), env={"TIMEOUTT": "x", "HOME": "/root"})


@pytest.mark.parametrize(
    ("toml", "env", "expected"),
    [
        ('TIMEOUT = "abc"\n', {}, "TIMEOUT='abc' (from waybox.toml): expected a whole number"),
        ("TIMEOUT = 1.5\n", {}, "TIMEOUT=1.5 (from waybox.toml): expected a whole number"),
        ("", {"TIMEOUT": "soon"}, "TIMEOUT='soon' (from environment): expected a whole number"),
        ("", {"TIMEOUT": "0"}, "TIMEOUT='0' (from environment): 0 is less than the minimum of 1"),
        ("USER_AGENT = 5\n", {}, "USER_AGENT=5 (from waybox.toml): expected text, got a number"),
        ("", {"CHECK_SSL_VALIDITY": "maybe"}, "CHECK_SSL_VALIDITY='maybe' (from environment): expected true or false"),
        ("", {"DEMOX_MODE": "slow"}, "DEMOX_MODE='slow' (from environment): 'slow' is not one of"),
        ("", {"DEMOX_WAIT": "x"}, "DEMOX_WAIT (alias of DEMOX_TIMEOUT)='x' (from environment)"),
        ("", {"DEMOX_ARGS": "[1"}, "DEMOX_ARGS='[1' (from environment): expected a list, not valid JSON"),
        ("DEMOX_API_KEY = 12345\n", {}, "DEMOX_API_KEY='********' (from waybox.toml): expected text"),
    ],
)
def test_wrong_type_names_key_value_and_source(demo: DataDir, toml: str, env: dict, expected: str) -> None:
    demo.config_file.write_text(toml)
    with pytest.raises(ConfigError) as err:
        load_config(demo, env=env)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_secret_values_stay_out_of_error_messages(demo: DataDir) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(demo, env={"DEMOX_API_KEY": "hunter2"})
    assert "hunter2" not in str(err.value) and "DEMOX_API_KEY='********' (from environment)" in str(err.value)


def test_type_coercion_from_strings(demo: DataDir) -> None:
    config = load_config(demo, env={
        "CHECK_SSL_VALIDITY": "no", "DEMOX_ARGS": "--a, --b", "DEMOX_RATIO": "2.5", "MAX_ATTEMPTS": " 7 ",
    })
    assert config["CHECK_SSL_VALIDITY"] is False
    assert config["DEMOX_ARGS"] == ["--a", "--b"]
    assert config["DEMOX_RATIO"] == 2.5
    assert config["MAX_ATTEMPTS"] == 7
    assert load_config(demo, env={"DEMOX_ARGS": '["x y", "z"]'})["DEMOX_ARGS"] == ["x y", "z"]


def test_broken_toml_names_the_file(tmp_path: Path) -> None:
    datadir = make_datadir(tmp_path / "c", "TIMEOUT = [\n")
    with pytest.raises(ConfigError, match="waybox.toml: not valid TOML"):
        load_config(datadir, env={})


def test_sections_are_flattened_but_a_key_set_twice_is_an_error(demo: DataDir) -> None:
    demo.config_file.write_text("TIMEOUT = 9\n\n[demox]\nDEMOX_TIMEOUT = 4\n")
    config = load_config(demo, env={})
    assert (config["TIMEOUT"], config["DEMOX_TIMEOUT"]) == (9, 4)
    demo.config_file.write_text("DEMOX_TIMEOUT = 9\n\n[demox]\nDEMOX_TIMEOUT = 4\n")
    with pytest.raises(ConfigError, match=r"DEMOX_TIMEOUT is set twice \(top level and \[demox\]\)"):
        load_config(demo, env={})


def test_check_overrides_validates_keys_and_types(demo: DataDir) -> None:
    config = load_config(demo, env={})
    assert check_overrides(config, {"PLUGINS": "demox"}, "--plugins") == {"PLUGINS": "demox"}
    with pytest.raises(ConfigError, match="unknown config key 'BOGUS' in crawl"):
        check_overrides(config, {"BOGUS": 1}, "crawl")
    with pytest.raises(ConfigError, match=r"TIMEOUT='x' \(from crawl\)"):
        check_overrides(config, {"TIMEOUT": "x"}, "crawl")


def test_hook_env_has_global_and_own_plugin_keys_as_strings(demo: DataDir) -> None:
    other = demo.plugins / "otherplug"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"properties": {"OTHERPLUG_SECRET": {"type": "string"}}}))
    env = load_config(demo, env={"CHECK_SSL_VALIDITY": "0"}).hook_env("demox")
    assert env["DEMOX_TIMEOUT"] == "60"
    assert env["DEMOX_ARGS"] == '["--quiet"]'
    assert env["CHECK_SSL_VALIDITY"] == "False"
    assert "OTHERPLUG_SECRET" not in env
    assert all(isinstance(v, str) for v in env.values())


def test_coerce_and_to_env_string_round_trip(demo: DataDir) -> None:
    options = load_config(demo, env={}).options
    for key, value in [("DEMOX_ARGS", ["a", "b c"]), ("CHECK_SSL_VALIDITY", False), ("TIMEOUT", 5)]:
        assert coerce(options[key], to_env_string(value), "test") == value
