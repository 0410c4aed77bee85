"""Step 9: sha256 of every output file in the Snapshot folder, and their Merkle root.

Leaves are sha256("<relative path>\\0<file sha256>") in path order; each level hashes pairs
(an odd last node is carried up as is), so the root changes if any file, name or byte does.
The root goes into this result's output_json, which index.json carries.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

SKIP_DIRS = {".hooks", "hashes"}
SKIP_FILES = {"index.json"}


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def is_output(path: Path, rel: Path) -> bool:
    """Files hooks produced: not waybox's own logs and index, not pid files or hidden files."""
    if not path.is_file() or path.is_symlink() or rel.parts[0] in SKIP_DIRS or str(rel) in SKIP_FILES:
        return False
    return not path.name.startswith(".") and not path.name.endswith(".pid")


def output_files(snap_dir: Path) -> list[Path]:
    return [p for p in sorted(snap_dir.rglob("*")) if is_output(p, p.relative_to(snap_dir))]


def merkle_root(leaves: list[str]) -> str:
    if not leaves:
        return hashlib.sha256(b"").hexdigest()
    level = leaves
    while len(level) > 1:
        level = [
            hashlib.sha256((level[i] + level[i + 1]).encode()).hexdigest() if i + 1 < len(level) else level[i]
            for i in range(0, len(level), 2)
        ]
    return level[0]


def main() -> int:
    snap_dir = Path(os.environ["SNAP_DIR"])
    hashes = {str(p.relative_to(snap_dir)): file_sha256(p) for p in output_files(snap_dir)}
    leaves = [hashlib.sha256(f"{rel}\0{digest}".encode()).hexdigest() for rel, digest in sorted(hashes.items())]
    root = merkle_root(leaves)
    Path("hashes.json").write_text(json.dumps({"merkle_root": root, "files": hashes}, indent=2) + "\n")
    print(json.dumps({
        "type": "ArchiveResult", "status": "succeeded", "output_str": f"{len(hashes)} files, merkle root {root[:16]}…",
        "output_json": {"merkle_root": root, "files": len(hashes)}, "output_files": ["hashes.json"],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
