"""A full or read-only archive folder: clear errors, nothing lost, a consistent database, and
recovery once the folder is writable again. The folder is a tiny tmpfs mounted by the test
(root only; CI is root): chmod would not do, root writes whatever the mode."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Waybox

ERRORS = {"full": "No space left on device", "read-only": "Read-only file system"}


def fill(archive: Path) -> Callable[[], None]:
    filler = archive / "filler"
    with open(filler, "wb", buffering=0) as f, pytest.raises(OSError):
        while True:
            f.write(b"\0" * 4096)
    return filler.unlink


def make_read_only(archive: Path) -> Callable[[], None]:
    subprocess.run(["mount", "-o", "remount,ro", str(archive)], check=True)
    return lambda: subprocess.run(["mount", "-o", "remount,rw", str(archive)], check=True)


@pytest.fixture(params=["full", "read-only"])
def broken_archive(request, ledger: Waybox):
    """(collection, expected error text, repair) with its archive folder broken one way."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    archive = ledger.data_dir / "archive"
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(archive)], check=True)
    try:
        repair = fill(archive) if request.param == "full" else make_read_only(archive)
        yield ledger, ERRORS[request.param], repair
    finally:
        subprocess.run(["umount", "-l", str(archive)], check=False)


def test_broken_archive_folder_gives_clear_errors_and_loses_nothing(broken_archive) -> None:
    wb, error, repair = broken_archive
    wb("config", "--set", "MAX_TICK_TIME=2")
    added = wb("add", "http://127.0.0.1:9/broken", check=False)
    assert added.returncode == 1
    assert error in added.stderr and "queued" in added.stderr
    assert "Traceback" not in added.stderr
    (row,) = wb.json("list", "--json")
    assert row["status"] == "queued", "the URL is kept for later"

    run = wb("run", timeout=180)
    assert "error:" in run.stderr and error in run.stderr
    assert "Traceback" not in run.stderr
    (row,) = wb.json("list", "--json")
    statuses = {r["status"] for r in row["archiveresults"]}
    assert "started" not in statuses and "queued" not in statuses, row["archiveresults"]

    repair()  # writable again: the failed results run once more and succeed
    wb("update", "--failed", timeout=180)
    (row,) = wb.json("list", "--json")
    assert row["status"] == "sealed"
    assert {r["status"] for r in row["archiveresults"]} == {"succeeded"}, row["archiveresults"]
