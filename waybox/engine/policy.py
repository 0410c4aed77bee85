"""Decisions, apart from persistence: pure functions the state machines call and then store.

Nothing here touches the database, the filesystem or the clock, so every rule of BRIEF.md
3.2 can be tested in microseconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

SKIP_EXIT_CODE = 10
FINAL = ("succeeded", "failed", "skipped")
PENDING_FOREGROUND = ("queued", "started")


@dataclass(frozen=True)
class Outcome:
    """What a finished hook attempt means: the status, and when to retry (None = never)."""

    status: str
    retry_in: float | None
    message: str


@dataclass(frozen=True)
class HookRun:
    exit_code: int | None
    reported_status: str | None
    left_files: bool
    timed_out: bool = False
    timeout: float = 0
    stopped_at_seal: bool = False
    interrupted: bool = False  # waybox stopped it (shutdown), through no fault of its own
    error: str = ""


def backoff_delay(attempts: int, base: float) -> float:
    """Exponential back-off: base, 2*base, 4*base ... after the 1st, 2nd, 3rd attempt."""
    return base * (2 ** max(0, attempts - 1))


def decide(run: HookRun, attempts: int, max_attempts: int, backoff_base: float) -> Outcome:
    """BRIEF.md 3.2: soft failure, hard failure with back-off, skipped, succeeded."""
    if run.stopped_at_seal:
        return _stopped_at_seal(run)
    if run.timed_out:
        return _hard_failure(f"timed out after {run.timeout:g} s", attempts, max_attempts, backoff_base)
    if run.reported_status in FINAL and (run.exit_code is None or run.interrupted):
        # Its own verdict stands when nothing contradicts it: the exit code is unknown (it ended
        # while its worker was dead) or waybox stopped it after it reported. Re-running it would
        # make a successful attempt run twice.
        return Outcome(run.reported_status, None, run.error)
    if run.interrupted:
        return Outcome("queued", 0, "stopped by waybox before it finished; will run again")
    if run.exit_code == SKIP_EXIT_CODE or run.reported_status == "skipped":
        return Outcome("skipped", None, run.error or "skipped by the hook")
    if run.exit_code == 0:
        if run.reported_status in ("succeeded", "failed"):
            return Outcome(run.reported_status, None, run.error)
        if run.left_files:
            return Outcome("succeeded", None, run.error)
        return Outcome("skipped", None, run.error or "exited 0 with no record and no files")
    detail = f"exited with code {run.exit_code}" if run.exit_code is not None else "ended with an unknown exit code"
    if run.exit_code is not None and run.exit_code < 0:
        detail = f"killed by signal {-run.exit_code}"
    return _hard_failure(detail + (f": {run.error}" if run.error else ""), attempts, max_attempts, backoff_base)


def _hard_failure(message: str, attempts: int, max_attempts: int, backoff_base: float) -> Outcome:
    if attempts >= max_attempts:
        return Outcome("failed", None, f"{message} (attempt {attempts} of {max_attempts}, giving up)")
    delay = backoff_delay(attempts, backoff_base)
    return Outcome("backoff", delay, f"{message} (attempt {attempts} of {max_attempts})")


def _stopped_at_seal(run: HookRun) -> Outcome:
    """A background hook stopped because its Snapshot sealed: judged by what it left."""
    if run.reported_status in FINAL:
        return Outcome(run.reported_status, None, run.error)
    if run.exit_code == 0 or run.left_files:
        return Outcome("succeeded", None, run.error or "stopped when the snapshot sealed")
    return Outcome("failed", None, run.error or "stopped when the snapshot sealed, with no output")


@dataclass(frozen=True)
class StepItem:
    step: int
    background: bool
    status: str


def pending_step(items: Iterable[StepItem]) -> int | None:
    """The lowest step that still has work, or None when every step is done.

    A foreground hook holds its step until it is final (or in back-off: retries never block
    the steps). A background hook holds its step only until it has been launched.
    """
    steps = [
        i.step
        for i in items
        if (i.status in PENDING_FOREGROUND and not i.background) or (i.background and i.status == "queued")
    ]
    return min(steps) if steps else None


def claimable_exclusive(candidate: str, siblings: Iterable[tuple[str, str]]) -> bool:
    """Whether a hook holding an exclusive resource may start: only when every sibling that
    shares the resource and sorts before it is finished, and none is running.

    `siblings` are (hook_name, status) of the other hooks of the same owner and resource.
    """
    for name, status in siblings:
        if status == "started":
            return False
        if name < candidate and status == "queued":
            return False
    return True
