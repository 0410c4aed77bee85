"""A full archive folder: clear errors, nothing lost, a consistent database, and recovery once
there is room again. The folder is a tiny tmpfs mounted by the test (root only; CI is root)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import Waybox


@pytest.fixture
def full_archive(ledger: Waybox):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    archive = ledger.data_dir / "archive"
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(archive)], check=True)
    try:
        filler = archive / "filler"
        with open(filler, "wb", buffering=0) as f, pytest.raises(OSError):
            while True:
                f.write(b"\0" * 4096)
        yield ledger, filler
    finally:
        subprocess.run(["umount", "-l", str(archive)], check=False)


def test_full_archive_folder_gives_clear_errors_and_loses_nothing(full_archive) -> None:
    wb, filler = full_archive
    wb("config", "--set", "MAX_TICK_TIME=2")
    added = wb("add", "http://127.0.0.1:9/full", check=False)
    assert added.returncode == 1
    assert "No space left on device" in added.stderr and "queued" in added.stderr
    assert "Traceback" not in added.stderr
    (row,) = wb.json("list", "--json")
    assert row["status"] == "queued", "the URL is kept for later"

    run = wb("run", timeout=180)
    assert "error:" in run.stderr and "No space left on device" in run.stderr
    (row,) = wb.json("list", "--json")
    statuses = {r["status"] for r in row["archiveresults"]}
    assert "started" not in statuses and "queued" not in statuses, row["archiveresults"]

    filler.unlink()  # room again: the failed results run once more and succeed
    wb("update", "--failed", timeout=180)
    (row,) = wb.json("list", "--json")
    assert row["status"] == "sealed"
    assert {r["status"] for r in row["archiveresults"]} == {"succeeded"}, row["archiveresults"]
