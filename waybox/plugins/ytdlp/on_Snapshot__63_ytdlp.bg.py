"""Download audio/video and its metadata with yt-dlp, in the background (it can take hours).

Skipped within about a second when the URL has no media: no yt-dlp site extractor claims it
and the page (wget's copy, or one small request) is neither audio/video nor HTML with a
media element, an embed or a streaming manifest. Files land in this hook's folder:
`<title> [<id>].<ext>` plus `.info.json`, description, thumbnail and subtitles.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from waybox import hookkit

MEDIA_TYPE_RE = re.compile(r"(?i)^(audio|video)/|^application/(ogg|x-mpegurl|vnd\.apple\.mpegurl|dash\+xml)\b")
MEDIA_HINT_RE = re.compile(
    rb"(?i)<(video|audio|source|embed|object)\b|<iframe\b[^>]*\bsrc=|og:video|og:audio|twitter:player"
    rb"|\.m3u8\b|\.mpd\b|\.(mp4|webm|mp3|m4a|ogg|ogv|oga|opus|wav|flac|mov|mkv)\b"
)
META_SUFFIXES = (".info.json", ".description", ".part", ".ytdl", ".jpg", ".jpeg", ".png", ".webp", ".vtt", ".srt",
                 ".ass", ".lrc", ".json", ".temp")
UNSUPPORTED_RE = re.compile(r"(?i)Unsupported URL|No video formats found|no suitable (formats|InfoExtractor)")
GONE_RE = re.compile(r"(?i)HTTP Error 4(0[0-9]|10|51)|Video unavailable|Private video|This video is not available|"
                     r"has been removed|members[- ]only|Sign in to confirm|not available in your country|"
                     r"Requested format is not available")
SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)b?\s*$", re.I)


def parse_size(text: str) -> int | None:
    match = SIZE_RE.match(text or "")
    if not match:
        return None
    return int(float(match[1]) * 1024 ** "_kmgt".index(match[2].lower() or "_"))


def site_extractor(url: str) -> str | None:
    """The yt-dlp extractor (other than the generic one) that claims this URL, if any."""
    try:
        from yt_dlp.extractor import gen_extractor_classes
    except ImportError:
        return None
    for extractor in gen_extractor_classes():
        key = extractor.ie_key()
        if key != "Generic" and extractor.suitable(url):
            return key
    return None


def is_media_file(head: bytes) -> bool:
    """Audio/video container magic numbers (MP4/MOV, WebM/MKV, WAV/AVI, Ogg, MP3, FLAC, MPEG-TS/PS, FLV)."""
    return (head[4:8] == b"ftyp" or head.startswith((b"\x1a\x45\xdf\xa3", b"OggS", b"ID3", b"fLaC", b"FLV",
                                                      b"\x00\x00\x01\xba", b"#EXTM3U"))
            or (head.startswith(b"RIFF") and head[8:12] in (b"WAVE", b"AVI "))
            or head[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2")
            or (len(head) > 188 and head[0] == 0x47 == head[188]))


def has_media_hints(hook: hookkit.Hook) -> bool:
    """Cheap look at the document for anything yt-dlp's generic extractor could download."""
    if hook.snap_dir is not None:
        main = hookkit.wget_main_file(hook.snap_dir / "wget", hook.url)
        if main is not None:
            with hookkit.original_of(main).open("rb") as f:
                sample = f.read(2_000_000)
            return is_media_file(sample) or (not hookkit.looks_binary(sample[:8192])
                                             and bool(MEDIA_HINT_RE.search(sample)))
    try:
        response = hook.fetch(hook.url, max_bytes=2_000_000, timeout=30)
    except hookkit.FetchError as err:
        hook.log(f"cannot fetch the page to look for media: {err}")
        raise SystemExit(1) from None
    if MEDIA_TYPE_RE.match(response.content_type):
        return True
    if not response.ok:
        hook.skip(f"the page answered {response.status} {response.reason}")
    return hookkit.is_textual(response.content_type) and bool(MEDIA_HINT_RE.search(response.body))


def ytdlp_command(hook: hookkit.Hook) -> list[str]:
    binary = hook.which(hook.get("YTDLP_BINARY", "yt-dlp"))
    if binary:
        return [binary]
    try:
        import yt_dlp  # noqa: F401
    except ImportError:
        hook.skip("yt-dlp is not installed (pip install yt-dlp, or run `waybox install`)")
    return [sys.executable, "-m", "yt_dlp"]


def media_files(hook: hookkit.Hook) -> list[str]:
    return [f for f in hook.files() if not f.lower().endswith(META_SUFFIXES)]


def main(hook: hookkit.Hook) -> int:
    extractor = site_extractor(hook.url)
    if extractor is None and not has_media_hints(hook):
        hook.skip("no media found on this page")
    cmd = [*ytdlp_command(hook), *hook.get("YTDLP_ARGS", []),
           "--socket-timeout", str(max(5, int(min(hook.remaining(), 60)))),
           "-o", "%(title).80B [%(id).40B].%(ext)s", "--no-color"]
    if hook.get("YTDLP_FORMAT"):
        cmd += ["-f", hook.get("YTDLP_FORMAT")]
    max_size = hook.get("YTDLP_MAX_SIZE", "")
    if max_size:
        cmd += ["--max-filesize", str(parse_size(max_size) or max_size)]
    if hook.user_agent:
        cmd += ["--user-agent", hook.user_agent]
    if not hook.check_ssl:
        cmd.append("--no-check-certificates")
    if hook.cookies_file and Path(hook.cookies_file).is_file():
        cmd += ["--cookies", hook.cookies_file]
    cmd += [*hook.get("YTDLP_EXTRA_ARGS", []), "--", hook.url]

    ran = hook.run_binary(cmd)
    files = hook.files()
    media = media_files(hook)
    info = read_info(hook)
    if ran.timed_out:
        hook.log(f"yt-dlp did not finish within {hook.timeout:.0f}s")
        return 1
    if ran.exit_code == 0:
        if media:
            hook.result("succeeded", media[0], files, info)
            return 0
        if "larger than max-filesize" in ran.stdout + ran.stderr:
            hook.result("failed", f"the media is larger than YTDLP_MAX_SIZE ({max_size})", files, info)
            return 0
        hook.result("failed", "yt-dlp finished without downloading any media", files, info)
        return 0
    if UNSUPPORTED_RE.search(ran.stderr) and not media:
        for name in files:
            (hook.cwd / name).unlink(missing_ok=True)
        hook.skip("no media found on this page (yt-dlp: unsupported URL)")
    if GONE_RE.search(ran.stderr):
        hook.result("failed", last_error(ran.stderr), files, info)
        return 0
    if media and not any(f.endswith(".part") for f in files):
        hook.result("succeeded", media[0], files, {**(info or {}), "warnings": last_error(ran.stderr)})
        return 0
    hook.log(f"yt-dlp exited {ran.exit_code}: {last_error(ran.stderr)}")
    return 1


def read_info(hook: hookkit.Hook) -> dict | None:
    """A short summary of the first .info.json yt-dlp wrote."""
    for path in sorted(hook.cwd.glob("*.info.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            keys = ("id", "title", "extractor", "webpage_url", "duration", "uploader", "upload_date", "ext",
                    "filesize", "format")
            return {k: data.get(k) for k in keys if data.get(k) is not None}
    return None


def last_error(stderr: str) -> str:
    errors = [line.strip() for line in stderr.splitlines() if line.strip().startswith("ERROR")]
    lines = errors or [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1][:500] if lines else "no message"


def on_terminated(hook: hookkit.Hook) -> int:
    """The Snapshot sealed while downloading: report complete files, else leave it to a retry."""
    media = media_files(hook)
    if media and not any(f.endswith(".part") for f in hook.files()):
        hook.result("succeeded", media[0], hook.files(), read_info(hook))
        return 0
    return 1


if __name__ == "__main__":
    hookkit.run(__file__, main, on_terminated)
