"""The engine's pure decisions (waybox.engine.policy): BRIEF.md 3.2 exit-code rules, back-off,
which step is pending, and who may take an exclusive resource. No database, no processes.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from waybox.engine.policy import (
    HookRun,
    StepItem,
    backoff_delay,
    claimable_exclusive,
    decide,
    pending_step,
)


def run(exit_code=0, reported=None, files=False, **kw) -> HookRun:
    return HookRun(exit_code=exit_code, reported_status=reported, left_files=files, **kw)


# -- decide: BRIEF.md 3.2 --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hook", "status"),
    [
        (run(0, "succeeded"), "succeeded"),  # 4. success
        (run(0, "failed"), "failed"),  # 1. soft failure
        (run(0, "skipped"), "skipped"),
        (run(10), "skipped"),  # exit 10
        (run(10, "succeeded", files=True), "skipped"),  # exit 10 wins over a record
        (run(0, "skipped", files=True), "skipped"),
        (run(0, None, files=True), "succeeded"),  # no record, left files
        (run(0, None, files=False), "skipped"),  # no record, nothing left
    ],
)
def test_final_outcomes_are_never_retried(hook: HookRun, status: str) -> None:
    outcome = decide(hook, attempts=1, max_attempts=3, backoff_base=60)
    assert (outcome.status, outcome.retry_in) == (status, None)


@pytest.mark.parametrize("hook", [run(1), run(2, "succeeded"), run(1, "failed", files=True), run(-9), run(None),
                                  run(0, timed_out=True, timeout=5), run(255)])
def test_hard_failures_back_off_until_max_attempts(hook: HookRun) -> None:
    """2./3. Non-zero exit (records or not), a signal, an unknown end, a timeout."""
    first = decide(hook, attempts=1, max_attempts=3, backoff_base=60)
    assert (first.status, first.retry_in) == ("backoff", 60)
    second = decide(hook, attempts=2, max_attempts=3, backoff_base=60)
    assert (second.status, second.retry_in) == ("backoff", 120)
    last = decide(hook, attempts=3, max_attempts=3, backoff_base=60)
    assert (last.status, last.retry_in) == ("failed", None)
    assert "giving up" in last.message


def test_one_attempt_only() -> None:
    assert decide(run(1), attempts=1, max_attempts=1, backoff_base=60).status == "failed"


def test_zero_backoff_retries_at_once() -> None:
    outcome = decide(run(1), attempts=1, max_attempts=3, backoff_base=0)
    assert (outcome.status, outcome.retry_in) == ("backoff", 0)


def test_messages_say_what_happened() -> None:
    assert "exited with code 3" in decide(run(3), 1, 3, 60).message
    assert "killed by signal 9" in decide(run(-9), 1, 3, 60).message
    assert "attempt 1 of 3" in decide(run(3), 1, 3, 60).message
    timed_out = decide(run(None, timed_out=True, timeout=7), 1, 3, 60)
    assert timed_out.status == "backoff" and "timed out after 7 s" in timed_out.message
    assert "timed out after 2.5 s" in decide(run(None, timed_out=True, timeout=2.5), 1, 3, 60).message
    assert "could not start" in decide(run(None, error="could not start: ENOENT"), 1, 3, 60).message


def test_a_timeout_wins_over_a_reported_success() -> None:
    """A hook stopped at its timeout did not finish, whatever it said before."""
    outcome = decide(run(-15, "succeeded", files=True, timed_out=True, timeout=5), 1, 3, 60)
    assert outcome.status == "backoff"


@pytest.mark.parametrize(
    ("hook", "status"),
    [
        (run(-15, "succeeded", stopped_at_seal=True), "succeeded"),
        (run(-9, "failed", stopped_at_seal=True), "failed"),
        (run(-9, None, files=True, stopped_at_seal=True), "succeeded"),
        (run(0, None, stopped_at_seal=True), "succeeded"),
        (run(-9, None, files=False, stopped_at_seal=True), "failed"),
    ],
)
def test_background_hooks_stopped_at_the_seal_are_judged_by_what_they_left(hook: HookRun, status: str) -> None:
    outcome = decide(hook, attempts=1, max_attempts=3, backoff_base=60)
    assert (outcome.status, outcome.retry_in) == (status, None)


@pytest.mark.parametrize(
    ("hook", "status"),
    [
        (run(None, "succeeded"), "succeeded"),  # ended while its worker was dead: code unknown
        (run(None, "failed"), "failed"),
        (run(-15, "succeeded", interrupted=True), "succeeded"),  # shutdown after it reported
        (run(-15, None, files=True, interrupted=True), "queued"),  # shutdown before: runs again
    ],
)
def test_a_reported_verdict_stands_when_nothing_contradicts_it(hook: HookRun, status: str) -> None:
    """Crash recovery and shutdown must never make a successful attempt run twice."""
    outcome = decide(hook, attempts=1, max_attempts=3, backoff_base=60)
    assert outcome.status == status


def test_a_known_crash_after_a_reported_success_is_still_a_failure() -> None:
    assert decide(run(2, "succeeded"), 1, 3, 60).status == "backoff"


@given(st.integers(-64, 300) | st.none(), st.sampled_from([None, "succeeded", "failed", "skipped"]), st.booleans(),
       st.booleans(), st.booleans(), st.integers(1, 10), st.integers(1, 10), st.integers(0, 1000))
def test_decide_is_total_and_consistent(code, reported, files, timed_out, sealed, attempts, max_attempts, base) -> None:
    hook = run(code, reported, files, timed_out=timed_out, timeout=3, stopped_at_seal=sealed)
    outcome = decide(hook, attempts, max_attempts, base)
    assert outcome.status in ("succeeded", "failed", "skipped", "backoff")
    assert (outcome.status == "backoff") == (outcome.retry_in is not None)
    if code is None and reported in ("succeeded", "failed", "skipped") and not timed_out:
        assert outcome.status == reported
    if outcome.status == "backoff":
        assert attempts < max_attempts and outcome.retry_in == base * 2 ** (attempts - 1)


# -- back-off ---------------------------------------------------------------------------------


def test_backoff_doubles_per_attempt() -> None:
    assert [backoff_delay(n, 60) for n in (1, 2, 3, 4)] == [60, 120, 240, 480]
    assert backoff_delay(0, 60) == 60
    assert backoff_delay(5, 0) == 0


# -- pending_step -----------------------------------------------------------------------------


def items(*specs: tuple[int, bool, str]) -> list[StepItem]:
    return [StepItem(step, bg, status) for step, bg, status in specs]


def test_the_lowest_step_with_unfinished_foreground_work() -> None:
    assert pending_step(items((0, False, "succeeded"), (2, False, "queued"), (5, False, "queued"))) == 2
    assert pending_step(items((2, False, "started"), (2, False, "succeeded"), (3, False, "queued"))) == 2


def test_nothing_pending_when_everything_is_final() -> None:
    assert pending_step(items((0, False, "succeeded"), (5, False, "failed"), (9, False, "skipped"))) is None
    assert pending_step([]) is None


def test_background_hooks_hold_their_step_only_until_launched() -> None:
    assert pending_step(items((2, True, "queued"), (5, False, "queued"))) == 2
    assert pending_step(items((2, True, "started"), (5, False, "queued"))) == 5
    assert pending_step(items((2, True, "started"))) is None


def test_retries_in_backoff_never_block_the_steps() -> None:
    assert pending_step(items((1, False, "backoff"), (4, False, "queued"))) == 4


# -- exclusive resources ----------------------------------------------------------------------


def test_exclusive_hooks_take_the_resource_in_filename_order() -> None:
    siblings = [("on_Snapshot__50_dom.py", "queued"), ("on_Snapshot__52_pdf.py", "queued")]
    assert not claimable_exclusive("on_Snapshot__51_shot.py", siblings), "50 must go first"
    assert claimable_exclusive("on_Snapshot__50_dom.py", [("on_Snapshot__51_shot.py", "queued"),
                                                         ("on_Snapshot__52_pdf.py", "queued")])


def test_exclusive_hooks_never_run_together() -> None:
    assert not claimable_exclusive("on_Snapshot__52_pdf.py", [("on_Snapshot__51_shot.py", "started")])
    assert not claimable_exclusive("on_Snapshot__50_dom.py", [("on_Snapshot__59_late.py", "started")])
    assert claimable_exclusive("on_Snapshot__52_pdf.py", [("on_Snapshot__50_dom.py", "succeeded"),
                                                         ("on_Snapshot__51_shot.py", "failed")])


def test_an_earlier_exclusive_hook_in_backoff_does_not_block() -> None:
    assert claimable_exclusive("on_Snapshot__52_pdf.py", [("on_Snapshot__50_dom.py", "backoff")])
