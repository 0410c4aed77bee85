"""What a Snapshot's folder holds, sorted into what the snapshot page shows.

Only the snapshot page calls this (one Snapshot at a time): it walks one folder, bounded,
and never reads a file bigger than a preview.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

MAX_FILES = 3000
PREVIEW_BYTES = 16 * 1024
IMAGE_EXT = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".avif", ".bmp", ".ico", ".svg"}
VIDEO_EXT = {".mp4", ".webm", ".mkv", ".mov", ".m4v", ".ogv"}
AUDIO_EXT = {".mp3", ".m4a", ".ogg", ".oga", ".opus", ".wav", ".flac", ".aac"}
HTML_EXT = {".html", ".htm", ".xhtml", ".mhtml"}
TEXT_EXT = {".txt", ".md", ".csv", ".log"}
JSON_EXT = {".json", ".jsonl"}
LOG_SUFFIXES = (".stdout.log", ".stderr.log", ".cmd.sh", ".pid")
# What a person looks for first, in this order; each plugin's main file is shown in its kind.
KIND_ORDER = ["screenshot", "pdf", "html", "readable", "media", "image", "text", "json", "warc", "other"]
KIND_LABEL = {
    "screenshot": "Screenshot", "pdf": "PDF", "html": "Archived page", "readable": "Readable text",
    "media": "Media", "image": "Image", "text": "Text", "json": "Data", "warc": "WARC", "other": "Files",
}


@dataclass
class OutFile:
    path: str  # relative to the Snapshot folder
    size: int
    kind: str

    @property
    def name(self) -> str:
        return PurePosixPath(self.path).name

    @property
    def ext(self) -> str:
        name = self.name.lower()
        return ".warc.gz" if name.endswith(".warc.gz") else PurePosixPath(name).suffix

    @property
    def is_html(self) -> bool:
        return self.ext in HTML_EXT and self.ext != ".mhtml"

    @property
    def is_audio(self) -> bool:
        return self.ext in AUDIO_EXT


@dataclass
class Output:
    """One plugin's outputs: its main file (shown) and every other file (listed)."""

    plugin: str
    main: OutFile | None
    files: list[OutFile] = field(default_factory=list)
    preview: str = ""

    @property
    def kind(self) -> str:
        return self.main.kind if self.main else "other"

    @property
    def label(self) -> str:
        return KIND_LABEL.get(self.kind, "Files")


def kind_of(plugin: str, relpath: str) -> str:
    name = PurePosixPath(relpath).name.lower()
    ext = PurePosixPath(name).suffix
    if name.endswith((".warc", ".warc.gz", ".wacz")):
        return "warc"
    if ext == ".pdf":
        return "pdf"
    if ext in IMAGE_EXT:
        return "screenshot" if "screenshot" in plugin or "screenshot" in name else "image"
    if ext in VIDEO_EXT or ext in AUDIO_EXT:
        return "media"
    if plugin in ("readability", "mercury", "htmltotext") and ext in HTML_EXT | TEXT_EXT:
        return "readable"
    if ext in HTML_EXT:
        return "html"
    if ext in TEXT_EXT:
        return "text"
    if ext in JSON_EXT:
        return "json"
    return "other"


def scan(folder: Path) -> tuple[dict[str, list[OutFile]], bool]:
    """Files under each plugin folder of a Snapshot ({plugin: files}), and whether it was cut short."""
    found: dict[str, list[OutFile]] = {}
    count = 0
    if not folder.is_dir():
        return found, False
    for root, dirs, files in os.walk(folder):
        rel_root = os.path.relpath(root, folder)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if rel_root == ".":
            continue  # index.json and the like: the page shows them from the database
        plugin = PurePosixPath(rel_root).parts[0]
        for name in sorted(files):
            if name.startswith(".") or name.endswith(LOG_SUFFIXES):
                continue
            full = os.path.join(root, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if not os.path.isfile(full) or os.path.islink(full):
                continue
            rel = os.path.relpath(full, folder).replace(os.sep, "/")
            found.setdefault(plugin, []).append(OutFile(rel, st.st_size, kind_of(plugin, rel)))
            count += 1
            if count >= MAX_FILES:
                return found, True
    return found, False


def main_file(plugin: str, files: list[OutFile], output_str: str, output_files: list[str]) -> OutFile | None:
    """The file that stands for a plugin's output: the one its result names, else the best kind."""
    by_path = {f.path: f for f in files}
    for candidate in (f"{plugin}/{output_str.strip()}" if output_str else "", *(output_files or [])):
        if candidate in by_path:
            return by_path[candidate]
    ranked = sorted(files, key=lambda f: (KIND_ORDER.index(f.kind), f.path.count("/"), -f.size))
    return ranked[0] if ranked else None


def preview_of(folder: Path, f: OutFile) -> str:
    """The start of a small text/JSON file (pretty-printed JSON), for showing inline."""
    if f.kind not in ("json", "text", "readable") or f.ext in HTML_EXT:
        return ""
    try:
        with open(folder / f.path, "rb") as fh:
            data = fh.read(PREVIEW_BYTES + 1)
    except OSError:
        return ""
    text = data[:PREVIEW_BYTES].decode("utf-8", errors="replace")
    if f.ext == ".json" and len(data) <= PREVIEW_BYTES:
        with contextlib.suppress(ValueError):
            text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    return text + ("\n…" if len(data) > PREVIEW_BYTES else "")


def outputs_of(folder: Path, results: list) -> tuple[list[Output], bool]:
    """Every plugin's outputs, in the order a person looks for them."""
    files, truncated = scan(folder)
    result_of = {}
    for r in results:
        if r.status == "succeeded":
            result_of.setdefault(r.plugin, r)
    outputs = []
    for plugin, plugin_files in files.items():
        r = result_of.get(plugin)
        main = main_file(plugin, plugin_files, r.output_str if r else "", r.output_files if r else [])
        out = Output(plugin=plugin, main=main, files=plugin_files)
        if main is not None:
            out.preview = preview_of(folder, main)
        outputs.append(out)
    outputs.sort(key=lambda o: (KIND_ORDER.index(o.kind), o.plugin))
    return outputs, truncated
