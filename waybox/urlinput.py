"""Turning user input into URLs to archive, and saying clearly why a line was not one."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

ALLOWED_SCHEMES = ("http", "https", "ftp")
MAX_URL_LENGTH = 4096


class InvalidURL(ValueError):
    pass


@dataclass(frozen=True)
class Rejected:
    where: str
    text: str
    reason: str


def normalize_url(text: str) -> str:
    """The URL with scheme and host lower-cased, or InvalidURL saying what is wrong."""
    raw = text.strip()
    if not raw:
        raise InvalidURL("empty")
    if len(raw) > MAX_URL_LENGTH:
        raise InvalidURL(f"longer than {MAX_URL_LENGTH} characters")
    if any(ch.isspace() for ch in raw) or any(ord(ch) < 32 for ch in raw):
        raise InvalidURL("contains whitespace or control characters")
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as err:
        raise InvalidURL(str(err)) from None
    scheme = parts.scheme.lower()
    if not scheme:
        raise InvalidURL("no scheme (expected http://, https:// or ftp://)")
    if scheme not in ALLOWED_SCHEMES:
        raise InvalidURL(f"unsupported scheme {scheme!r} (expected {', '.join(ALLOWED_SCHEMES)})")
    host = parts.hostname
    if not host:
        raise InvalidURL("no host")
    try:
        host.encode("idna")
    except UnicodeError:
        raise InvalidURL(f"invalid host name {host!r}") from None
    if port is not None and not 0 < port < 65536:
        raise InvalidURL(f"invalid port {port}")
    netloc = parts.netloc
    at = netloc.rfind("@") + 1
    netloc = netloc[:at] + netloc[at:].lower()
    return urlunsplit((scheme, netloc, parts.path or ("/" if not parts.query else ""), parts.query, parts.fragment))


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
