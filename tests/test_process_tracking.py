"""Process tracking against real processes: PID reuse, double-forked daemons, SIGKILL after
the grace period, reaping, crash recovery, secrets, exit codes, parent links, the CLI and
the admin tree view.

No mocks: every test starts real processes, and the `tracker` fixture kills whatever a
test started (by psutil handle, which refuses to signal a recycled PID) even when it fails.
Waits have generous timeouts and no assertion is about how long something took.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import uuid
from datetime import timedelta
from pathlib import Path

import psutil
import pytest

from tests.conftest import Waybox

WAIT = 60  # seconds: an upper bound for things that should take milliseconds

SECRETS = {
    "API_KEY": "sk-live-4f9a1c2e7b",
    "GITHUB_TOKEN": "ghp-0a1b2c3d4e5f6a7b",
    "CLIENT_SECRET": "cs-9z8y7x6w5v",
    "DB_PASSWORD": "hunter2-but-longer",
    "SESSION_COOKIE": "sessionid=abcdef0123456789",
    "X_AUTH_HEADER": "Bearer eyJhbGciOi.payload.sig",
}

# A hook that starts three things that outlive a careless kill: a child in its own process
# group, a classic double-forked daemon that keeps the environment (and with it the
# WAYBOX_PROCESS_ID marker) but writes no pid file, and one that clears its environment and
# only declares itself through `daemon.pid` in the working folder. The pipe tells the hook
# when the daemons have exec'd: its write end is close-on-exec.
HOOK = textwrap.dedent(
    """
    import os, subprocess, sys, time

    def daemon(pidfile, env):
        # classic double fork; returns the pid of the middle child, which exits at once
        middle = os.fork()
        if middle:
            return middle
        os.setsid()
        if os.fork():
            os._exit(0)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        if pidfile:
            with open(pidfile + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(pidfile + ".tmp", pidfile)
        os.execve(SLEEP, ["sleep", "300"], env)

    SLEEP = sys.argv[1]
    r, w = os.pipe()
    group_child = subprocess.Popen([SLEEP, "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    middles = [daemon(None, dict(os.environ)), daemon("daemon.pid", {})]
    os.close(w)
    os.read(r, 1)  # EOF once both daemons have exec'd: the write end is close-on-exec
    for pid in middles:
        os.waitpid(pid, 0)
    print("ready", group_child.pid, flush=True)
    if sys.argv[2] == "stay":
        time.sleep(300)
    """
)


# -- helpers ---------------------------------------------------------------------------------


class Tracker:
    """Everything a test started, so teardown can kill and reap it whatever happened."""

    def __init__(self) -> None:
        self.rows: list = []
        self.popens: list[subprocess.Popen] = []
        self.procs: list[psutil.Process] = []

    def launch(self, cmd: list[str], cwd: Path, **kw):
        from waybox.models import Process

        row = Process.launch(cmd, cwd=cwd, **kw)
        self.rows.append(row)
        self.popens.append(row.popen)
        self.watch(row.pid)
        return row

    def watch(self, pid: int) -> psutil.Process | None:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            self.procs.append(proc)
            return proc
        return None

    def cleanup(self) -> None:
        from waybox import proc as osproc

        markers = {str(r.id) for r in self.rows}
        found = osproc.processes_with_marker(markers) if markers else []
        for proc in [*self.procs, *found]:
            with contextlib.suppress(psutil.Error):
                proc.kill()  # psutil refuses if the PID now belongs to another process
        for popen in self.popens:
            if popen.stdout:
                popen.stdout.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(WAIT)


@pytest.fixture
def tracker(django_collection: Path):
    tracker = Tracker()
    try:
        yield tracker
    finally:
        tracker.cleanup()


@pytest.fixture
def wb_inproc(django_collection: Path) -> Waybox:
    """The CLI on the same collection this test process has Django set up on."""
    return Waybox(django_collection)


def alive(proc: psutil.Process) -> bool:
    """Running (not a zombie), and still the same process (psutil checks the start time)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def zombies_among(pids: list[int]) -> list[int]:
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(pid)
            if proc.ppid() == os.getpid() and proc.status() == psutil.STATUS_ZOMBIE:
                found.append(pid)
    return found


def read_ready(row) -> list[str]:
    """Block until the launched script prints its `ready` line; returns that line's words."""
    line = row.popen.stdout.readline().decode()
    assert line.startswith("ready"), f"script did not get ready: {line!r}\n{Path(row.stderr_path).read_text()}"
    return line.split()


def fresh(row):
    from waybox.models import Process

    return Process.objects.get(pk=row.pk)


def sh(script: str) -> list[str]:
    return ["/bin/sh", "-c", script]


def unrelated_sleeper() -> subprocess.Popen:
    """A live process waybox knows nothing about (started without Process.launch on purpose)."""
    return subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, start_new_session=True)


def stop(popen: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        popen.kill()
    popen.wait(WAIT)


def fake_row(pid: int | None, *, started_at, cmd: list[str], pwd: Path, **kw):
    """A row as a crash or a recycled PID leaves it: `running`, pointing at `pid`."""
    from waybox.models import Machine, Process

    fields = {"machine": Machine.current(), "process_type": Process.Type.HOOK, "status": Process.Status.RUNNING,
              "pid": pid, "started_at": started_at, "cmd": cmd, "pwd": str(pwd), **kw}
    return Process.objects.create(**fields)


def os_started(pid: int):
    from waybox.models.process import _from_epoch

    return _from_epoch(psutil.Process(pid).create_time())


# -- PID reuse -------------------------------------------------------------------------------


def test_recycled_pid_is_never_signalled_and_is_reported_stale(tracker, tmp_path):
    from waybox.models import Process

    sleeper = unrelated_sleeper()
    try:
        victim = psutil.Process(sleeper.pid)
        real_start = os_started(sleeper.pid)
        wrong_time = fake_row(sleeper.pid, started_at=real_start - timedelta(hours=1), cmd=["sleep", "300"],
                              pwd=tmp_path)
        wrong_cmd = fake_row(sleeper.pid, started_at=real_start, cmd=["/usr/lib/chromium/chromium"], pwd=tmp_path)
        # a program whose name merely starts with the live one's name is a different program
        prefix_cmd = fake_row(sleeper.pid, started_at=real_start, cmd=["/opt/bin/sleepwalker"], pwd=tmp_path)
        crashed = fake_row(sleeper.pid, started_at=real_start + timedelta(hours=1), cmd=["sleep"], pwd=tmp_path)

        for row in (wrong_time, wrong_cmd, prefix_cmd, crashed):
            assert row.proc is None
            assert not row.is_running
            assert Process.get_by_pid(sleeper.pid) is None
        assert wrong_time.terminate(grace=0.5) is None
        wrong_cmd.kill_tree(grace=0.5)
        prefix_cmd.terminate(grace=0.5)
        assert alive(victim), "a process that only reuses a recorded PID was signalled"

        assert Process.cleanup_stale_running() >= 1
        assert alive(victim)
        for row in (wrong_time, wrong_cmd, prefix_cmd, crashed):
            row = fresh(row)
            assert row.status == Process.Status.EXITED
            assert row.exit_code is None
            assert row.ended_at is not None
    finally:
        stop(sleeper)


def test_row_of_the_real_process_does_match(tracker, tmp_path):
    """The guards above must not be so strict that the real process is never found."""
    from waybox.models import Process

    script = tmp_path / "hook.sh"
    script.write_text("#!/usr/bin/env bash\necho ready\nexec sleep 300\n")
    script.chmod(0o755)
    row = tracker.launch([str(script)], cwd=tmp_path, process_type=Process.Type.HOOK, pipe_stdout=True)
    read_ready(row)
    assert row.proc is not None and row.proc.pid == row.pid
    assert row.is_running
    assert Process.get_by_pid(row.pid) == row
    assert row.terminate(grace=WAIT) == -signal.SIGTERM


# -- stopping trees ----------------------------------------------------------------------------


@pytest.mark.parametrize("hook_state", ["stay", "exit"])
def test_kill_tree_stops_double_forked_daemons(tracker, tmp_path, hook_state):
    from waybox.models import Process

    (tmp_path / "hook.py").write_text(HOOK)
    row = tracker.launch([sys.executable, "hook.py", shutil.which("sleep"), hook_state], cwd=tmp_path,
                         process_type=Process.Type.HOOK, pipe_stdout=True)
    group_child_pid = int(read_ready(row)[1])
    daemon_pid = int((tmp_path / "daemon.pid").read_text())
    marked = [p for p in _marked(row) if p.pid not in (row.pid, group_child_pid, daemon_pid)]
    everything = [tracker.watch(pid) for pid in (row.pid, group_child_pid, daemon_pid)]
    everything += [tracker.watch(p.pid) for p in marked]
    assert len(marked) == 1, "the env-keeping daemon should carry the WAYBOX_PROCESS_ID marker"
    assert psutil.Process(daemon_pid).ppid() != row.pid and psutil.Process(daemon_pid).ppid() != os.getpid()
    if hook_state == "exit":
        assert row.wait(WAIT) == 0
    assert all(alive(p) for p in everything[1:]), "the daemons should be running before kill_tree"

    row.kill_tree(grace=WAIT)

    assert not [p.pid for p in everything if alive(p)], "kill_tree left processes running"
    assert not zombies_among([row.pid])
    row = fresh(row)
    assert row.status == Process.Status.EXITED
    assert row.exit_code == (0 if hook_state == "exit" else -signal.SIGTERM)


def _marked(row) -> list[psutil.Process]:
    from waybox import proc as osproc

    return osproc.processes_with_marker({str(row.id)})


def test_sigterm_ignored_means_sigkill_after_grace(tracker, tmp_path):

    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); " \
               "time.sleep(300)"
    row = tracker.launch([sys.executable, "-c", stubborn], cwd=tmp_path, pipe_stdout=True)
    read_ready(row)
    proc = psutil.Process(row.pid)

    assert row.terminate(grace=0.5) == -signal.SIGKILL
    assert not alive(proc)
    assert not zombies_among([row.pid])
    assert fresh(row).exit_code == -signal.SIGKILL


def test_terminate_also_kills_a_stubborn_child_in_the_group(tracker, tmp_path):
    row = tracker.launch(sh("(trap '' TERM; exec sleep 300) & echo ready $!; wait"), cwd=tmp_path,
                         pipe_stdout=True)
    child = tracker.watch(int(read_ready(row)[1]))
    assert row.terminate(grace=0.5) in (-signal.SIGTERM, -signal.SIGKILL)
    assert not alive(child), "a group member that ignores SIGTERM survived terminate"


def test_terminate_after_the_process_ended_records_its_real_code(tracker, tmp_path):
    row = tracker.launch(sh("exit 7"), cwd=tmp_path)
    _wait_exit_unreaped(row.pid)
    assert row.terminate(grace=0.5) == 7
    assert fresh(row).exit_code == 7
    assert not zombies_among([row.pid])


def _wait_exit_unreaped(pid: int) -> None:
    """Wait until `pid` has exited without reaping it (a pidfd turns readable on exit)."""
    import select

    fd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        assert poller.poll(WAIT * 1000)
    finally:
        os.close(fd)


# -- reaping and exit codes ---------------------------------------------------------------------


def test_exit_codes_are_real(tracker, tmp_path):
    from waybox.models import Process

    ok = tracker.launch(sh("exit 0"), cwd=tmp_path, log_name="ok")
    three = tracker.launch([sys.executable, "-c", "raise SystemExit(3)"], cwd=tmp_path, log_name="three")
    killed = tracker.launch(sh("echo ready; exec sleep 300"), cwd=tmp_path, log_name="killed", pipe_stdout=True)
    tree = tracker.launch(sh("echo ready; exec sleep 300"), cwd=tmp_path / "tree", log_name="tree",
                          pipe_stdout=True)
    read_ready(killed)
    read_ready(tree)

    assert ok.wait(WAIT) == 0
    assert three.wait(WAIT) == 3
    assert killed.terminate(grace=WAIT) == -signal.SIGTERM
    tree.kill_tree(grace=WAIT)
    assert [fresh(r).exit_code for r in (ok, three, killed, tree)] == [0, 3, -signal.SIGTERM, -signal.SIGTERM]
    for row in (ok, three, killed, tree):
        row = fresh(row)
        assert row.status == Process.Status.EXITED and row.ended_at >= row.started_at
    assert not zombies_among([r.pid for r in (ok, three, killed, tree)])


def test_poll_reaps_and_records(tracker, tmp_path):
    row = tracker.launch(sh("exit 5"), cwd=tmp_path)
    _wait_exit_unreaped(row.pid)
    assert row.poll() == 5
    assert not zombies_among([row.pid])
    assert fresh(row).exit_code == 5


def test_wait_times_out_without_inventing_an_exit(tracker, tmp_path):
    from waybox.models import Process

    row = tracker.launch(sh("echo ready; exec sleep 300"), cwd=tmp_path, pipe_stdout=True)
    read_ready(row)
    with pytest.raises(TimeoutError):
        row.wait(0.2)
    assert fresh(row).status == Process.Status.RUNNING and fresh(row).exit_code is None
    assert row.terminate(grace=WAIT) == -signal.SIGTERM


def test_non_child_exit_is_unknown(tracker, tmp_path):
    """A process we did not start (no handle, so no wait status) gets exit_code None, not 0."""
    from waybox.models import Process

    sleeper = unrelated_sleeper()
    try:
        row = fake_row(sleeper.pid, started_at=os_started(sleeper.pid), cmd=["sleep", "300"], pwd=tmp_path)
        assert row.is_running
        assert row.terminate(grace=WAIT) is None
        assert sleeper.wait(WAIT) == -signal.SIGTERM
        row = fresh(row)
        assert row.status == Process.Status.EXITED and row.exit_code is None
    finally:
        stop(sleeper)


# -- crash recovery ----------------------------------------------------------------------------


def test_cleanup_after_a_crash(tracker, tmp_path):
    from django.utils import timezone

    from waybox.models import Machine, Process

    dead = subprocess.Popen(["true"])
    dead.wait(WAIT)  # its pid is free now
    here = Machine.current()
    earlier_boot = Machine.objects.create(
        guid=uuid.uuid4().hex, hostname=here.hostname, host_id=here.host_id, boot_id="an-earlier-boot",
        pid_namespace=here.pid_namespace, last_seen=timezone.now() - timedelta(days=30),
    )
    other_container = Machine.objects.create(
        guid=uuid.uuid4().hex, hostname="another-container", host_id=here.host_id, boot_id=here.boot_id,
        pid_namespace="4026599999",
    )
    live = tracker.launch(sh("echo ready; exec sleep 300"), cwd=tmp_path, pipe_stdout=True)
    read_ready(live)
    long_ago = timezone.now() - timedelta(hours=2)
    crashed = [
        fake_row(dead.pid, started_at=long_ago, cmd=["true"], pwd=tmp_path),
        fake_row(os.getpid(), started_at=long_ago, cmd=["python"], pwd=tmp_path),  # our pid, an older life
        fake_row(None, started_at=None, cmd=["never-started"], pwd=tmp_path, status=Process.Status.QUEUED,
                 created_at=long_ago),
        fake_row(live.pid, started_at=long_ago, cmd=["sleep"], pwd=tmp_path, machine=earlier_boot),
    ]
    foreign = fake_row(live.pid, started_at=os_started(live.pid), cmd=["sleep"], pwd=tmp_path,
                       machine=other_container)

    assert Process.cleanup_stale_running() >= len(crashed)

    for row in crashed:
        row = fresh(row)
        assert (row.status, row.exit_code) == (Process.Status.EXITED, None)
        assert row.ended_at is not None
    assert fresh(foreign).status == Process.Status.RUNNING, "rows of another live PID namespace were touched"
    assert fresh(live).status == Process.Status.RUNNING and live.is_running
    assert foreign.proc is None, "a row from another PID namespace matched a local process"
    assert Process.current().is_running
    Process.objects.filter(pk=foreign.pk).delete()
    assert live.terminate(grace=WAIT) == -signal.SIGTERM


# -- secrets -----------------------------------------------------------------------------------

LEAKY = "env; echo token=$GITHUB_TOKEN >&2; echo $API_KEY $CLIENT_SECRET $DB_PASSWORD >&2"


def _assert_no_secret(text: str, where: str) -> None:
    for key, value in SECRETS.items():
        assert value not in text, f"{key} leaked into {where}"


def _row_text(row) -> str:
    row = fresh(row)
    return json.dumps([row.cmd, row.env, row.stdout_tail, row.stderr_tail, row.pwd], default=str)


def test_secrets_never_reach_the_row(tracker, tmp_path, wb_inproc):
    env = {**SECRETS, "PLAIN_SETTING": "visible-value"}
    cmd = ["/bin/sh", "-c", LEAKY, "leaky", f"--token={SECRETS['GITHUB_TOKEN']}", SECRETS["API_KEY"]]
    row = tracker.launch(cmd, cwd=tmp_path, env=env, log_name="leaky")
    assert row.wait(WAIT) == 0
    assert SECRETS["API_KEY"] in Path(row.stdout_path).read_text(), "the hook should really have seen its env"

    text = _row_text(row)
    _assert_no_secret(text, "the Process row")
    assert "visible-value" in text and "GITHUB_TOKEN" in text
    assert fresh(row).env["PLAIN_SETTING"] == "visible-value"
    _assert_no_secret((tmp_path / "leaky.cmd.sh").read_text(), "cmd.sh")

    listing = wb_inproc("process", "list", "--json", "--limit", "1000").stdout
    assert str(row.id) in listing
    _assert_no_secret(listing, "waybox process list --json")
    _assert_no_secret(wb_inproc("process", "tree", "--json", str(row.id)).stdout, "waybox process tree --json")


def test_secrets_stay_out_when_another_process_records_the_end(tracker, tmp_path, wb_inproc):
    """Rows closed by `process kill` or stale cleanup in another process must not leak either."""
    os.mkfifo(tmp_path / "ready")
    killed = tracker.launch(sh(LEAKY + "; echo ready > ready; exec sleep 300"), cwd=tmp_path, env=SECRETS,
                            log_name="killed")
    ended = tracker.launch(sh(LEAKY), cwd=tmp_path, env=SECRETS, log_name="ended")
    _wait_exit_unreaped(ended.pid)
    assert (tmp_path / "ready").read_text() == "ready\n"  # blocks until the hook has printed its secrets

    wb_inproc("process", "kill", str(killed.id), "--grace", str(WAIT))
    wb_inproc("process", "list", "--running", "--json")  # cleans up `ended` from another process

    for row in (killed, ended):
        _assert_no_secret(_row_text(row), "a row closed by another process")
        assert fresh(row).exit_code is None  # that process could not know the code
    # the launcher still holds the handles: reaping them records the real codes
    assert killed.wait(WAIT) == -signal.SIGTERM
    assert ended.wait(WAIT) == 0
    assert fresh(killed).exit_code == -signal.SIGTERM and fresh(ended).exit_code == 0
    assert not zombies_among([killed.pid, ended.pid])
    for row in (killed, ended):
        _assert_no_secret(_row_text(row), "a row after reaping")


# -- Process.current() and parents --------------------------------------------------------------


def test_current_is_cached_and_is_this_process(django_collection):
    from waybox.models import Process

    me = Process.current()
    assert Process.current() is me
    assert me.pid == os.getpid() and me.is_running
    assert abs(me.started_at.timestamp() - psutil.Process().create_time()) < 1


def test_cli_run_from_a_launched_process_links_to_it(tracker, tmp_path, django_collection):
    """The CLI finds its parent by PPID, and a stale row holding the same PID is not it."""
    from waybox.models import Process

    os.mkfifo(tmp_path / "go")
    script = f"echo ready; read line < go; {sys.executable} -m waybox process list --json > out.json; echo done"
    parent = tracker.launch(["/bin/sh", "-c", script], cwd=tmp_path, process_type=Process.Type.WORKER,
                            env={"WAYBOX_DATA_DIR": str(django_collection)}, pipe_stdout=True)
    read_ready(parent)
    decoy = fake_row(parent.pid, started_at=parent.started_at + timedelta(hours=1), cmd=["/bin/sh"],
                     pwd=tmp_path, process_type=Process.Type.ORCHESTRATOR)
    try:
        with open(tmp_path / "go", "w") as go:
            go.write("go\n")
        assert parent.wait(WAIT) == 0
    finally:
        Process.objects.filter(pk=decoy.pk).delete()

    child = Process.objects.get(parent=parent)
    assert child.process_type == Process.Type.CLI
    assert child.exit_code == 0 and child.status == Process.Status.EXITED
    assert child.ancestors[0] == parent and child.depth == parent.depth + 1
    assert child.root == parent.root
    assert child in parent.get_descendants()
    listed = {r["id"]: r for r in json.loads((tmp_path / "out.json").read_text())}
    assert listed[str(child.id)]["parent_id"] == str(parent.id)
    assert listed[str(child.id)]["status"] == "running"  # it listed itself while running


# -- machine identity --------------------------------------------------------------------------


def test_machine_guid_tells_boots_and_pid_namespaces_apart():
    from waybox.proc import machine_guid

    base = {"host_id": "m1", "hostname": "box", "boot_id": "b1", "pid_namespace": "4026531836"}
    guid = machine_guid(**base)
    assert guid == machine_guid(**base)
    for key, other in (("pid_namespace", "4026532179"), ("boot_id", "b2"), ("host_id", "m2"), ("hostname", "box2")):
        assert machine_guid(**{**base, key: other}) != guid, key
    # fields are separated: moving characters between them is a different machine
    assert machine_guid("ab", "c", "b1", "1") != machine_guid("a", "bc", "b1", "1")


def test_machine_identity_reads_this_pid_namespace():
    from waybox.proc import machine_guid, machine_identity

    ident = machine_identity()
    assert ident.pid_namespace == str(os.stat("/proc/self/ns/pid").st_ino)
    assert ident.boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert ident.guid == machine_guid(ident.host_id, ident.hostname, ident.boot_id, ident.pid_namespace)


def test_another_pid_namespace_is_another_machine():
    unshare = shutil.which("unshare")
    if not unshare:
        pytest.skip("unshare(1) not available")
    code = "from waybox.proc import machine_identity as m; i = m(); print(i.guid, i.pid_namespace)"
    result = subprocess.run([unshare, "--pid", "--fork", "--mount-proc", "--map-root-user", sys.executable, "-c",
                             code], capture_output=True, text=True, timeout=WAIT)
    if result.returncode != 0:
        pytest.skip(f"cannot create a PID namespace here: {result.stderr.strip()}")
    from waybox.proc import machine_identity

    guid, pidns = result.stdout.split()
    assert pidns != machine_identity().pid_namespace
    assert guid != machine_identity().guid


# -- CLI -----------------------------------------------------------------------------------------


def test_process_list_filters(waybox):
    waybox("status")
    rows = waybox.json("process", "list", "--json")
    assert rows and all(r["type"] == "cli" for r in rows)
    mine = [r for r in rows if r["status"] == "running"]
    assert len(mine) == 1 and "process list" in mine[0]["cmd"]
    done = waybox.json("process", "list", "--json", "--status", "exited")
    assert done and all(r["status"] == "exited" for r in done)
    assert {r["exit_code"] for r in done} == {0}
    assert any(" init" in r["cmd"] for r in done) and any(" status" in r["cmd"] for r in done)
    assert waybox.json("process", "list", "--json", "--type", "hook") == []
    clis = waybox.json("process", "list", "--json", "--type", "cli")
    assert {r["id"] for r in rows} < {r["id"] for r in clis} and all(r["type"] == "cli" for r in clis)
    running = waybox.json("process", "list", "--json", "--running")
    assert len(running) == 1 and "--running" in running[0]["cmd"]
    assert waybox.json("process", "list", "--json", "--running", "--type", "hook") == []
    table = waybox("process", "list").stdout
    assert "exited" in table and "running" in table


def test_process_tree_shows_the_hierarchy(tracker, tmp_path, wb_inproc):
    from waybox.models import Process

    root = tracker.launch(sh("echo ready; exec sleep 300"), cwd=tmp_path / "root", process_type=Process.Type.WORKER,
                          pipe_stdout=True)
    hook = tracker.launch(sh("exit 0  # [/] [bold]not markup"), cwd=tmp_path / "hook", parent=root,
                          process_type=Process.Type.HOOK)
    binary = tracker.launch(sh("exit 4"), cwd=tmp_path / "bin", parent=hook, process_type=Process.Type.BINARY)
    read_ready(root)
    assert hook.wait(WAIT) == 0 and binary.wait(WAIT) == 4

    out = wb_inproc("process", "tree", str(root.id)).stdout
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 3
    assert lines[0].startswith("worker") and f"pid={root.pid}" in lines[0] and "running" in lines[0]
    assert lines[1].startswith("└── hook") and "[/] [bold]not markup" in lines[1] and "exit=0" in lines[1]
    assert lines[2].startswith("    └── binary") and "exit=4" in lines[2]

    nested = wb_inproc.json("process", "tree", "--json", str(root.id))
    assert nested[0]["id"] == str(root.id)
    assert nested[0]["children"][0]["children"][0]["id"] == str(binary.id)
    everything = wb_inproc("process", "tree").stdout
    assert f"pid={binary.pid}" in everything
    assert root.terminate(grace=WAIT) == -signal.SIGTERM


def test_process_kill_stops_a_launched_tree(tracker, tmp_path, wb_inproc):
    from waybox.models import Process

    (tmp_path / "hook.py").write_text(HOOK)
    row = tracker.launch([sys.executable, "hook.py", shutil.which("sleep"), "stay"], cwd=tmp_path,
                         process_type=Process.Type.HOOK, pipe_stdout=True)
    group_child = tracker.watch(int(read_ready(row)[1]))
    daemon = tracker.watch(int((tmp_path / "daemon.pid").read_text()))
    hook = psutil.Process(row.pid)
    marked = [tracker.watch(p.pid) for p in _marked(row)]

    result = wb_inproc("process", "kill", str(row.id), "--grace", str(WAIT))
    assert "stopped" in result.stderr
    assert not [p.pid for p in (hook, group_child, daemon, *marked) if alive(p)]
    assert fresh(row).status == Process.Status.EXITED
    assert row.wait(WAIT) == -signal.SIGTERM
    assert not zombies_among([row.pid])

    again = wb_inproc("process", "kill", str(row.id))
    assert "not running" in again.stderr
    missing = wb_inproc("process", "kill", str(uuid.uuid4()), check=False)
    assert missing.returncode != 0 and "no process" in missing.stderr


def test_process_kill_finds_daemons_of_an_exited_hook(tracker, tmp_path, wb_inproc):
    (tmp_path / "hook.py").write_text(HOOK)
    row = tracker.launch([sys.executable, "hook.py", shutil.which("sleep"), "exit"], cwd=tmp_path,
                         pipe_stdout=True)
    group_child = tracker.watch(int(read_ready(row)[1]))
    daemon = tracker.watch(int((tmp_path / "daemon.pid").read_text()))
    assert row.wait(WAIT) == 0

    wb_inproc("process", "kill", str(row.id), "--grace", str(WAIT))
    assert not alive(group_child) and not alive(daemon)
    assert fresh(row).exit_code == 0


# -- admin ---------------------------------------------------------------------------------------


@pytest.fixture
def admin_client(django_collection):
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.create_superuser(f"admin-{uuid.uuid4().hex[:8]}", "a@example.com", "pw-123456")
    client = Client()
    client.force_login(user)
    try:
        yield client
    finally:
        user.delete()


def test_admin_process_tree_view(tracker, tmp_path, admin_client):
    from waybox.models import Process

    root = tracker.launch(sh("exit 0"), cwd=tmp_path / "a", process_type=Process.Type.ORCHESTRATOR)
    middle = tracker.launch(sh("exit 0"), cwd=tmp_path / "b", parent=root, process_type=Process.Type.WORKER)
    leaf = tracker.launch(sh("exit 2 # <script>alert(1)</script>"), cwd=tmp_path / "c", parent=middle,
                          process_type=Process.Type.HOOK)
    for row in (root, middle, leaf):
        row.wait(WAIT)

    page = admin_client.get(f"/admin/waybox/process/{middle.pk}/tree/")
    assert page.status_code == 200
    html = page.content.decode()
    table = html[html.index('id="process-tree"'):]
    for row in (root, middle, leaf):
        assert str(row.pk) in table and f"<td>{row.pid}</td>" in table
    assert table.index(str(root.parent_id)) < table.index(str(root.pk)) < table.index(str(middle.pk)) \
        < table.index(str(leaf.pk)), "ancestors first (root at the top), then the process, then descendants"
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)" in html
    assert f"/admin/waybox/process/{root.pk}/tree/" in table

    change = admin_client.get(f"/admin/waybox/process/{middle.pk}/change/")
    assert change.status_code == 200 and f"/admin/waybox/process/{middle.pk}/tree/" in change.content.decode()
    assert admin_client.get(f"/admin/waybox/process/{uuid.uuid4()}/tree/").status_code == 404


def test_admin_lists_every_model_with_filters(admin_client, django_collection):
    from waybox.models import Machine

    # Django hides the machine filter while there is only one machine to pick
    Machine.objects.get_or_create(guid="f" * 64, defaults={"hostname": "elsewhere", "host_id": "other-host"})
    for model in ("crawl", "snapshot", "archiveresult", "tag", "machine", "process", "binary"):
        page = admin_client.get(f"/admin/waybox/{model}/")
        assert page.status_code == 200, model
    filtered = admin_client.get("/admin/waybox/process/?status__exact=exited&process_type__exact=hook&q=sh")
    assert filtered.status_code == 200
    html = filtered.content.decode()
    for title in ("By status", "By process type", "By machine"):
        assert title in html


def test_admin_requires_login(django_collection):
    from django.test import Client

    assert Client().get("/admin/waybox/process/").status_code == 302
