"""The OS side of process tracking: the only module that starts, signals or reaps processes.

Everything waybox runs gets a `Process` row (waybox.models.process); the row's methods call
the functions here. Three guards keep us from acting on the wrong process:

* Machine identity covers host, boot and PID namespace, so a PID from another container or
  an earlier boot never matches a live process here.
* A PID matches a row only if the OS start time agrees within `START_TIME_TOLERANCE_S` and the
  executable is the same.
* Every launched process carries `WAYBOX_PROCESS_ID=<row id>` in its environment, inherited by
  its descendants, so daemons that double-fork away from their parent are still found.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import platform
import select
import shlex
import signal
import socket
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

PROCESS_ID_ENV = "WAYBOX_PROCESS_ID"
START_TIME_TOLERANCE_S = 2.0
TAIL_CHARS = 4000
REDACTED = "********"

# Popen handles of children this process launched, by Process row id: `wait` uses them
# so exit codes are real and children are reaped.
_children: dict[str, subprocess.Popen] = {}
_secrets: dict[str, list[str]] = {}


# -- machine identity ----------------------------------------------------------------------


def _read_first_line(path: str) -> str:
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return ""


def pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


@dataclass(frozen=True)
class MachineIdentity:
    guid: str
    hostname: str
    host_id: str
    boot_id: str
    pid_namespace: str


def machine_identity() -> MachineIdentity:
    hostname = socket.gethostname()
    host_id = _read_first_line("/etc/machine-id") or _read_first_line("/var/lib/dbus/machine-id") or hostname
    boot_id = _read_first_line("/proc/sys/kernel/random/boot_id")
    if not boot_id:
        boot_id = str(int(psutil.boot_time()))
    pidns = pid_namespace()
    guid = hashlib.sha256("|".join((host_id, hostname, boot_id, pidns)).encode()).hexdigest()
    return MachineIdentity(guid, hostname, host_id, boot_id, pidns)


def machine_facts() -> dict:
    return {
        "os_platform": platform.platform(),
        "cpu_count": os.cpu_count() or 0,
        "memory_total": psutil.virtual_memory().total,
    }


# -- looking at live processes --------------------------------------------------------------


def os_start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def same_executable(proc: psutil.Process, cmd: list[str]) -> bool:
    """Whether the live process runs the program recorded in `cmd` (by path or by name)."""
    if not cmd:
        return True
    try:
        cmdline = proc.cmdline()
        names = {proc.name()}
        with contextlib.suppress(psutil.AccessDenied, psutil.ZombieProcess, OSError):
            names.add(os.path.basename(proc.exe()))
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    if cmdline[:1] == cmd[:1]:
        return True
    recorded = os.path.basename(cmd[0])
    if cmdline:
        names.add(os.path.basename(cmdline[0]))
    return recorded in names or any(n and recorded.startswith(n) for n in names)


def find_live(pid: int | None, started_at: float | None, cmd: list[str]) -> psutil.Process | None:
    """The live process with this pid if it is the one recorded (same start time and program)."""
    if not pid or started_at is None:
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        if abs(proc.create_time() - started_at) > START_TIME_TOLERANCE_S:
            return None
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    return proc if same_executable(proc, cmd) else None


def processes_with_marker(markers: set[str]) -> list[psutil.Process]:
    """Live processes whose environment carries one of these WAYBOX_PROCESS_ID values."""
    found = []
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            with open(f"/proc/{proc.pid}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        for entry in environ.split(b"\0"):
            if entry.startswith(PROCESS_ID_ENV.encode() + b"=") and entry.split(b"=", 1)[1].decode() in markers:
                found.append(proc)
                break
    return found


def pids_from_files(folder: Path) -> list[int]:
    """PIDs in `*.pid` files below a folder: how double-forked daemons declare themselves."""
    pids = []
    if not folder.is_dir():
        return pids
    for path in folder.rglob("*.pid"):
        text = path.read_text(errors="replace").strip() if path.is_file() else ""
        if text.isdigit():
            pids.append(int(text))
    return pids


# -- launching ---------------------------------------------------------------------------


def redact_env(env: dict[str, str]) -> dict[str, str]:
    from waybox.config import is_secret_key

    return {k: (REDACTED if is_secret_key(k) and v else v) for k, v in env.items()}


def secret_values_of(env: dict[str, str]) -> list[str]:
    from waybox.config import is_secret_key

    return [v for k, v in env.items() if is_secret_key(k) and v and len(v) >= 4]


def secret_values(row_id: str) -> list[str]:
    """Values to scrub from a process's log tails: its launch secrets and our own."""
    return [*_secrets.get(row_id, ()), *secret_values_of(dict(os.environ))]


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """Remove secret values from text that is about to be stored."""
    for value in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text


def write_cmd_sh(path: Path, cmd: list[str], cwd: str, env_keys: Iterable[str]) -> None:
    """A script a person can run to repeat the command (secret values are not written)."""
    lines = ["#!/usr/bin/env bash", f"# env keys set by waybox: {' '.join(sorted(env_keys))}",
             f"cd {shlex.quote(cwd)}", shlex.join(cmd)]
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o700)


def spawn(
    row_id: str,
    cmd: list[str],
    cwd: str,
    env: dict[str, str],
    stdout_path: Path,
    stderr_path: Path,
    *,
    pipe_stdout: bool,
) -> subprocess.Popen:
    """Start `cmd` in its own session and process group, stderr (and stdout) to files."""
    full_env = {**os.environ, **env, PROCESS_ID_ENV: row_id}
    stderr_file = open(stderr_path, "ab")  # noqa: SIM115 - handed to the child
    stdout_file = None if pipe_stdout else open(stdout_path, "ab")  # noqa: SIM115
    try:
        popen = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if pipe_stdout else stdout_file,
            stderr=stderr_file,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        stderr_file.close()
        if stdout_file:
            stdout_file.close()
    _children[row_id] = popen
    _secrets[row_id] = secret_values_of(env)
    return popen


def child_handle(row_id: str) -> subprocess.Popen | None:
    return _children.get(row_id)


def forget_child(row_id: str) -> None:
    _children.pop(row_id, None)
    _secrets.pop(row_id, None)


# -- waiting and signalling ----------------------------------------------------------------


def wait_pid(pid: int, timeout: float | None) -> bool:
    """Wait for a process that is not our child to exit, without a sleep loop (pidfd)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except OSError as err:
        if err.errno == errno.ESRCH:
            return True
        raise
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(None if timeout is None else int(timeout * 1000)))
    finally:
        os.close(fd)


def signal_group(pid: int, sig: int) -> bool:
    """Send `sig` to the process group led by `pid`, never to our own group."""
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return False
    if pgid == os.getpgid(0):
        return signal_pid(pid, sig)
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


def signal_pid(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def terminate_procs(procs: list[psutil.Process], grace: float) -> None:
    """SIGTERM every process and its group, wait up to `grace`, then SIGKILL what is left."""
    procs = [p for p in procs if p.pid != os.getpid()]
    for p in procs:
        signal_group(p.pid, signal.SIGTERM)
        signal_pid(p.pid, signal.SIGTERM)
    _gone, alive = psutil.wait_procs(procs, timeout=grace) if procs else ([], [])
    for p in alive:
        signal_group(p.pid, signal.SIGKILL)
        signal_pid(p.pid, signal.SIGKILL)
    if alive:
        psutil.wait_procs(alive, timeout=5)


def reap_zombie_children() -> None:
    """Collect exit statuses of children we no longer hold a handle for."""
    for popen in list(_children.values()):
        popen.poll()
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def read_tail(path: str, limit: int = TAIL_CHARS) -> str:
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit * 4))
            data = f.read()
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")[-limit:]


def run_quick(cmd: list[str], timeout: float = 10) -> tuple[int | None, str]:
    """Run a short probe (e.g. `wget --version`) in its own group; kill the group on timeout.

    Probes are not recorded as Process rows: they run before a collection may exist and
    last milliseconds. Returns (exit code, stdout+stderr).
    """
    try:
        popen = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as err:
        return None, str(err)
    try:
        out, _ = popen.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        signal_group(popen.pid, signal.SIGKILL)
        out, _ = popen.communicate()
    return popen.returncode, out.decode("utf-8", errors="replace")
