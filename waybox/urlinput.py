"""Turning user input into URLs to archive, and saying clearly why a line was not one."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

ALLOWED_SCHEMES = ("http", "https", "ftp")
MAX_URL_LENGTH = 4096
LOOKS_LIKE_HOST_RE = re.compile(r"^[\w-]+(?:(?:\.[\w-]+)+(?::\d+)?|:\d+)(?:[/?#]|$)")
HOST_PORT_RE = re.compile(r"^[^:/?#]+:\d+(?:[/?#]|$)")


class InvalidURL(ValueError):
    """Not a URL waybox can archive; the message is the reason, shown to the user as is."""


@dataclass(frozen=True)
class Rejected:
    """One input line that is not a URL: where it was, what it said, and why it was refused."""

    where: str
    text: str
    reason: str


def normalize_url(text: str) -> str:
    """The URL with scheme and host lower-cased, or InvalidURL saying what is wrong."""
    raw = text.strip()
    _check_text(raw)
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as err:
        raise InvalidURL(str(err)) from None
    scheme = parts.scheme.lower()
    if not scheme or HOST_PORT_RE.match(raw):  # `localhost:8000/x` parses as scheme "localhost"
        raise InvalidURL(f"no scheme (expected http://, https:// or ftp://{_suggest(raw)})")
    if scheme not in ALLOWED_SCHEMES:
        raise InvalidURL(f"unsupported scheme {scheme!r} (expected {', '.join(ALLOWED_SCHEMES)})")
    _check_host(parts.hostname, port)
    netloc = parts.netloc
    at = netloc.rfind("@") + 1
    netloc = netloc[:at] + netloc[at:].lower()
    # an empty path is "/" (RFC 3986 6.2.3): `http://x.com?q` and `http://x.com/?q` are one URL
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, parts.fragment))


def _suggest(raw: str) -> str:
    """`, e.g. https://example.com` when the text looks like a host name that lost its scheme."""
    bare = raw.lstrip("/")
    return f", e.g. https://{bare}" if LOOKS_LIKE_HOST_RE.match(bare) else ""


def _check_text(raw: str) -> None:
    if not raw:
        raise InvalidURL("empty")
    if len(raw) > MAX_URL_LENGTH:
        raise InvalidURL(f"longer than {MAX_URL_LENGTH} characters")
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in raw):
        raise InvalidURL("contains whitespace or control characters")


def _check_host(host: str | None, port: int | None) -> None:
    if not host:
        raise InvalidURL("no host")
    try:
        host.encode("idna")
    except UnicodeError:
        raise InvalidURL(f"invalid host name {host!r}") from None
    if port is not None and not 0 < port < 65536:
        raise InvalidURL(f"invalid port {port}")


def parse_url_lines(lines: Iterable[str], where: str) -> Iterator[str | Rejected]:
    """Plain text, one URL per line; blank lines and `#` comments are passed over."""
    for lineno, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            yield normalize_url(text)
        except InvalidURL as err:
            yield Rejected(f"{where}:{lineno}" if where else str(lineno), text, str(err))


def split_valid(items: Iterable[str | Rejected]) -> tuple[list[str], list[Rejected]]:
    """Valid URLs in first-seen order without repeats, and the rejected lines."""
    urls: dict[str, None] = {}
    rejected: list[Rejected] = []
    for item in items:
        if isinstance(item, Rejected):
            rejected.append(item)
        else:
            urls.setdefault(item, None)
    return list(urls), rejected
