"""Finding the external programs plugins need, and their versions.

A `binaries.jsonl` record names a binary and how to get it:
`{"name": "wget", "binproviders": "apt,brew", "version_args": ["--version"]}`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from dataclasses import dataclass

from waybox.proc import run_quick

VERSION_RE = re.compile(r"(\d+\.\d+(?:\.\d+)*(?:[-.\w]*)?)")
VERSION_TIMEOUT_S = 10


@dataclass(frozen=True)
class Found:
    name: str
    abspath: str = ""
    version: str = ""
    sha256: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.abspath)


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def detect(spec: dict) -> Found:
    """Look the binary up on PATH (or at `abspath`) and ask it its version."""
    name = spec["name"]
    candidates = [spec.get("abspath"), *(spec.get("bin_names") or []), name]
    # waybox's own virtualenv first: pip-installed tools (yt-dlp) live beside its Python
    search = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", os.defpath)])
    abspath = next((p for c in candidates if c and (p := shutil.which(c, path=search))), None)
    if not abspath:
        return Found(name)
    args = spec.get("version_args") or ["--version"]
    _code, text = run_quick([abspath, *args], timeout=VERSION_TIMEOUT_S)
    match = VERSION_RE.search(text)
    return Found(name, abspath, match.group(1) if match else "", file_sha256(abspath))
