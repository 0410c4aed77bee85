"""The hook runner and the ten steps (issue 4), end to end with real subprocesses.

Every test runs the real `waybox` command on a temporary collection whose PLUGINS setting
names only the fixture plugins of tests/fixtures/plugins/ (or plugins a test writes into its
own temporary folder), so the built-in plugins never run here. The fixture hooks record what
they saw (timestamps, pids, argv, cwd, environment) into JSON files in their working folder.

Timing never decides an assertion, except the order of timestamps the hooks recorded (to
prove overlap or its absence). Each `waybox add` costs seconds, so one crawl serves many
tests: the crawl fixtures are module-scoped and each test checks one property of it.

After every crawl and every test, no process started for the collection may remain: see
`processes_of` and `assert_no_leftovers` (they kill what they find, then fail the test).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from itertools import combinations
from pathlib import Path

import psutil
import pytest

from tests.conftest import FIXTURES, Waybox
from waybox.plugin_registry import PluginError, discover, parse_hook_name

PLUGINS_DIR = FIXTURES / "plugins"
SETTLE_S = 60  # upper bound for the orchestrator and its workers to exit once a crawl is done
ADD_TIMEOUT_S = 180  # upper bound for one `waybox add` of a few fixture hooks (the machine may be busy)

pytestmark = pytest.mark.timeout(600)  # a module-scoped crawl fixture counts towards its first test
URL = "http://127.0.0.1:9/page"  # nothing listens on the discard port: fixture hooks never fetch


# -- processes: nothing may outlive a test ----------------------------------------------------


def _process_ids(root: Path) -> set[str]:
    """Ids of every Process row of the collection under `root` (as WAYBOX_PROCESS_ID values)."""
    ids: set[str] = set()
    for db in root.rglob("index.sqlite3"):
        with contextlib.suppress(sqlite3.Error), contextlib.closing(
            sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        ) as conn:
            for (raw,) in conn.execute("SELECT id FROM waybox_process"):
                hexid = str(raw).replace("-", "")
                ids.add(f"{hexid[:8]}-{hexid[8:12]}-{hexid[12:16]}-{hexid[16:20]}-{hexid[20:]}")
    return ids


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def processes_of(root: Path) -> list[psutil.Process]:
    """Live processes started for the collection(s) under `root`: their command line, working
    folder or environment mentions `root`, or they carry the WAYBOX_PROCESS_ID of one of its
    Process rows. (Other sessions run waybox on this machine too: a bare WAYBOX_PROCESS_ID
    is not enough.)"""
    needle = str(root)
    markers = {f"WAYBOX_PROCESS_ID={i}".encode() for i in _process_ids(root)}
    me = os.getpid()
    mine = os.getuid()
    found = []
    for proc in psutil.process_iter(["pid", "uids"]):
        if proc.pid == me or not proc.info["uids"] or proc.info["uids"].real != mine:
            continue
        try:
            cmdline = " ".join(proc.cmdline())
            cwd = proc.cwd()
            with open(f"/proc/{proc.pid}/environ", "rb") as f:
                environ = f.read()
        except (psutil.Error, OSError):
            continue
        entries = set(environ.split(b"\0"))
        if (needle in cmdline or cwd.startswith(needle) or needle.encode() in environ or entries & markers) and _alive(
            proc
        ):
            found.append(proc)
    return found


def settle(root: Path, timeout: float = SETTLE_S) -> list[psutil.Process]:
    """Wait until nothing runs for `root` any more (the orchestrator exits once it is idle);
    return whatever is still there after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        left = processes_of(root)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def kill_all(procs: list[psutil.Process]) -> list[str]:
    described = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            described.append(f"pid {proc.pid}: {' '.join(proc.cmdline())[:200]}")
            proc.kill()
    psutil.wait_procs(procs, timeout=10)
    return described


def kill_everything(root: Path) -> list[str]:
    """Kill whatever runs for `root`, again until nothing is left (an orchestrator may have
    spawned a worker meanwhile)."""
    described: list[str] = []
    for _ in range(5):
        procs = processes_of(root)
        if not procs:
            break
        described += kill_all(procs)
    return described


def assert_no_leftovers(root: Path, timeout: float = SETTLE_S) -> None:
    try:
        left = settle(root, timeout)
    except BaseException:  # interrupted (pytest-timeout, Ctrl-C): still kill what is there
        kill_everything(root)
        raise
    if left:
        described = kill_everything(root)
        pytest.fail(f"processes left running for {root} (killed now):\n" + "\n".join(described))


@pytest.fixture(autouse=True)
def no_leftover_processes(tmp_path: Path):
    """Every test: whatever it started under its tmp_path must be gone when it ends."""
    yield
    assert_no_leftovers(tmp_path)


def pid_alive(pid: int, started_before: float) -> bool:
    """Whether `pid` is still the live process a hook recorded at `started_before` (a reused
    pid belongs to a newer process and does not count)."""
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and proc.create_time() <= started_before + 1
    except psutil.Error:
        return False


# -- running crawls ---------------------------------------------------------------------------


def new_collection(root: Path, settings: dict, plugin_settings: dict | None = None,
                   plugin_dirs: list[Path] | None = None) -> Waybox:
    """An initialised collection that only runs the named fixture plugins."""
    wb = Waybox(root / "collection")
    wb.data_dir.mkdir(parents=True)
    wb("init")
    dirs = ":".join(str(d) for d in (plugin_dirs or [PLUGINS_DIR]))
    base = {"PLUGIN_DIRS": dirs, "RETRY_BACKOFF": 0, "BG_HOOK_GRACE": 1, **settings}
    wb("config", *[a for k, v in base.items() for a in ("--set", f"{k}={v}")])
    if plugin_settings:  # plugin keys exist only once PLUGIN_DIRS is set
        wb("config", *[a for k, v in plugin_settings.items() for a in ("--set", f"{k}={v}")])
    return wb


@dataclass
class Run:
    """One finished crawl: the collection, the crawl id and what `waybox list --json` says."""

    wb: Waybox
    crawl_id: str
    add: subprocess.CompletedProcess
    snapshots: list[dict] = field(default_factory=list)
    pids_after_add: dict[str, bool] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return self.wb.data_dir

    def refresh(self) -> None:
        self.snapshots = self.wb.json("list", "--json", "--crawl", self.crawl_id)

    def snapshot(self, url: str = URL) -> dict:
        matches = [s for s in self.snapshots if s["url"] == url]
        assert len(matches) == 1, f"{len(matches)} snapshots of {url}: {[s['url'] for s in self.snapshots]}"
        return matches[0]

    def result(self, hook_name: str, url: str = URL) -> dict:
        results = [r for r in self.snapshot(url)["archiveresults"] if r["hook_name"] == hook_name]
        assert len(results) == 1, f"{hook_name}: {self.snapshot(url)['archiveresults']}"
        return results[0]

    def folder(self, url: str = URL) -> Path:
        return self.root / "archive" / self.snapshot(url)["id"]

    def crawl_folder(self) -> Path:
        return self.root / "crawls" / self.crawl_id

    def read(self, relative: str, url: str = URL):
        return json.loads((self.folder(url) / relative).read_text())

    def hook_log(self, hook_name: str, stream: str = "stderr", url: str = URL) -> str:
        logs = self.folder(url) / ".hooks"
        (path,) = logs.glob(f"*/{hook_name}.{stream}.log")
        return path.read_text(errors="replace")

    def db(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        with contextlib.closing(sqlite3.connect(f"file:{self.root / 'index.sqlite3'}?mode=ro", uri=True,
                                                timeout=30)) as conn:
            conn.row_factory = sqlite3.Row
            return list(conn.execute(sql, params))

    def crawl_results(self) -> dict[str, sqlite3.Row]:
        """The ArchiveResults of Crawl and CrawlEnd hooks (not in `waybox list`), by hook name."""
        hexid = self.crawl_id.replace("-", "")
        rows = self.db("SELECT * FROM waybox_archiveresult WHERE crawl_id = ? AND snapshot_id IS NULL", (hexid,))
        return {r["hook_name"]: r for r in rows}


def run_crawl(wb: Waybox, *urls: str, args: tuple[str, ...] = (), env: dict | None = None,
              settle_first: bool = True) -> Run:
    """`waybox add` in the foreground, then wait for the orchestrator to go idle and exit."""
    add = wb("add", *args, *urls, env=env, timeout=ADD_TIMEOUT_S)
    crawl_id = add.stdout.strip().splitlines()[-1]
    if settle_first:
        left = settle(wb.data_dir.parent)
        assert not left, f"still running {SETTLE_S}s after the crawl sealed: {kill_all(left)}"
    run = Run(wb, crawl_id, add)
    run.refresh()
    return run


def spans(folder: Path) -> dict[str, dict]:
    """Every `<hook>.span.json` under a folder, by hook name."""
    return {p.name[: -len(".span.json")]: json.loads(p.read_text()) for p in folder.rglob("*.span.json")}


def overlap(a: dict, b: dict) -> bool:
    return a["start"] < b["end"] and b["start"] < a["end"]


def ts(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


# -- pure: hook names and plugin discovery ----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "step", "background", "numbered"),
    [
        ("on_Snapshot__00_setup.py", 0, False, True),
        ("on_Snapshot__20_chrome_tab.bg.js", 2, True, True),
        ("on_Snapshot__63_ytdlp.finite.bg.py", 6, True, True),
        ("on_Snapshot__64_x.daemon.bg.sh", 6, True, True),
        ("on_Crawl__10_launch.bg.py", 1, True, True),
        ("on_CrawlEnd__90_stop.py", 9, False, True),
        ("on_Snapshot__index.py", 9, False, False),
    ],
)
def test_hook_name_parsing(tmp_path: Path, name: str, step: int, background: bool, numbered: bool) -> None:
    """Step = first digit of NN (unnumbered: 9); any `.bg.` makes a hook background."""
    path = tmp_path / name
    path.write_text("")
    hook = parse_hook_name("demo", path)
    assert (hook.step, hook.background, hook.numbered) == (step, background, numbered)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("on_Snapshot_10_single_underscore.py", "does not parse"),
        ("on_Page__10_unknown_model.py", "unknown model"),
        ("on_Snapshot__10_ruby.rb", "no interpreter"),
        ("on_Snapshot__10_noext", "does not parse"),
    ],
)
def test_unusable_hook_names_are_refused_with_file_and_reason(tmp_path: Path, name: str, reason: str) -> None:
    path = tmp_path / name
    path.write_text("")
    with pytest.raises(PluginError) as err:
        parse_hook_name("demo", path)
    assert str(path) in str(err.value) and reason in str(err.value)


def test_discovery_skips_broken_plugins_and_keeps_good_ones(tmp_path: Path) -> None:
    write_broken_plugins(tmp_path)
    registry = discover([PLUGINS_DIR, tmp_path])
    assert {"timeline", "excl_a", "excl_b", "envdump"} <= set(registry.plugins)
    assert not {"badjson", "badname", "badinterp"} & set(registry.plugins)
    problems = "\n".join(registry.problems)
    assert str(tmp_path / "badjson" / "config.json") in problems and "not valid JSON" in problems
    assert str(tmp_path / "badname" / "on_Snapshot_1x_bad.py") in problems
    assert str(tmp_path / "badinterp" / "on_Snapshot__10_run.rb") in problems and "interpreter" in problems
    assert registry.plugins["excl_a"].exclusive == registry.plugins["excl_b"].exclusive == "browser_tab"
    assert any("on_Snapshot__late.py" in w and "step 9" in w for w in registry.warnings)
    # launch order is filename order, across plugins
    hooks = registry.hooks_for("Snapshot", {"timeline", "excl_a", "excl_b"})
    assert [h.name for h in hooks] == sorted(h.name for h in hooks)
    assert [h.step for h in hooks] == sorted(h.step for h in hooks)
    assert hooks[-1].name == "on_Snapshot__late.py" and hooks[-1].step == 9


def write_broken_plugins(root: Path) -> None:
    """Three broken plugins; each has a hook that would leave a marker file if it ever ran."""
    marker = 'open("RAN", "w").write("x")\n'
    (root / "badjson").mkdir()
    (root / "badjson" / "config.json").write_text('{"type": "object", "properties": {')
    (root / "badjson" / "on_Snapshot__10_run.py").write_text(marker)
    (root / "badname").mkdir()
    (root / "badname" / "on_Snapshot_1x_bad.py").write_text(marker)
    (root / "badname" / "on_Snapshot__10_run.py").write_text(marker)
    (root / "badinterp").mkdir()
    (root / "badinterp" / "on_Snapshot__10_run.rb").write_text("File.write('RAN', 'x')\n")
    (root / "badinterp" / "on_Snapshot__11_run.py").write_text(marker)


# -- the ten steps: ordering, overlap, exclusive resources, background hooks -----------------


TIMELINE_BG = ("on_Snapshot__20_longbg.bg.py", "on_Snapshot__21_stubborn.bg.py", "on_Snapshot__22_daemon.bg.py")


@pytest.fixture(scope="module")
def timeline(tmp_path_factory: pytest.TempPathFactory):
    """One crawl of the `timeline`, `excl_a` and `excl_b` fixture plugins: span-recording hooks
    in every step, two step-1 hooks that wait for each other, three step-5 hooks sharing the
    exclusive resource "browser_tab", three background hooks started in step 2, and one
    (bgslow) started in step 0 with a 1 s timeout."""
    root = tmp_path_factory.mktemp("timeline")
    wb = new_collection(root, {"PLUGINS": "timeline,excl_a,excl_b,bgslow", "TIMEOUT": 60, "MAX_ATTEMPTS": 1},
                        {"BGSLOW_TIMEOUT": 1})
    try:
        run = run_crawl(wb, URL, settle_first=False)
        run.pids_after_add = background_pids(run)  # before settling: what the seal left alive
        left = settle(root)
        assert not left, f"still running {SETTLE_S}s after the crawl sealed: {kill_all(left)}"
        run.refresh()
        yield run
    finally:
        assert_no_leftovers(root)


def background_pids(run: Run) -> dict[str, bool]:
    """The processes the background hooks recorded, and whether each is alive right now."""
    folder = run.folder() / "timeline"
    out = {}
    for name, keys in (("longbg", ("pid",)), ("stubborn", ("pid", "child")), ("daemon", ("daemon",))):
        info = json.loads((folder / f"{name}.info").read_text())
        for key in keys:
            out[f"{name}.{key}"] = pid_alive(info[key], info["time"])
    return out


def test_foreground_steps_never_overlap(timeline: Run) -> None:
    recorded = spans(timeline.folder())
    assert len(recorded) == 14, sorted(recorded)
    steps = {name: parse_hook_name("x", Path(name)).step for name in recorded}
    for a, b in combinations(recorded, 2):
        if steps[a] == steps[b]:
            continue
        first, second = (a, b) if steps[a] < steps[b] else (b, a)
        assert recorded[first]["end"] <= recorded[second]["start"], f"{first} (step {steps[first]}) overlaps {second}"


def test_hooks_of_one_step_run_at_the_same_time(timeline: Run) -> None:
    recorded = spans(timeline.folder())
    a, b = recorded["on_Snapshot__10_pair_a.py"], recorded["on_Snapshot__11_pair_b.py"]
    assert overlap(a, b), (a, b)
    first, second = timeline.result("on_Snapshot__10_pair_a.py"), timeline.result("on_Snapshot__11_pair_b.py")
    assert ts(first["started_at"]) <= ts(second["started_at"]), "launch order is filename order"
    for name in ("on_Snapshot__10_pair_a.py", "on_Snapshot__11_pair_b.py"):
        assert timeline.result(name)["status"] == "succeeded"


def test_exclusive_hooks_never_overlap_and_run_in_filename_order(timeline: Run) -> None:
    recorded = spans(timeline.folder())
    names = ["on_Snapshot__50_dom.py", "on_Snapshot__51_shot.py", "on_Snapshot__52_pdf.py"]
    exclusive = [recorded[n] for n in names]
    for a, b in combinations(exclusive, 2):
        assert not overlap(a, b), (a, b)
    assert [s["start"] for s in exclusive] == sorted(s["start"] for s in exclusive)
    plugins = {p["plugin"]: p for p in timeline.wb.json("plugins", "--json")}
    assert plugins["excl_a"]["exclusive"] == plugins["excl_b"]["exclusive"] == "browser_tab"


def test_unnumbered_hook_runs_in_step_nine_with_a_warning(timeline: Run) -> None:
    recorded = spans(timeline.folder())
    late = recorded["on_Snapshot__late.py"]
    before = [span for name, span in recorded.items() if parse_hook_name("x", Path(name)).step < 9]
    assert len(before) == 12 and all(span["end"] <= late["start"] for span in before)
    plugins = timeline.wb("plugins", "--json")
    assert "on_Snapshot__late.py" in plugins.stderr and "step 9" in plugins.stderr
    hooks = {h["name"]: h for p in json.loads(plugins.stdout) if p["plugin"] == "timeline" for h in p["hooks"]}
    assert hooks["on_Snapshot__late.py"]["step"] == 9 and hooks["on_Snapshot__late.py"]["numbered"] is False
    assert hooks["on_Snapshot__20_longbg.bg.py"]["background"] is True


def test_every_hook_has_one_archiveresult(timeline: Run) -> None:
    results = timeline.snapshot()["archiveresults"]
    names = sorted(r["hook_name"] for r in results)
    expected = sorted(p.name for plugin in ("timeline", "excl_a", "excl_b", "bgslow")
                      for p in (PLUGINS_DIR / plugin).glob("on_Snapshot__*"))
    assert names == expected
    assert all(r["attempts"] == 1 for r in results), results
    foreground = [r for r in results if ".bg." not in r["hook_name"]]
    assert {r["status"] for r in foreground} == {"succeeded"}, foreground


def test_background_hook_keeps_running_across_steps(timeline: Run) -> None:
    check = timeline.read("timeline/check.json")
    assert check["alive"] == {"longbg": True, "stubborn": True, "daemon": True}
    recorded = spans(timeline.folder())
    # launched in step 2 (after step 1 ended, before step 3 began), seen alive in step 5
    launched = ts(timeline.result("on_Snapshot__20_longbg.bg.py")["started_at"])
    assert recorded["on_Snapshot__11_pair_b.py"]["end"] <= launched <= recorded["on_Snapshot__30_adjust.py"]["start"]
    assert recorded["on_Snapshot__50_check.py"]["start"] <= check["time"]
    assert spans(timeline.folder())["on_Snapshot__40_ready.py"]["end"] <= recorded["on_Snapshot__50_check.py"]["start"]


def test_background_hooks_are_gone_after_the_seal(timeline: Run) -> None:
    """SIGTERM at the seal, SIGKILL after BG_HOOK_GRACE to the whole group, `.pid` daemons too:
    all of it done by the time `waybox add` returns."""
    assert timeline.pids_after_add == dict.fromkeys(timeline.pids_after_add, False)
    folder = timeline.folder() / "timeline"
    assert (folder / "longbg.term").exists(), "longbg got SIGTERM"
    assert (folder / "stubborn.term").exists(), "stubborn got SIGTERM first (and ignored it)"
    snapshot = timeline.snapshot()
    assert snapshot["status"] == "sealed"
    sealed_at = ts(snapshot["ended_at"])
    assert json.loads((folder / "stubborn.term").read_text())["time"] >= sealed_at - 1


def test_background_results_are_finished_from_what_they_wrote(timeline: Run) -> None:
    for name in TIMELINE_BG:
        result = timeline.result(name)
        assert result["status"] == "succeeded", result  # each left files in its folder
        assert result["ended_at"] is not None


def test_background_hook_past_its_timeout_is_stopped(timeline: Run) -> None:
    result = timeline.result("on_Snapshot__05_sleep.bg.py")
    assert result["status"] == "failed" and "timed out after 1 s" in result["output_str"], result
    assert ts(result["ended_at"]) < ts(timeline.snapshot()["ended_at"]), "stopped at its timeout, before the seal"
    info = json.loads((timeline.folder() / "bgslow" / "bgslow.info").read_text())
    assert not pid_alive(info["pid"], info["time"]) and not pid_alive(info["child"], info["time"])


def test_index_json_lists_the_results(timeline: Run) -> None:
    index = timeline.read("index.json")
    snapshot = timeline.snapshot()
    assert index["id"] == snapshot["id"] and index["status"] == "sealed"
    indexed = {r["hook_name"]: r["status"] for r in index["results"]}
    listed = {r["hook_name"]: r["status"] for r in snapshot["archiveresults"]}
    assert sorted(indexed) == sorted(listed)
    foreground = [name for name in listed if ".bg." not in name]
    assert {n: indexed[n] for n in foreground} == {n: listed[n] for n in foreground}


def test_index_json_matches_the_database_once_background_hooks_finished(timeline: Run) -> None:
    indexed = {r["hook_name"]: r["status"] for r in timeline.read("index.json")["results"]}
    assert indexed == {r["hook_name"]: r["status"] for r in timeline.snapshot()["archiveresults"]}


# -- hook output and exit codes ---------------------------------------------------------------


OUTPUT_PLUGINS = "outputs,liveinfo,fgdaemon,slow,slowfb,sealcheck"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory):
    """One crawl of hooks that exercise every outcome: garbage output, exit codes 0/1/10, soft
    failures, records then a crash, paths outside the Snapshot folder, a live title, a daemon
    left by a foreground hook, and two timeouts (SLOW_TIMEOUT=4, and TIMEOUT=5 as fallback).
    Hard failures back off for 600 s, so each hook has run exactly once here. The CrawlEnd
    hook of `sealcheck` records which daemons were still alive once every Snapshot sealed."""
    root = tmp_path_factory.mktemp("outputs")
    wb = new_collection(
        root,
        {"PLUGINS": OUTPUT_PLUGINS, "TIMEOUT": 5, "RETRY_BACKOFF": 600, "MAX_ATTEMPTS": 3},
        {"OUTPUTS_TIMEOUT": 60, "LIVEINFO_TIMEOUT": 60, "FGDAEMON_TIMEOUT": 60, "SEALCHECK_TIMEOUT": 60,
         "SLOW_TIMEOUT": 4},
    )
    try:
        yield run_crawl(wb, URL)
    finally:
        assert_no_leftovers(root)


def test_garbage_output_is_logged_with_line_numbers_and_the_run_succeeds(outputs: Run) -> None:
    hook = "on_Snapshot__10_garbage.py"
    result = outputs.result(hook)
    assert result["status"] == "succeeded", result
    assert result["output_str"] == "garbage survived"
    log = outputs.hook_log(hook)
    expected = {
        1: "not JSON",
        2: "invalid JSON",
        3: "longer than",
        4: "invalid UTF-8",
        5: "unknown record type 'Bogus'",
        6: "'type'",
        8: "nested too deeply",
        9: "NaN",
        10: "invalid JSON",
        11: "bad ArchiveResult record",
        12: "bad Tag record",
    }
    lines = [line for line in log.splitlines() if "stdout line" in line]
    for number, words in expected.items():
        assert any(f"stdout line {number}:" in line and words in line for line in lines), (number, lines)
    assert not any("stdout line 7:" in line for line in lines), "a blank line is not a problem"
    assert len(log) < 100_000, "the 10 MB line itself is not copied into the log"
    # the lines after the garbage were still applied, the invalid-UTF-8 one was not
    tags = outputs.snapshot()["tags"]
    assert "after-garbage" in tags and not {"bad-utf8", "big", "a", "b"} & set(tags)


@pytest.mark.parametrize(
    ("hook", "status", "retried", "text"),
    [
        ("on_Snapshot__11_soft.py", "failed", False, "404 Not Found"),
        ("on_Snapshot__12_hard.py", "backoff", True, "exited with code 1"),
        ("on_Snapshot__13_skip.py", "skipped", False, ""),
        ("on_Snapshot__14_files.py", "succeeded", False, ""),
        ("on_Snapshot__17_skiprecord.py", "skipped", False, "nothing to do for this URL"),
        ("on_Snapshot__18_success.py", "succeeded", False, "sub/page.html"),
    ],
)
def test_exit_codes_and_reported_statuses(outputs: Run, hook: str, status: str, retried: bool, text: str) -> None:
    """BRIEF 3.2: exit 0 + failed record = soft failure; non-zero = back-off; exit 10 or a
    skipped record = skipped; exit 0 with files and no record = succeeded."""
    result = outputs.result(hook)
    assert result["status"] == status, result
    assert result["attempts"] == 1
    assert (result["retry_at"] is not None) == retried, result
    assert text in result["output_str"]


def test_success_record_fields(outputs: Run) -> None:
    result = outputs.result("on_Snapshot__18_success.py")
    assert result["output_files"] == ["outputs/sub/page.html"]
    assert result["output_json"] == {"bytes": 13}
    assert (outputs.folder() / result["output_files"][0]).is_file()


def test_exit_zero_without_record_or_files_of_its_own_is_skipped(outputs: Run) -> None:
    """`outputs/` already holds files of the plugin's earlier hooks; this hook left none."""
    result = outputs.result("on_Snapshot__20_nothing.py")
    assert result["status"] == "skipped", result


def test_hard_failure_backs_off_exponentially(outputs: Run) -> None:
    result = outputs.result("on_Snapshot__12_hard.py")
    delay = ts(result["retry_at"]) - ts(result["ended_at"])
    assert 590 <= delay <= 610, delay  # RETRY_BACKOFF after the 1st attempt
    assert "attempt 1 of 3" in result["output_str"]


def test_records_before_a_crash_are_kept(outputs: Run) -> None:
    result = outputs.result("on_Snapshot__15_crash.py")
    assert result["status"] in ("backoff", "failed"), result
    assert result["retry_at"] is not None
    assert "partial.txt" in result["output_str"]
    assert result["output_files"] == ["outputs/partial.txt"]
    assert "partial-tag" in outputs.snapshot()["tags"]
    assert "RuntimeError" in outputs.hook_log("on_Snapshot__15_crash.py")


def test_paths_outside_the_snapshot_folder_are_rejected(outputs: Run) -> None:
    result = outputs.result("on_Snapshot__16_escape.py")
    assert result["output_files"] == ["outputs/inside.txt"], result
    assert "../../etc/passwd" not in result["output_files"]
    # the rejection is an error on the ArchiveResult, not only a line in a log
    assert "rejected" in result["output_str"] and "../../etc/passwd" in result["output_str"], result
    assert "/etc/passwd" in result["output_str"] and "../../../outside.txt" in result["output_str"], result
    log = outputs.hook_log("on_Snapshot__16_escape.py")
    assert "../../etc/passwd" in log and "absolute path '/etc/passwd'" in log


def test_timeout_uses_plugin_timeout_and_kills_the_group(outputs: Run) -> None:
    """SLOW_TIMEOUT=4: SIGTERM (ignored by the hook), then SIGKILL to its whole group."""
    slow = outputs.result("on_Snapshot__40_sleep.py")
    assert "timed out after 4 s" in slow["output_str"], slow
    assert slow["status"] == "backoff", slow  # a timeout is a hard failure
    info = json.loads((outputs.folder() / "slow" / "slow.info").read_text())
    assert info["args"]["timeout"] == "4"
    assert (outputs.folder() / "slow" / "slow.term").exists(), "SIGTERM came first"
    assert not pid_alive(info["pid"], info["time"]) and not pid_alive(info["child"], info["time"])
    sealcheck = json.loads((outputs.crawl_folder() / "sealcheck" / "sealcheck.json").read_text())
    assert sealcheck["slow/slow.pid"] is False and sealcheck["slow/slow.child"] is False


def test_timeout_falls_back_to_TIMEOUT(outputs: Run) -> None:
    slowfb = outputs.result("on_Snapshot__41_sleep_fallback.py")
    assert "timed out after 5 s" in slowfb["output_str"], slowfb
    info = json.loads((outputs.folder() / "slowfb" / "slowfb.info").read_text())
    assert info["args"]["timeout"] == "5" and info["env_timeout"] == "5"
    assert not pid_alive(info["pid"], info["time"])


def test_title_is_visible_before_the_hook_ends(outputs: Run) -> None:
    seen = json.loads((outputs.folder() / "liveinfo" / "seen.json").read_text())
    assert seen, (outputs.folder() / "liveinfo" / "seen.stderr").read_text()
    (snapshot,) = [s for s in seen if s["url"] == URL]
    assert snapshot["title"] == "Live Title"
    assert "live-tag" in snapshot["tags"]
    (me,) = [r for r in snapshot["archiveresults"] if r["hook_name"] == "on_Snapshot__30_title.py"]
    assert me["status"] == "started"
    assert outputs.snapshot()["title"] == "Live Title"


def test_daemon_of_a_foreground_hook_is_swept_at_the_seal(outputs: Run) -> None:
    """The hook exited long before the seal; its daemon (named only by a .pid file) must
    not outlive the Snapshot: by the time the CrawlEnd hook runs it is gone."""
    assert outputs.result("on_Snapshot__19_fork.py")["status"] == "succeeded"
    sealcheck = json.loads((outputs.crawl_folder() / "sealcheck" / "sealcheck.json").read_text())
    assert sealcheck["fgdaemon/fgdaemon.pid"] is False  # the hook itself
    assert sealcheck["fgdaemon/fgdaemon.daemon"] is False, "the daemon outlived the seal"


def test_index_json_is_kept_up_to_date(outputs: Run) -> None:
    index = outputs.read("index.json")
    def key(r: dict) -> tuple:
        return r["status"], r["attempts"], r["output_str"], r["output_files"]

    listed = {r["hook_name"]: key(r) for r in outputs.snapshot()["archiveresults"]}
    indexed = {r["hook_name"]: key(r) for r in index["results"]}
    assert indexed == listed
    assert index["title"] == "Live Title"


# -- retries: back-off, MAX_ATTEMPTS, `waybox update [--failed]` -------------------------------


def test_retry_with_backoff_until_max_attempts_then_update_failed(tmp_path: Path) -> None:
    """A hook that always exits 1: back-off of RETRY_BACKOFF * 2^(attempt-1) after each attempt,
    `waybox update` re-runs it, the 3rd attempt is final (failed), plain `update` leaves it
    alone, `update --failed` runs it again from attempt 1. Its succeeding sibling never re-runs."""
    wb = new_collection(tmp_path, {"PLUGINS": "flaky", "RETRY_BACKOFF": 600, "MAX_ATTEMPTS": 3, "TIMEOUT": 60})
    run = run_crawl(wb, URL)
    fail, ok = "on_Snapshot__10_fail.py", "on_Snapshot__11_ok.py"
    log = run.folder() / "flaky" / "attempts.log"

    def check(attempts: int, status: str, delay: float | None, runs: int | None = None) -> dict:
        run.refresh()
        result = run.result(fail)
        assert (result["attempts"], result["status"]) == (attempts, status), result
        assert len(log.read_text().splitlines()) == (runs or attempts)
        if delay is None:
            assert result["retry_at"] is None, result
        else:
            assert delay - 10 <= ts(result["retry_at"]) - ts(result["ended_at"]) <= delay + 10, result
        return result

    check(1, "backoff", 600)
    assert "attempt 1 of 3" in run.result(fail)["output_str"]
    wb("update")
    assert not settle(tmp_path)
    check(2, "backoff", 1200)
    wb("update")
    assert not settle(tmp_path)
    final = check(3, "failed", None)
    assert "giving up" in final["output_str"]

    quiet = wb("update")
    assert "0 result(s) due" in quiet.stderr
    check(3, "failed", None)

    wb("update", "--failed")
    assert not settle(tmp_path)
    check(1, "backoff", 600, runs=4)
    ok_result = run.result(ok)
    assert (ok_result["status"], ok_result["attempts"]) == ("succeeded", 1), ok_result
    assert len((run.folder() / "flaky" / "ok-runs.log").read_text().splitlines()) == 1
    index = {r["hook_name"]: r for r in run.read("index.json")["results"]}
    assert (index[fail]["status"], index[fail]["attempts"]) == ("backoff", 1)


# -- discovered links: depth, once per URL per Crawl, allow/deny lists ------------------------


BASE = "http://127.0.0.1:9"


@pytest.fixture(scope="module")
def discovered(tmp_path_factory: pytest.TempPathFactory):
    """`waybox add --depth 2 /root`, with the `links` plugin reporting links at every level,
    URL_DENYLIST=deny, an allowlist for 127.0.0.1:9 and MAX_CONCURRENT_HOOKS=1."""
    root = tmp_path_factory.mktemp("discovered")
    wb = new_collection(root, {
        "PLUGINS": "links", "TIMEOUT": 60, "URL_DENYLIST": "deny", "URL_ALLOWLIST": r"^http://127\.0\.0\.1:9/",
        "MAX_CONCURRENT_HOOKS": 1,
    })
    try:
        yield run_crawl(wb, f"{BASE}/root", args=("--depth", "2"))
    finally:
        assert_no_leftovers(root)


def test_discovered_links_become_child_snapshots_up_to_the_depth(discovered: Run) -> None:
    by_url = {s["url"]: s for s in discovered.snapshots}
    assert sorted(by_url) == [f"{BASE}/{p}" for p in ("a", "b", "c", "root")], sorted(by_url)
    assert {u: s["depth"] for u, s in by_url.items()} == {
        f"{BASE}/root": 0, f"{BASE}/a": 1, f"{BASE}/b": 1, f"{BASE}/c": 2}
    assert all(s["status"] == "sealed" and s["crawl_id"] == discovered.crawl_id for s in by_url.values())
    # /c (depth 2) reported /d: depth 3 is beyond --depth 2
    assert f"{BASE}/d" not in by_url
    # every Snapshot ran the hooks, and its own-url record set its title
    for url, snapshot in by_url.items():
        assert {r["status"] for r in snapshot["archiveresults"]} == {"succeeded"}, snapshot
        assert snapshot["title"] == f"page {url[len(BASE):]}"
    assert "discovered" in by_url[f"{BASE}/a"]["tags"]


def test_discovered_links_once_per_url_with_parents(discovered: Run) -> None:
    """/b was reported three times (twice by /root, once by /a), /c by /a and /b."""
    ids = {s["url"]: s["id"] for s in discovered.snapshots}
    parents = {url: discovered.read("index.json", url)["parent_id"] for url in ids}
    assert parents[f"{BASE}/root"] is None
    assert parents[f"{BASE}/a"] == parents[f"{BASE}/b"] == ids[f"{BASE}/root"]
    assert parents[f"{BASE}/c"] in (ids[f"{BASE}/a"], ids[f"{BASE}/b"])


def test_discovered_links_respect_deny_and_allow_lists(discovered: Run) -> None:
    urls = {s["url"] for s in discovered.snapshots}
    assert not any("deny" in u or "elsewhere" in u for u in urls), urls
    log = discovered.hook_log("on_Snapshot__10_links.py", url=f"{BASE}/root")
    assert "not a url" in log, "an invalid discovered URL is logged"


def test_hostile_records_are_logged_and_ignored(discovered: Run) -> None:
    """Values of the wrong type or size in records (a url that is a number or an object, a
    pid of 10**30, tags as one string) are logged with their line number, never fatal."""
    root = f"{BASE}/root"
    result = discovered.result("on_Snapshot__10_links.py", url=root)
    assert result["status"] == "succeeded", result
    assert result["output_files"] == ["links/links-single.txt"], "one path as a string is a list of one"
    log = discovered.hook_log("on_Snapshot__10_links.py", url=root)
    assert "bad Snapshot record: url must be a string, not int" in log
    assert "bad Snapshot record: url must be a string, not dict" in log
    assert "javascript:alert(1)" in log
    tags = discovered.snapshot(root)["tags"]
    assert "solo-tag" in tags and not [t for t in tags if len(t) == 1], tags
    rows = discovered.db("SELECT pid, exit_code, cmd FROM waybox_process WHERE process_type = 'binary'")
    assert [(r["pid"], r["exit_code"]) for r in rows] == [(None, None)], "out-of-range numbers are dropped"


def test_an_invalid_url_regex_is_logged_not_fatal(tmp_path: Path) -> None:
    """URL_DENYLIST="(" is no regex: each discovered link is logged and dropped; the crawl
    still finishes (it used to raise re.error out of the worker's tick and never seal)."""
    wb = new_collection(tmp_path, {"PLUGINS": "links", "TIMEOUT": 60, "URL_DENYLIST": "("})
    run = run_crawl(wb, f"{BASE}/root", args=("--depth", "1"))
    assert [s["url"] for s in run.snapshots] == [f"{BASE}/root"]
    assert run.result("on_Snapshot__10_links.py", url=f"{BASE}/root")["status"] == "succeeded"
    log = run.hook_log("on_Snapshot__10_links.py", url=f"{BASE}/root")
    assert "URL_DENYLIST is not a valid regular expression" in log


def test_max_concurrent_hooks_bounds_the_machine(discovered: Run) -> None:
    recorded = [s for snap in discovered.snapshots for s in spans(discovered.root / "archive" / snap["id"]).values()]
    assert len(recorded) == 8
    for a, b in combinations(recorded, 2):
        assert not overlap(a, b), (a, b)


def test_background_hooks_beyond_max_concurrent_hooks_do_not_stall(tmp_path: Path) -> None:
    """Three background hooks in step 1 that run until the seal, MAX_CONCURRENT_HOOKS=2: the
    Snapshot must still go through (not wait for BURST_TIMEOUT to free a slot)."""
    wb = new_collection(tmp_path, {"PLUGINS": "burst", "MAX_CONCURRENT_HOOKS": 2, "MAX_ATTEMPTS": 1, "TIMEOUT": 60},
                        {"BURST_TIMEOUT": 6})
    run = run_crawl(wb, URL)
    results = {r["hook_name"]: r for r in run.snapshot()["archiveresults"]}
    assert results["on_Snapshot__20_wait.py"]["status"] == "succeeded"
    timed_out = [name for name, r in results.items() if "timed out" in r["output_str"]]
    assert not timed_out, {name: results[name]["output_str"] for name in timed_out}
    for name in ("on_Snapshot__10_bg.bg.py", "on_Snapshot__11_bg.bg.py", "on_Snapshot__12_bg.bg.py"):
        assert results[name]["status"] == "succeeded", results[name]
        assert (run.folder() / "burst" / f"{name}.term").exists(), "stopped by the seal"


# -- the invocation contract, Crawl hooks, broken plugins, secrets ----------------------------


URL2 = "http://127.0.0.1:9/second"
SECRET = "sk-wbx-test-4f9a1c2e7b5d"
CONTRACT_PLUGINS = "envdump,crawlhooks,execplug,twin_a,twin_b,flaky,slowfb,badjson,badname,badinterp"


@pytest.fixture(scope="module")
def contract(tmp_path_factory: pytest.TempPathFactory):
    """Two URLs through hooks that dump what they receive (.py, .sh, .js and an executable),
    Crawl/CrawlEnd hooks, two plugins with the same hook file name, an always-failing hook
    (RETRY_BACKOFF=0, MAX_ATTEMPTS=2), a plugin disabled with SAVE_SLOWFB=false (the alias of
    SLOWFB_ENABLED) and three broken plugins next to the good ones. MY_API_KEY (a secret) is
    set in waybox.toml."""
    root = tmp_path_factory.mktemp("contract")
    extra = root / "more-plugins"
    extra.mkdir()
    write_broken_plugins(extra)
    (extra / "execplug").mkdir()
    exe = extra / "execplug" / "on_Snapshot__13_run.exe"
    exe.write_text('#!/bin/sh\npwd > exe.cwd\nprintf "%s\\n" "$@" > exe.args\n')
    exe.chmod(0o755)
    wb = new_collection(
        root, {"PLUGINS": CONTRACT_PLUGINS, "TIMEOUT": 60, "MAX_ATTEMPTS": 2},
        {"MY_API_KEY": SECRET, "ENVDUMP_TIMEOUT": 45, "SAVE_SLOWFB": False}, plugin_dirs=[PLUGINS_DIR, extra],
    )
    try:
        yield run_crawl(wb, URL, URL2, env={"WAYBOX_TEST_PASSTHROUGH": "passed-through"})
    finally:
        assert_no_leftovers(root)


def test_python_hook_invocation_contract(contract: Run) -> None:
    """BRIEF 2: CWD = archive/<snapshot_id>/<plugin>/, the five arguments, the environment
    (process env + global keys + the plugin's own keys + DATA_DIR/SNAP_DIR/CRAWL_DIR), its
    own process group, waybox's own Python."""
    snapshot = contract.snapshot()
    folder = contract.folder()
    dump = contract.read("envdump/dump_py.json")
    assert dump["cwd"] == str(folder / "envdump")
    assert dump["argv"] == [f"--url={URL}", f"--snapshot-id={snapshot['id']}", f"--crawl-id={contract.crawl_id}",
                            "--depth=0", "--timeout=45"]
    env = dump["env"]
    assert env["DATA_DIR"] == str(contract.root)
    assert env["SNAP_DIR"] == str(folder)
    assert env["CRAWL_DIR"] == str(contract.crawl_folder())
    assert env["ENVDUMP_TIMEOUT"] == "45" and env["TIMEOUT"] == "60" and env["ENVDUMP_GREETING"] == "hello"
    assert env["MY_API_KEY"] == SECRET and env["ENVDUMP_ENABLED"] == "True"
    assert "USER_AGENT" in env and env["MAX_ATTEMPTS"] == "2"
    assert env["WAYBOX_TEST_PASSTHROUGH"] == "passed-through"
    assert "CRAWLHOOKS_SPECIAL" not in env, "another plugin's keys are not passed"
    assert dump["pgid"] == dump["pid"], "each hook leads its own process group"
    assert os.path.samefile(dump["executable"], sys.executable)
    assert contract.result("on_Snapshot__10_dump.py")["status"] == "succeeded"


def test_shell_node_and_executable_hooks(contract: Run) -> None:
    folder = contract.folder() / "envdump"
    snapshot_id = contract.snapshot()["id"]
    assert (folder / "dump_sh.bash").read_text(), "a .sh hook runs with bash"
    assert (folder / "dump_sh.cwd").read_text().strip() == str(folder)
    args = (folder / "dump_sh.args").read_text().splitlines()
    assert args[:2] == [f"--url={URL}", f"--snapshot-id={snapshot_id}"]
    assert (folder / "dump_sh.env").read_text() == "|".join(
        [str(contract.root), str(contract.folder()), str(contract.crawl_folder()), "hello"])
    js = contract.read("envdump/dump_js.json")
    assert js["node"].startswith("v") and js["cwd"] == str(folder)
    assert js["argv"][0] == f"--url={URL}" and js["env"]["SNAP_DIR"] == str(contract.folder())
    exe_folder = contract.folder() / "execplug"
    assert (exe_folder / "exe.cwd").read_text().strip() == str(exe_folder)
    assert (exe_folder / "exe.args").read_text().splitlines()[0] == f"--url={URL}"
    for hook in ("on_Snapshot__11_dump.sh", "on_Snapshot__12_dump.js", "on_Snapshot__13_run.exe"):
        assert contract.result(hook)["status"] == "succeeded"


def test_crawl_hooks_run_once_before_snapshot_hooks_in_the_crawl_folder(contract: Run) -> None:
    crawl_dir = contract.crawl_folder() / "crawlhooks"
    assert len((crawl_dir / "runs.log").read_text().splitlines()) == 1, "once per Crawl, not per Snapshot"
    setup = json.loads((crawl_dir / "setup.json").read_text())
    assert setup["cwd"] == str(crawl_dir)
    assert setup["env"]["CRAWL_DIR"] == str(contract.crawl_folder())
    assert setup["env"]["DATA_DIR"] == str(contract.root)
    assert f"--crawl-id={contract.crawl_id}" in setup["argv"]
    assert not any(a.startswith("--snapshot-id=") for a in setup["argv"])
    setup_span = spans(contract.crawl_folder())["on_Crawl__10_setup.py"]
    for url in (URL, URL2):
        use_span = spans(contract.folder(url))["on_Snapshot__10_use.py"]
        assert setup_span["end"] <= use_span["start"]
        used = contract.read("crawlhooks/used.json", url)
        assert used["endpoint"] == f"ws://fixture-browser/{contract.crawl_id}", "readable through CRAWL_DIR"
        assert used["browser_alive"] is True, "the Crawl's background hook runs during the Snapshots"
        assert contract.snapshot(url)["archiveresults"]


def test_crawl_end_hooks_run_after_every_snapshot_sealed(contract: Run) -> None:
    end_span = spans(contract.crawl_folder())["on_CrawlEnd__90_end.py"]
    for url in (URL, URL2):
        assert ts(contract.snapshot(url)["ended_at"]) <= end_span["start"]
    end = json.loads((contract.crawl_folder() / "crawlhooks" / "end.json").read_text())
    assert end["cwd"] == str(contract.crawl_folder() / "crawlhooks")
    assert end["browser_alive"] is True, "Crawl background hooks are stopped when the Crawl seals, not before"
    results = contract.crawl_results()
    assert {name: r["status"] for name, r in results.items()} == {
        "on_Crawl__10_setup.py": "succeeded",
        "on_Crawl__20_browser.bg.py": "succeeded",
        "on_CrawlEnd__90_end.py": "succeeded",
    }


def test_crawl_background_hook_is_stopped_when_the_crawl_seals(contract: Run) -> None:
    crawl_dir = contract.crawl_folder() / "crawlhooks"
    info = json.loads((crawl_dir / "browser.info").read_text())
    assert (crawl_dir / "browser.term").exists(), "SIGTERM at the Crawl's seal"
    assert not pid_alive(info["pid"], info["time"])
    (crawl,) = contract.db("SELECT status, ended_at FROM waybox_crawl")
    assert crawl["status"] == "sealed"


def test_broken_plugins_are_reported_and_the_others_still_run(contract: Run) -> None:
    stderr = contract.add.stderr
    extra = contract.root.parent / "more-plugins"
    for path in ("badjson/config.json", "badname/on_Snapshot_1x_bad.py", "badinterp/on_Snapshot__10_run.rb"):
        assert str(extra / path) in stderr.replace("\n", ""), (path, stderr)
    assert not list(contract.root.rglob("RAN")), "no hook of a broken plugin ran"
    plugins = {r["plugin"] for s in contract.snapshots for r in s["archiveresults"]}
    assert not plugins & {"badjson", "badname", "badinterp"}
    assert {"envdump", "crawlhooks", "execplug", "flaky"} <= plugins
    listing = contract.wb("plugins", "--json")
    assert "badjson" in listing.stderr and "not valid JSON" in listing.stderr.replace("\n", "")
    assert "badjson" not in {p["plugin"] for p in json.loads(listing.stdout)}


def test_a_disabled_plugin_gets_no_results_and_never_runs(contract: Run) -> None:
    for snapshot in contract.snapshots:
        assert not [r for r in snapshot["archiveresults"] if r["plugin"] == "slowfb"]
    assert not list(contract.root.glob("archive/*/slowfb"))
    plugins = {p["plugin"]: p for p in contract.wb.json("plugins", "--json")}
    assert plugins["slowfb"]["enabled"] is False and plugins["envdump"]["enabled"] is True


def test_hard_failure_retried_at_once_with_zero_backoff(contract: Run) -> None:
    """RETRY_BACKOFF=0 retries at once; MAX_ATTEMPTS=2 makes the 2nd attempt final."""
    for url in (URL, URL2):
        result = contract.result("on_Snapshot__10_fail.py", url)
        assert (result["status"], result["attempts"], result["retry_at"]) == ("failed", 2, None), result
        assert len((contract.folder(url) / "flaky" / "attempts.log").read_text().splitlines()) == 2


def test_same_hook_file_name_in_two_plugins(contract: Run) -> None:
    results = [r for r in contract.snapshot()["archiveresults"] if r["hook_name"] == "on_Snapshot__10_twin.py"]
    assert sorted(r["output_str"] for r in results) == ["twin a", "twin b"]


def test_secrets_never_land_in_process_rows_or_logs(contract: Run) -> None:
    listing = contract.wb("process", "list", "--json", "--limit", "1000")
    assert SECRET not in listing.stdout
    rows = json.loads(listing.stdout)
    hooks = [r for r in rows if r["type"] == "hook" and "envdump" in r["pwd"]]
    assert hooks and all(r["env"].get("MY_API_KEY") != SECRET for r in hooks)
    assert any(r["env"].get("MY_API_KEY") for r in hooks), "the key is listed, its value redacted"
    assert SECRET not in contract.wb("process", "tree", "--json").stdout
    for table in ("waybox_process", "waybox_archiveresult", "waybox_crawl", "waybox_snapshot"):
        for row in contract.db(f"SELECT * FROM {table}"):  # noqa: S608 - fixed table names
            assert SECRET not in " ".join(str(v) for v in tuple(row)), table
    for path in [*contract.root.glob("logs/**/*"), *contract.root.glob("archive/*/.hooks/*/*"),
                 *contract.root.glob("crawls/*/.hooks/*/*")]:
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
