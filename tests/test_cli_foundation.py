"""The foundation CLI end to end: the real `waybox` command on temporary data directories.

Every `add` here uses `--bg` (queue only), so these tests never depend on the archiving engine.
Each subprocess costs about half a second, so related checks share one collection.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import click
import pytest

from tests.conftest import Waybox

NO_COLUMNS = {"COLUMNS": ""}  # a table on a pipe must not depend on the caller's terminal


def one_line_error(result) -> str:
    """The error a user sees: a non-zero exit and a single line on stderr, no traceback."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def usage_error(result) -> str:
    """Click's usage errors end with an `Error: ...` line after the usage hint."""
    assert result.returncode == 2, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


def add_plugin(data_dir: Path, name: str, properties: dict) -> None:
    """A user plugin with only a config.json: enough for its config keys to exist."""
    folder = data_dir / "plugins" / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"type": "object", "properties": properties}))


# -- init ---------------------------------------------------------------------------------


def test_init_creates_layout_and_is_idempotent(fresh_waybox: Waybox) -> None:
    first = fresh_waybox("init")
    root = fresh_waybox.data_dir
    for name in ("archive", "crawls", "plugins", "logs", "waybox.toml", "index.sqlite3"):
        assert (root / name).exists(), name
    assert first.stdout == ""
    (root / "waybox.toml").write_text((root / "waybox.toml").read_text() + "TIMEOUT = 42\n")
    fresh_waybox("init")
    assert "TIMEOUT = 42" in (root / "waybox.toml").read_text(), "a second init must not reset the config"
    assert fresh_waybox.json("status", "--json")["counts"]["Snapshot"] == {}
    empty = fresh_waybox("list")
    assert (empty.stdout, empty.stderr.strip()) == ("", "no Snapshots match")


def test_init_refuses_a_foreign_non_empty_folder_unless_forced(fresh_waybox: Waybox) -> None:
    root = fresh_waybox.data_dir
    root.mkdir()
    (root / "thesis.txt").write_text("my own work")
    line = one_line_error(fresh_waybox("init", check=False))
    assert "not empty" in line and "thesis.txt" in line and "--force" in line
    assert sorted(p.name for p in root.iterdir()) == ["thesis.txt"], "nothing may be created on refusal"
    fresh_waybox("init", "--force")
    assert (root / "thesis.txt").read_text() == "my own work"
    assert (root / "index.sqlite3").exists()


def test_commands_outside_a_collection_say_so(fresh_waybox: Waybox) -> None:
    fresh_waybox.data_dir.mkdir()
    line = one_line_error(fresh_waybox("list", check=False))
    assert "is not a waybox collection" in line and "waybox init" in line


# -- add ----------------------------------------------------------------------------------


def test_add_from_arguments_file_and_stdin(waybox: Waybox, tmp_path: Path) -> None:
    args = waybox("add", "--bg", "https://one.example/", "not a url", "http://TWO.example/a", "--tag", "news,tech",
                  "--depth", "1")
    crawl_from_args = args.stdout.strip()
    assert len(crawl_from_args) == 36, "stdout of `add` is only the Crawl id"
    assert "'not a url'" in args.stderr and "whitespace" in args.stderr
    url_file = tmp_path / "urls.txt"
    url_file.write_text("\ufeff# reading list\nhttps://three.example/\n\nftp://files.example/x\njavascript:alert(1)\n")
    from_file = waybox("add", "--bg", "--file", str(url_file))
    assert f"{url_file}:5" in from_file.stderr and "unsupported scheme 'javascript'" in from_file.stderr
    more = tmp_path / "more.txt"
    more.write_text("https://five.example/\r\n")
    from_stdin = waybox("add", "--bg", "-", "--file", str(more), input="https://four.example/\nhttps://four.example/\n")

    snapshots = waybox.json("list", "--json")
    by_url = {s["url"]: s for s in snapshots}
    assert set(by_url) == {"https://one.example/", "http://two.example/a", "https://three.example/",
                           "ftp://files.example/x", "https://four.example/", "https://five.example/"}
    assert by_url["https://one.example/"]["crawl_id"] == crawl_from_args
    assert sorted(by_url["http://two.example/a"]["tags"]) == ["news", "tech"]
    assert by_url["https://three.example/"]["crawl_id"] == from_file.stdout.strip()
    assert by_url["https://four.example/"]["crawl_id"] == from_stdin.stdout.strip()
    assert by_url["https://five.example/"]["crawl_id"] == from_stdin.stdout.strip(), "stdin and --file together"
    for snapshot in snapshots:
        assert snapshot["status"] == "queued" and snapshot["depth"] == 0
        assert isinstance(snapshot["archiveresults"], list)
    index = json.loads((waybox.data_dir / "archive" / by_url["https://one.example/"]["id"] / "index.json").read_text())
    assert index["crawl"]["max_depth"] == 1 and sorted(index["tags"]) == ["news", "tech"]


def test_add_bad_input_is_reported_in_one_line(waybox: Waybox, tmp_path: Path) -> None:
    missing = one_line_error(waybox("add", "--bg", "--file", str(tmp_path / "nope.txt"), check=False))
    assert "nope.txt" in missing and "No such file" in missing
    folder = one_line_error(waybox("add", "--bg", "--file", str(tmp_path), check=False))
    assert "is a folder" in folder
    nothing_valid = waybox("add", "--bg", "example.com", "[/x]", check=False)
    assert nothing_valid.returncode != 0
    assert "e.g. https://example.com" in nothing_valid.stderr, "a URL missing its scheme gets a suggestion"
    assert "'[/x]'" in nothing_valid.stderr, "input that looks like rich markup is printed as is"
    assert "no valid URLs" in nothing_valid.stderr.splitlines()[-1]
    assert "Traceback" not in nothing_valid.stderr
    assert "give URLs" in usage_error(waybox("add", "--bg", check=False))
    assert waybox.json("list", "--json") == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_add_unreadable_file(waybox: Waybox, tmp_path: Path) -> None:
    secret = tmp_path / "urls.txt"
    secret.write_text("https://a.example/\n")
    secret.chmod(0)
    line = one_line_error(waybox("add", "--bg", "--file", str(secret), check=False))
    assert "cannot read" in line and "Permission denied" in line


def test_add_plugins_option_checks_names_and_stores_the_override(waybox: Waybox) -> None:
    add_plugin(waybox.data_dir, "demox", {})
    line = one_line_error(waybox("add", "--bg", "--plugins", "demox,nosuchplugin", "https://a.example/", check=False))
    assert "nosuchplugin" in line
    crawl_id = waybox("add", "--bg", "--plugins", "DemoX", "https://a.example/").stdout.strip()
    (snapshot,) = waybox.json("list", "--json", "--crawl", crawl_id)
    index = json.loads((waybox.data_dir / "archive" / snapshot["id"] / "index.json").read_text())
    assert index["crawl"]["config"] == {"PLUGINS": "demox"}


# -- list ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Waybox, list[dict]]:
    """One collection with two Crawls (read-only for the tests that use it) and its rows."""
    wb = Waybox(tmp_path_factory.mktemp("listing") / "collection")
    wb.data_dir.mkdir()
    wb("init")
    long_url = "https://long.example/" + "/".join(f"segment{i}" for i in range(12)) + "?q=[bold]x[/bold]"
    wb("add", "--bg", "https://a.example/", "https://b.example/page", "--tag", "red")
    wb("add", "--bg", "https://c.example/", long_url, "--tag", "blue")
    return wb, wb.json("list", "--json")


def test_list_json_jsonl_csv_agree(listed: tuple[Waybox, list[dict]]) -> None:
    wb, rows = listed
    assert len(rows) == 4
    created = [datetime.fromisoformat(r["created_at"]) for r in rows]
    assert created == sorted(created, reverse=True), "newest first"
    assert all("T" in r["created_at"] for r in rows), "dates are ISO 8601"
    jsonl = [json.loads(line) for line in wb("list", "--jsonl").stdout.splitlines()]
    assert jsonl == rows
    table = list(csv.DictReader(io.StringIO(wb("list", "--csv").stdout)))
    assert [r["id"] for r in table] == [r["id"] for r in rows]
    assert table[0]["url"] == rows[0]["url"] and table[0]["tags"] == "blue"


def test_list_table_is_readable_when_piped(listed: tuple[Waybox, list[dict]]) -> None:
    wb, rows = listed
    result = wb("list", env=NO_COLUMNS)
    assert result.stderr == ""
    for row in rows:
        line = next((line for line in result.stdout.splitlines() if row["id"] in line), None)
        assert line is not None, f"{row['id']} is folded across lines"
        assert row["url"] in line, "each row is one line with its full URL, markup-like text included"


def test_list_filters(listed: tuple[Waybox, list[dict]]) -> None:
    wb, rows = listed
    urls = [r["url"] for r in rows]

    def listed_urls(*args: str) -> list[str]:
        return [r["url"] for r in wb.json("list", "--json", *args)]

    assert sorted(listed_urls("--tag", "red")) == ["https://a.example/", "https://b.example/page"]
    assert listed_urls("--url", "b.example") == ["https://b.example/page"]
    assert listed_urls("--status", "queued", "--limit", "2", "--offset", "1") == urls[1:3]
    newest_crawl_start = min(r["created_at"] for r in rows if "blue" in r["tags"])
    assert sorted(listed_urls("--since", newest_crawl_start)) == sorted(r["url"] for r in rows if "blue" in r["tags"])
    tomorrow = (datetime.now() + timedelta(days=1)).date().isoformat()
    assert listed_urls("--status", "sealed") == [] and listed_urls("--until", "2000-01-01") == []
    assert len(listed_urls("--since", "2000-01-01", "--until", tomorrow)) == 4
    assert "'yesterday' is not an ISO date" in usage_error(wb("list", "--since", "yesterday", check=False))
    assert "--status" in usage_error(wb("list", "--status", "done", check=False))


# -- status, version ----------------------------------------------------------------------


def test_status_counts_and_table(waybox: Waybox) -> None:
    waybox("add", "--bg", "https://a.example/", "https://b.example/")
    status = waybox.json("status", "--json")
    assert status["data_dir"] == str(waybox.data_dir.resolve())
    assert status["counts"]["Snapshot"] == {"queued": 2}
    assert status["counts"]["Crawl"] == {"queued": 1}
    assert status["disk"]["database_bytes"] > 0
    assert any("status" in " ".join(p["cmd"]) if isinstance(p["cmd"], list) else "status" in p["cmd"]
               for p in status["running_processes"]), "the status command itself is running"
    table = waybox("status", env=NO_COLUMNS).stdout
    assert "Snapshot" in table and "queued=2" in table


def test_version_lists_components(waybox: Waybox) -> None:
    components = {row["component"]: row["version"] for row in waybox.json("version", "--json")}
    assert {"waybox", "python", "django", "sqlite"} <= set(components)
    assert components["django"].startswith("5.2")


# -- remove -------------------------------------------------------------------------------


def test_remove_shows_refuses_then_deletes(waybox: Waybox) -> None:
    waybox("add", "--bg", "https://keep.example/", "https://drop.example/a", "https://drop.example/b")
    before = {s["url"]: s["id"] for s in waybox.json("list", "--json")}
    archive = waybox.data_dir / "archive"
    assert "give at least one filter" in usage_error(waybox("remove", check=False))

    dry = waybox("remove", "--url", "drop.example", check=False)
    assert dry.returncode != 0 and dry.stdout == ""
    assert before["https://drop.example/a"] in dry.stderr and "https://drop.example/b" in dry.stderr
    assert "--yes" in dry.stderr and "keep.example" not in dry.stderr
    assert len(waybox.json("list", "--json")) == 3 and (archive / before["https://drop.example/a"]).exists()

    waybox("remove", "--url", "drop.example", "--yes")
    assert [s["url"] for s in waybox.json("list", "--json")] == ["https://keep.example/"]
    assert not (archive / before["https://drop.example/a"]).exists()
    assert not (archive / before["https://drop.example/b"]).exists()
    assert (archive / before["https://keep.example/"] / "index.json").exists()


# -- config -------------------------------------------------------------------------------


def test_config_set_get_and_precedence_over_file(waybox: Waybox) -> None:
    toml = waybox.data_dir / "waybox.toml"
    waybox("config", "--set", "TIMEOUT=30", "--set", "user_agent=my bot")
    text = toml.read_text()
    assert "TIMEOUT = 30" in text and 'USER_AGENT = "my bot"' in text
    assert text.startswith("# waybox collection config"), "--set keeps the file's comments"
    assert waybox("config", "--get", "TIMEOUT").stdout == "30\n"
    assert waybox("config", "--get", "timeout", env={"TIMEOUT": "45"}).stdout == "45\n"
    rows = {r["key"]: r for r in waybox.json("config", "--json", env={"TIMEOUT": "45"})}
    assert (rows["TIMEOUT"]["value"], rows["TIMEOUT"]["source"]) == (45, "environment")
    assert (rows["USER_AGENT"]["value"], rows["USER_AGENT"]["source"]) == ("my bot", "waybox.toml")
    assert (rows["MAX_ATTEMPTS"]["value"], rows["MAX_ATTEMPTS"]["source"]) == (3, "default")
    table = waybox("config", env=NO_COLUMNS).stdout
    (row,) = [line for line in table.splitlines() if "│ TIMEOUT " in line]
    assert [cell.strip() for cell in row.split("│")[1:4]] == ["TIMEOUT", "30", "waybox.toml"]


def test_config_errors_name_key_value_and_source(waybox: Waybox) -> None:
    toml = waybox.data_dir / "waybox.toml"
    unknown_set = one_line_error(waybox("config", "--set", "TIMEOUTS=5", check=False))
    assert "unknown config key 'TIMEOUTS' in --set" in unknown_set and "did you mean TIMEOUT" in unknown_set
    wrong_set = one_line_error(waybox("config", "--set", "TIMEOUT=soon", check=False))
    assert "TIMEOUT='soon' (from --set)" in wrong_set
    assert "TIMEOUT" not in toml.read_text(), "nothing is written when a value is refused"
    wrong_env = one_line_error(waybox("list", env={"MAX_ATTEMPTS": "many"}, check=False))
    assert "MAX_ATTEMPTS='many' (from environment)" in wrong_env
    toml.write_text('TIMEOUT = "ten"\n')
    assert "TIMEOUT='ten' (from waybox.toml)" in one_line_error(waybox("list", check=False))
    toml.write_text("TIMEOUTT = 10\n")
    assert "unknown config key 'TIMEOUTT' in waybox.toml" in one_line_error(waybox("status", check=False))
    toml.write_text("TIMEOUT = [\n")
    broken = one_line_error(waybox("list", check=False))
    assert "waybox.toml" in broken and "not valid TOML" in broken


def test_plugin_config_aliases_and_fallback(waybox: Waybox) -> None:
    add_plugin(waybox.data_dir, "demox", {
        "DEMOX_TIMEOUT": {"type": "integer", "minimum": 1, "x-fallback": "TIMEOUT", "x-aliases": ["DEMOX_WAIT"]},
        "DEMOX_API_KEY": {"type": "string", "default": ""},
    })
    rows = {r["key"]: r for r in waybox.json("config", "--json", env={"TIMEOUT": "25", "DEMOX_API_KEY": "s3cret"})}
    assert (rows["DEMOX_TIMEOUT"]["value"], rows["DEMOX_TIMEOUT"]["source"]) == (25, "fallback TIMEOUT (environment)")
    assert rows["DEMOX_TIMEOUT"]["plugin"] == "demox"
    assert rows["DEMOX_ENABLED"]["value"] is True
    assert rows["DEMOX_API_KEY"]["value"] == "********", "secret-looking values are hidden"
    waybox("config", "--set", "DEMOX_WAIT=9", "--set", "SAVE_DEMOX=false")
    text = (waybox.data_dir / "waybox.toml").read_text()
    assert "DEMOX_TIMEOUT = 9" in text and "DEMOX_ENABLED = false" in text, "aliases are written canonically"
    assert waybox("config", "--get", "DEMOX_TIMEOUT", env={"TIMEOUT": "25"}).stdout == "9\n"
    assert waybox("config", "--get", "DEMOX_WAIT", env={"DEMOX_WAIT": "11"}).stdout == "11\n"


def test_config_set_replaces_a_key_kept_in_a_section(waybox: Waybox) -> None:
    toml = waybox.data_dir / "waybox.toml"
    toml.write_text("# mine\nTIMEOUT = 30\n\n[limits]\nMAX_ATTEMPTS = 2 # fewer retries\n")
    waybox("config", "--set", "MAX_ATTEMPTS=4")
    assert waybox("config", "--get", "MAX_ATTEMPTS").stdout == "4\n"
    assert toml.read_text().count("MAX_ATTEMPTS") == 1 and "[limits]" in toml.read_text()


# -- machine-readable output --------------------------------------------------------------


def test_machine_output_is_alone_on_stdout_even_with_warnings(waybox: Waybox) -> None:
    env = {"PLUGIN_DIRS": str(waybox.data_dir / "no-such-plugins")}  # makes a warning on stderr
    added = waybox("add", "--bg", "https://a.example/", "bad url", env=env)
    assert "warning" in added.stderr and added.stdout.count("\n") == 1
    for args in (("list", "--json"), ("status", "--json"), ("config", "--json"), ("version", "--json")):
        json.loads(waybox(*args, env=env).stdout)
    assert all(json.loads(line) for line in waybox("list", "--jsonl", env=env).stdout.splitlines())


# -- rebuild ------------------------------------------------------------------------------


def test_rebuild_from_archive_after_losing_the_database(waybox: Waybox) -> None:
    waybox("add", "--bg", "https://a.example/", "https://b.example/", "https://c.example/", "--tag", "kept")
    before = {s["url"]: s for s in waybox.json("list", "--json")}
    root = waybox.data_dir
    archive = root / "archive"
    corrupt = archive / before["https://c.example/"]["id"] / "index.json"
    corrupt.write_text('{"id": "truncated')
    (archive / "not-a-snapshot").mkdir()
    for db in root.glob("index.sqlite3*"):
        db.unlink()

    lost = one_line_error(waybox("list", check=False))
    assert "database" in lost and "waybox init" in lost and "--rebuild" in lost

    rebuilt = waybox("init", "--rebuild", check=False)
    assert rebuilt.returncode == 1, "skipped folders make the rebuild exit non-zero"
    assert "Traceback" not in rebuilt.stderr
    assert f"{corrupt.parent}: index.json is not valid JSON" in rebuilt.stderr
    assert "not-a-snapshot: no index.json" in rebuilt.stderr
    assert "rebuilt 2 snapshots" in rebuilt.stderr
    after = {s["url"]: s for s in waybox.json("list", "--json")}
    assert set(after) == {"https://a.example/", "https://b.example/"}
    for url, snapshot in after.items():
        assert {k: snapshot[k] for k in ("id", "crawl_id", "tags", "status", "created_at")} == {
            k: before[url][k] for k in ("id", "crawl_id", "tags", "status", "created_at")
        }
        assert snapshot["archiveresults"] == before[url]["archiveresults"]


def test_rebuild_reports_each_bad_index_and_keeps_going(waybox: Waybox) -> None:
    waybox("add", "--bg", "https://good.example/", "https://other.example/")
    good, other = waybox.json("list", "--json")
    archive = waybox.data_dir / "archive"
    template = json.loads((archive / good["id"] / "index.json").read_text())
    bad_cases = {
        "01a00000-0000-7000-8000-000000000001": {**template, "status": "bogus"},
        "01a00000-0000-7000-8000-000000000002": {**template, "depth": -1, "url": "https://neg.example/"},
        "01a00000-0000-7000-8000-000000000003": {**template, "created_at": "last tuesday"},
        "01a00000-0000-7000-8000-000000000004": ["not", "an", "object"],
        "01a00000-0000-7000-8000-000000000005": {k: v for k, v in template.items() if k != "crawl"},
        "not-a-uuid": {**template, "id": "not-a-uuid", "url": "https://x.example/"},
    }
    for folder, data in bad_cases.items():
        if isinstance(data, dict) and folder.startswith("01a"):
            data = {**data, "id": folder}
        (archive / folder).mkdir()
        (archive / folder / "index.json").write_text(json.dumps(data))
    shutil.copytree(archive / good["id"], archive / "01a00000-0000-7000-8000-000000000006")  # copied, id mismatch
    for db in waybox.data_dir.glob("index.sqlite3*"):
        db.unlink()
    rebuilt = waybox("init", "--rebuild", check=False)
    assert rebuilt.returncode == 1 and "Traceback" not in rebuilt.stderr, rebuilt.stderr
    skipped = [line for line in rebuilt.stderr.splitlines() if line.startswith("skipped:")]
    assert len(skipped) == len(bad_cases) + 1, rebuilt.stderr
    assert "unknown Snapshot status 'bogus'" in rebuilt.stderr
    assert "describes Snapshot" in rebuilt.stderr
    assert sorted(s["id"] for s in waybox.json("list", "--json")) == sorted([good["id"], other["id"]])


def test_every_command_is_reachable_through_the_lazy_command_table() -> None:
    """`waybox` imports a command's module only when it runs; a command missing from the table
    would silently vanish from the CLI."""
    import importlib
    import pkgutil

    import waybox.cli
    from waybox.cli import COMMAND_MODULES, main

    defined = {}
    for info in pkgutil.iter_modules(waybox.cli.__path__):
        module = importlib.import_module(f"waybox.cli.{info.name}")
        defined.update({c.name: info.name for c in getattr(module, "COMMANDS", [])})
    assert defined == COMMAND_MODULES
    ctx = click.Context(main)
    assert all(main.get_command(ctx, name).name == name for name in COMMAND_MODULES)
