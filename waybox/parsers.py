"""Finding the links in a document or an import file, whatever its format.

One entry point, `parse(data)`, serves the step-7 parser hooks (links discovered in a fetched
page or feed) and `waybox add --file` / stdin (imports). It detects the format, reads what it
can and says what it could not:

* `ParseResult.links`: the links found, in document order, each URL once (the first wins),
  validated and normalised with `waybox.urlinput.normalize_url`;
* `ParseResult.skipped`: every line or item that was passed over, with its line number and
  the reason (an invalid URL, a broken JSON line, the place where a truncated feed stops...).

A partly broken document gives what it can. `ParseError` (a `ValueError`) is the only error
raised, and only when nothing in the input is understood: empty input, binary data, or text
in which no parser finds a format or a URL. It carries the skipped lines too.

Formats (`FORMATS`): plain text with URLs, HTML, RSS (0.9x/1.0/2.0), Atom, XML sitemaps,
Netscape bookmark exports (Firefox, Chrome, Pinboard, Pocket's HTML export...), JSON Lines,
JSON arrays of links, Pinboard's JSON export, Pocket's CSV export and CSV with a url column.

Only the standard library is used: feeds are read with expat directly (it keeps line
numbers, keeps every item before a truncation, maps HTML entities such as `&nbsp;` instead of
failing on them, and refuses DTD entity declarations), HTML with `html.parser`, which never
gives up on malformed markup.
"""

from __future__ import annotations

import bisect
import codecs
import contextlib
import csv
import html
import html.entities
import io
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit
from xml.parsers import expat

from waybox.urlinput import InvalidURL, normalize_url

FORMATS = {
    "txt": "plain text with URLs",
    "html": "HTML page (links in <a href>)",
    "rss": "RSS feed",
    "atom": "Atom feed",
    "sitemap": "XML sitemap",
    "netscape": "Netscape bookmarks export (HTML)",
    "jsonl": "JSON Lines, one link object per line",
    "json": "JSON array of links",
    "pinboard": "Pinboard JSON export",
    "pocket": "Pocket CSV export",
    "csv": "CSV with a url column",
}
MAX_SKIPPED_TEXT = 200
MAX_TAG_LENGTH = 100
SNIFF_CHARS = 8192
MIN_YEAR, MAX_YEAR = 1970, 2200  # dates outside are misread units or junk

URL_KEYS = ("url", "href", "link", "uri", "URL", "Url", "Href")
TITLE_KEYS = ("title", "name", "description", "Title", "Name")
TAG_KEYS = ("tags", "tag", "labels", "Tags")
DATE_KEYS = ("bookmarked_at", "timestamp", "time", "time_added", "created_at", "created", "added_at", "added",
             "date_added", "dateAdded", "add_date", "date", "saved_at")
PINBOARD_KEYS = {"hash", "shared", "toread", "extended", "meta"}
CSV_URL_COLUMNS = ("url", "href", "link", "uri")
URL_IN_TEXT_RE = re.compile(r"""(?i)\b(?:https?|ftp)://[^\s<>"'`{}|\\^]+""")
WHITESPACE_RE = re.compile(r"\s")
SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
EPOCH_RE = re.compile(r"\s*\d{9,17}(?:\.\d+)?\s*")
HTML_HINT_RE = re.compile(r"(?i)<(?:!doctype\s+html|html|head|body|a|p|div|span|ul|li|dl|dt|table|article|main)\b")


class ParseError(ValueError):
    """Nothing in the input is understood (empty, binary, or no known format and no URL)."""

    def __init__(self, message: str, skipped: list[Skipped] | None = None):
        super().__init__(message)
        self.skipped = list(skipped or [])


@dataclass(frozen=True)
class Link:
    url: str
    title: str = ""
    tags: tuple[str, ...] = ()
    bookmarked_at: str | None = None  # ISO 8601 in UTC
    line: int = 0

    def record(self) -> dict[str, Any]:
        """The hook JSONL record announcing this link."""
        rec: dict[str, Any] = {"type": "Snapshot", "url": self.url}
        if self.title:
            rec["title"] = self.title
        if self.tags:
            rec["tags"] = list(self.tags)
        if self.bookmarked_at:
            rec["bookmarked_at"] = self.bookmarked_at
        return rec


@dataclass(frozen=True)
class Skipped:
    line: int  # 1-based; 0 when the position is unknown
    text: str
    reason: str

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "input"
        return f"{where}: {self.text!r}: {self.reason}" if self.text else f"{where}: {self.reason}"


@dataclass
class ParseResult:
    format: str
    links: list[Link] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def urls(self) -> list[str]:
        return [link.url for link in self.links]


# -- entry points ----------------------------------------------------------------------------


def parse(data: str | bytes, *, format: str | None = None, base_url: str | None = None) -> ParseResult:  # noqa: A002
    """Links in `data`. `format` forces one of FORMATS (else it is detected); `base_url` resolves
    relative links (HTML, Atom) and is the page itself, so links back to it are left out."""
    text = decode(data)
    detected = format is None
    if format is None:
        format = detect_format(text)  # noqa: A001
    elif format not in FORMATS:
        raise ValueError(f"unknown format {format!r} (expected one of {', '.join(FORMATS)})")
    base = _normalize_or_none(base_url) if base_url else None
    collector = _Collector(base)
    _PARSERS[format](text, collector)
    if detected and format == "html" and not collector.links and not HTML_HINT_RE.search(text[:SNIFF_CHARS]):
        format = "txt"  # noqa: A001 - markup-looking text that is not HTML: maybe a list of <URL>s
        collector = _Collector(base)
        _PARSERS[format](text, collector)
    skipped = sorted(collector.skipped, key=lambda item: item.line)
    result = ParseResult(format=format, links=collector.links, skipped=skipped)
    if format == "txt" and not result.links:
        raise ParseError(
            "no parser understands this input: it is not HTML, RSS/Atom, a sitemap, Netscape bookmarks, "
            "JSON, JSON Lines or CSV, and no line holds a valid URL", result.skipped)
    return result


def parse_file(path: str | Path, *, format: str | None = None, base_url: str | None = None) -> ParseResult:  # noqa: A002
    """`parse` on a file's bytes (OSError if it cannot be read)."""
    return parse(Path(path).read_bytes(), format=format, base_url=base_url)


def decode(data: str | bytes) -> str:
    """Text from bytes (BOM, UTF-8, declared charset, then Windows-1252); ParseError for binary data."""
    if isinstance(data, str):
        text = data[1:] if data.startswith("\ufeff") else data
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates
            text = text.encode("utf-8", "replace").decode("utf-8")
    else:
        text = _decode_bytes(data)
    if not text.strip():
        raise ParseError("the input is empty: there is nothing to import")
    if _looks_binary(text[:SNIFF_CHARS]):
        raise ParseError("the input is binary data, not text: no parser understands it")
    return text


def detect_format(data: str | bytes) -> str:
    """The name (a key of FORMATS) of the format `data` looks like; ParseError if it is empty or binary."""
    text = decode(data)
    stripped = text.lstrip()
    head = stripped[:SNIFF_CHARS]
    lower = head.lower()
    if head.startswith("<"):
        if "<!doctype netscape-bookmark-file" in lower or re.search(r"<dt>\s*<a\s[^>]*\badd_date\s*=", lower):
            return "netscape"
        root = _xml_root(head)
        if root in ("rss", "rdf"):
            return "rss"
        if root == "feed":
            return "atom"
        if root in ("urlset", "sitemapindex"):
            return "sitemap"
        return "html"
    if head.startswith(("{", "[")):
        return _detect_json(stripped)
    first_line = head.split("\n", 1)[0]
    if "," in first_line or ";" in first_line or "\t" in first_line:
        columns = _csv_header(first_line)
        if columns and any(c in CSV_URL_COLUMNS for c in columns):
            return "pocket" if "time_added" in columns else "csv"
    return "txt"


# -- collecting ------------------------------------------------------------------------------


class _Collector:
    """Validates, de-duplicates and records links and skipped lines for one parse."""

    def __init__(self, base: str | None):
        self.base = base
        self.base_key = _without_fragment(base) if base else None
        self.links: list[Link] = []
        self.skipped: list[Skipped] = []
        self._seen: dict[str, int] = {}

    def skip(self, line: int, text: Any, reason: str) -> None:
        shown = " ".join(str(text).split()) if text is not None else ""
        if len(shown) > MAX_SKIPPED_TEXT:
            shown = shown[: MAX_SKIPPED_TEXT - 1] + "…"
        self.skipped.append(Skipped(line, shown, reason))

    def add(self, raw_url: Any, line: int, *, title: Any = "", tags: Iterable[str] = (), date: Any = None,
            resolve: bool = False, drop_fragment: bool = False, quiet_self: bool = False,
            quiet_duplicate: bool = False) -> bool:
        if not isinstance(raw_url, str) or not raw_url.strip():
            self.skip(line, raw_url if raw_url is not None else "", "no URL")
            return False
        raw = raw_url.strip()
        if resolve:
            if self.base:
                try:
                    raw = urljoin(self.base, raw)
                except ValueError as err:
                    self.skip(line, raw_url, f"cannot resolve against the page URL: {err}")
                    return False
            elif not SCHEME_RE.match(raw) and not raw.startswith("//"):
                self.skip(line, raw_url, "relative link and no page URL to resolve it against")
                return False
        try:
            url = normalize_url(raw)
        except InvalidURL as err:
            self.skip(line, raw_url, str(err))
            return False
        if drop_fragment:
            url = _without_fragment(url)
        if self.base_key and _without_fragment(url) == self.base_key:
            if not quiet_self:
                self.skip(line, raw_url, "links to the page itself")
            return False
        if url in self._seen:
            if not quiet_duplicate:
                first = self._seen[url]
                self.skip(line, raw_url, f"duplicate of line {first}" if first else "duplicate")
            return False
        self._seen[url] = line
        self.links.append(Link(url=url, title=_clean_title(title), tags=tuple(_clean_tags(tags)),
                               bookmarked_at=parse_date(date), line=line))
        return True


def _without_fragment(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    return urlunsplit((parts.scheme, parts.netloc, parts.path, parts.query, ""))


def _normalize_or_none(url: str) -> str | None:
    try:
        return normalize_url(url)
    except InvalidURL:
        return None


def _clean_title(title: Any) -> str:
    if not isinstance(title, str):
        return ""
    return " ".join(title.split())[:1000]


def _clean_tags(tags: Iterable[Any]) -> list[str]:
    seen: dict[str, None] = {}
    for tag in tags:
        if isinstance(tag, str):
            name = " ".join(tag.split())[:MAX_TAG_LENGTH]
            if name:
                seen.setdefault(name, None)
    return list(seen)


def _split_tags(value: Any, separators: str = ",") -> list[str]:
    if isinstance(value, list | tuple):
        return [str(v) for v in value if isinstance(v, str | int | float)]
    if not isinstance(value, str):
        return []
    return [part for part in re.split(f"[{re.escape(separators)}]", value) if part.strip()]


def parse_date(value: Any) -> str | None:
    """ISO 8601 (UTC) from epoch seconds/ms/µs, ISO 8601 or RFC 822 dates; None if not a date."""
    if value is None or isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float) or (isinstance(value, str) and EPOCH_RE.fullmatch(value)):
            seconds = float(value)
            if not math.isfinite(seconds) or seconds <= 0:
                return None
            while seconds > 1e11:  # milliseconds or microseconds since the epoch
                seconds /= 1000
            parsed = datetime.fromtimestamp(seconds, UTC)
        elif isinstance(value, str) and value.strip():
            text = value.strip()
            try:
                parsed = datetime.fromisoformat(text)
            except ValueError:
                parsed = parsedate_to_datetime(text)
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
        else:
            return None
        parsed = parsed.astimezone(UTC)
        if not MIN_YEAR <= parsed.year <= MAX_YEAR:
            return None
        return parsed.isoformat()
    except (ValueError, TypeError, OverflowError, OSError, IndexError):
        return None


# -- decoding and sniffing -------------------------------------------------------------------


def _decode_bytes(data: bytes) -> str:
    if data.startswith(codecs.BOM_UTF8):
        return data[3:].decode("utf-8", "replace")
    for bom, codec in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            return data[2:].decode(codec, "replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    declared = re.search(rb"""(?:encoding|charset)\s*=\s*["']?([A-Za-z0-9._:-]{1,40})""", data[:2048])
    if declared:
        try:
            return data.decode(declared.group(1).decode("ascii"), "replace")
        except (LookupError, ValueError):
            pass
    return data.decode("cp1252", "replace")


def _looks_binary(sample: str) -> bool:
    if "\x00" in sample:
        return True
    bad = sum(1 for ch in sample if (ord(ch) < 32 and ch not in "\t\n\r\f\v") or 0x7F <= ord(ch) < 0xA0
              or ch == "\ufffd")
    return bad > max(8, len(sample) // 20)


def _xml_root(head: str) -> str | None:
    """Local name, lower-cased, of the first element after the prolog, comments and doctype."""
    pos = 0
    while True:
        match = re.compile(r"\s*(<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^>\[]*(\[.*?\])?\s*>)", re.S | re.I).match(head, pos)
        if not match or match.end() == pos:
            break
        pos = match.end()
    match = re.compile(r"\s*<([A-Za-z_][\w.:-]*)").match(head, pos)
    if not match:
        return None
    return match.group(1).rsplit(":", 1)[-1].lower()


def _detect_json(stripped: str) -> str:
    try:
        data = json.loads(stripped)
    except (ValueError, RecursionError):
        lines = [line.strip() for line in stripped[:SNIFF_CHARS * 8].splitlines() if line.strip()][:20]
        for line in lines:
            if line.startswith("{"):
                try:
                    if isinstance(json.loads(line), dict):
                        return "jsonl"
                except (ValueError, RecursionError):
                    pass
        if stripped.startswith("["):
            return "pinboard" if re.search(r'"(?:hash|toread|shared)"\s*:', stripped[:SNIFF_CHARS]) else "json"
        return "txt"
    if isinstance(data, dict):
        return "json" if _links_in_json_object(data) is not None else "jsonl"
    if isinstance(data, list) and any(isinstance(i, dict) and "href" in i and PINBOARD_KEYS & set(i)
                                      for i in data[:50]):
        return "pinboard"
    return "json"


def _csv_delimiter(line: str) -> str:
    return max(",;\t", key=line.count)


def _csv_header(line: str) -> list[str]:
    try:
        row = next(csv.reader([line], delimiter=_csv_delimiter(line)))
    except (csv.Error, StopIteration):
        return []
    return [c.strip().lower() for c in row]


class _LineIndex:
    """Line numbers of character offsets."""

    def __init__(self, text: str):
        self.starts = [m.end() for m in re.finditer("\n", text)]

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) + 1


# -- plain text ------------------------------------------------------------------------------


def _trim_url(candidate: str) -> str:
    while candidate and candidate[-1] in ".,;:!?'\")]}>":
        closer = candidate[-1]
        opener = {")": "(", "]": "[", "}": "{"}.get(closer)
        if opener and candidate.count(opener) >= candidate.count(closer):
            break
        candidate = candidate[:-1]
    return candidate


def _parse_txt(text: str, out: _Collector) -> None:
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not WHITESPACE_RE.search(stripped):  # one token: a URL or a reason why it is not one
            candidate = stripped[1:-1] if stripped.startswith("<") and stripped.endswith(">") else stripped
            out.add(_trim_url(candidate) if URL_IN_TEXT_RE.fullmatch(candidate) else candidate, lineno)
            continue
        found = [_trim_url(m.group(0)) for m in URL_IN_TEXT_RE.finditer(stripped)]
        if not found:
            out.skip(lineno, stripped, "no URL in this line")
        for url in found:
            out.add(url, lineno, quiet_duplicate=True)


# -- HTML and Netscape bookmarks -------------------------------------------------------------


class _AnchorParser(HTMLParser):
    """Collects <a href> (and <area href>) with their text and bookmark attributes."""

    def __init__(self, on_anchor: Callable[[dict, str, int], None], on_base: Callable[[str], None] | None = None):
        super().__init__(convert_charrefs=True)
        self.on_anchor = on_anchor
        self.on_base = on_base
        self.current: tuple[dict, int] | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "base" and self.on_base is not None:
            href = dict(attrs).get("href")
            if href:
                self.on_base(href)
            self.on_base = None  # only the first <base> counts
        elif tag in ("a", "area"):
            self.flush()
            attributes = {k.lower(): v for k, v in attrs if v is not None}
            if tag == "area":
                self.on_anchor(attributes, attributes.get("alt", ""), self.getpos()[0])
            else:
                self.current = (attributes, self.getpos()[0])
                self.text = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self.flush()

    def handle_data(self, data: str) -> None:
        if self.current is not None:
            self.text.append(data)

    def flush(self) -> None:
        if self.current is not None:
            attributes, line = self.current
            self.current = None
            self.on_anchor(attributes, "".join(self.text), line)


def _feed_html(parser: _AnchorParser, text: str, out: _Collector) -> None:
    # `<![name[` with an unknown name makes html.parser raise AssertionError: neutralise it first
    text = re.sub(r"<!\[(?!(?:cdata|if|else|endif|temp|ignore|include|rcdata)\b)", "&lt;![", text, flags=re.I)
    try:
        parser.feed(text)
        parser.close()
    except Exception as err:  # noqa: BLE001 - html.parser's internal asserts; keep what was read
        out.skip(parser.getpos()[0], "",
                 f"HTML parser stopped here ({type(err).__name__}: {err}); the rest is not read")
    parser.flush()


def _parse_html(text: str, out: _Collector) -> None:
    def on_base(href: str) -> None:
        if out.base:
            with contextlib.suppress(ValueError):
                out.base = urljoin(out.base, href.strip())

    def on_anchor(attrs: dict, title: str, line: int) -> None:
        href = (attrs.get("href") or "").strip()
        if not href or href.startswith("#"):
            return  # a named anchor or a jump inside the page, not a link
        tags = _split_tags(attrs.get("tags", ""))
        date = attrs.get("add_date") or attrs.get("time_added")
        out.add(href, line, title=title, tags=tags, date=date, resolve=True, drop_fragment=True, quiet_self=True,
                quiet_duplicate=True)

    _feed_html(_AnchorParser(on_anchor, on_base), text, out)


def _parse_netscape(text: str, out: _Collector) -> None:
    def on_anchor(attrs: dict, title: str, line: int) -> None:
        href = attrs.get("href")
        if href is None:
            out.skip(line, title, "bookmark without an HREF")
            return
        tags = _split_tags(attrs.get("tags", ""))
        date = attrs.get("add_date") or attrs.get("time_added") or attrs.get("last_modified")
        out.add(href, line, title=title, tags=tags, date=date)

    _feed_html(_AnchorParser(on_anchor), text, out)


# -- XML: RSS, Atom, sitemaps ----------------------------------------------------------------


class _Node:
    __slots__ = ("name", "attrs", "line", "children", "text", "closed")

    def __init__(self, name: str, attrs: dict[str, str], line: int):
        self.name = name
        self.attrs = attrs
        self.line = line
        self.children: list[_Node] = []
        self.text: list[str] = []
        self.closed = False

    def find(self, *names: str) -> _Node | None:
        return next((c for c in self.children if c.name in names), None)

    def find_all(self, *names: str) -> list[_Node]:
        return [c for c in self.children if c.name in names]

    def value(self) -> str:
        return "".join(self.text).strip()


class _RefusedXML(Exception):
    pass


def _local(name: str) -> str:
    return name.rsplit(":", 1)[-1].lower()


def _walk_xml(text: str, item_names: set[str], on_item: Callable[[_Node, bool], None], out: _Collector,
              kind: str) -> str | None:
    """Stream `text` through expat; `on_item(node, complete)` for each element named in item_names.
    Returns the root element's local name."""
    parser = expat.ParserCreate()
    parser.UseForeignDTD(True)
    parser.ExternalEntityRefHandler = lambda *args: 1
    root: list[str] = []
    stack: list[_Node] = []  # open nodes inside the current item

    def start(name: str, attrs: dict[str, str]) -> None:
        local = _local(name)
        if not root:
            root.append(local)
        node = _Node(local, {_local(k): v for k, v in attrs.items()}, parser.CurrentLineNumber)
        if stack:
            stack[-1].children.append(node)
            stack.append(node)
        elif local in item_names:
            stack.append(node)

    def end(name: str) -> None:
        if stack:
            node = stack.pop()
            node.closed = True
            if not stack:
                on_item(node, True)

    def data(chars: str) -> None:
        if stack:
            stack[-1].text.append(chars)

    def skipped_entity(name: str, is_parameter: bool) -> None:
        codepoint = html.entities.name2codepoint.get(name)
        if codepoint is not None:
            data(chr(codepoint))

    def refuse(*args: Any) -> None:
        raise _RefusedXML("the document declares XML entities; refused (entity expansion attacks)")

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = data
    parser.SkippedEntityHandler = skipped_entity
    parser.EntityDeclHandler = refuse
    try:
        parser.Parse(text, True)
    except expat.ExpatError as err:
        reason = f"not well-formed XML ({expat.ErrorString(err.code)}, column {err.offset})"
        if stack:
            on_item(stack[0], False)
            reason += f"; the {kind} entry open here is cut off"
        out.skip(err.lineno, _line_at(text, err.lineno), reason + "; the rest is not read")
    except _RefusedXML as err:
        out.skip(parser.CurrentLineNumber, "", str(err))
    except RecursionError:
        out.skip(parser.CurrentLineNumber, "", "elements nested too deeply; the rest is not read")
    return root[0] if root else None


def _line_at(text: str, lineno: int) -> str:
    lines = text.splitlines()
    return lines[lineno - 1] if 0 < lineno <= len(lines) else ""


def _closed_value(node: _Node | None) -> str:
    return node.value() if node is not None and node.closed else ""


def _feed_item(node: _Node, complete: bool, out: _Collector) -> None:
    if node.name == "entry":  # Atom
        links = [c for c in node.find_all("link") if c.closed or complete]
        preferred = [c for c in links if c.attrs.get("rel", "alternate") == "alternate"] or links
        href = preferred[0].attrs.get("href") if preferred else None
        title = _closed_value(node.find("title"))
        date = _closed_value(node.find("published")) or _closed_value(node.find("updated"))
        tags = [c.attrs.get("term") or c.attrs.get("label") or "" for c in node.find_all("category")]
    else:  # RSS 2.0 / 0.9x / 1.0
        link = node.find("link")
        href = _closed_value(link) or (link.attrs.get("href") if link is not None else None)
        if not href:
            guid = node.find("guid")
            if guid is not None and guid.closed and guid.attrs.get("ispermalink", "true").lower() != "false":
                href = guid.value() or None
        if not href:
            href = node.attrs.get("about")
        title = _closed_value(node.find("title"))
        date = (_closed_value(node.find("pubdate")) or _closed_value(node.find("date"))
                or _closed_value(node.find("published")) or _closed_value(node.find("updated")))
        tags = [c.value() for c in node.find_all("category", "subject") if c.closed]
    if not href:
        if complete:
            out.skip(node.line, title, f"{node.name} without a link")
        return
    base = node.attrs.get("base")
    if base:
        with contextlib.suppress(ValueError):
            href = urljoin(base, href.strip())
    out.add(href, node.line, title=title, tags=tags, date=date, resolve=True)


def _parse_feed(text: str, out: _Collector) -> None:
    root = _walk_xml(text, {"item", "entry"}, lambda node, complete: _feed_item(node, complete, out), out,
                     "feed")
    if root is None and not out.links:
        reason = out.skipped[0].reason if out.skipped else "no XML element found"
        raise ParseError(f"not an RSS or Atom feed: {reason}", out.skipped)
    if root is not None and root not in ("rss", "rdf", "feed"):
        raise ParseError(f"not an RSS or Atom feed: the root element is <{root}>", out.skipped)


def _parse_sitemap(text: str, out: _Collector) -> None:
    def on_url(node: _Node, complete: bool) -> None:
        loc = node.find("loc")
        if loc is None or not loc.closed:
            if complete:
                out.skip(node.line, "", "sitemap entry without <loc>")
            return
        out.add(loc.value(), loc.line, date=_closed_value(node.find("lastmod")) or None)

    root = _walk_xml(text, {"url", "sitemap"}, on_url, out, "sitemap")
    if root not in ("urlset", "sitemapindex") and not out.links:
        raise ParseError(f"not an XML sitemap: the root element is <{root}>", out.skipped)


# -- JSON, JSON Lines, CSV -------------------------------------------------------------------


def _first(obj: dict, keys: Iterable[str]) -> Any:
    for key in keys:
        value = obj.get(key)
        if value not in (None, "", [], {}):
            return value
    return None


def _add_object(obj: Any, line: int, out: _Collector, *, tag_separators: str = ",") -> None:
    if isinstance(obj, str):
        out.add(obj, line)
        return
    if not isinstance(obj, dict):
        out.skip(line, json.dumps(obj)[:MAX_SKIPPED_TEXT] if _dumpable(obj) else repr(obj),
                 "not a JSON object with a url")
        return
    url = _first(obj, URL_KEYS)
    if url is None:
        out.skip(line, _short_json(obj), "no url, href or link field")
        return
    if not isinstance(url, str):
        out.skip(line, _short_json(obj), "the url field is not a string")
        return
    title = _first(obj, TITLE_KEYS)
    tags = _split_tags(_first(obj, TAG_KEYS), tag_separators)
    date = _first(obj, DATE_KEYS)
    out.add(url, line, title=title if isinstance(title, str) else "", tags=tags, date=date)


def _dumpable(obj: Any) -> bool:
    try:
        json.dumps(obj)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _short_json(obj: Any) -> str:
    try:
        return json.dumps(obj, ensure_ascii=False)[:MAX_SKIPPED_TEXT]
    except (TypeError, ValueError, RecursionError):
        return "{...}"


def _parse_jsonl(text: str, out: _Collector) -> None:
    stripped = text.strip()
    if stripped.startswith(("{", "[")) and "\n" in stripped:
        try:  # one pretty-printed JSON document rather than JSON Lines
            json.loads(stripped)
        except (ValueError, RecursionError):
            pass
        else:
            _parse_json(text, out)
            return
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "//")):
            continue
        try:
            obj = json.loads(stripped)
        except ValueError as err:
            out.skip(lineno, stripped, f"not valid JSON ({err.msg if hasattr(err, 'msg') else err})")
            continue
        except RecursionError:
            out.skip(lineno, stripped, "JSON nested too deeply")
            continue
        if isinstance(obj, dict) and (records := _links_in_json_object(obj)) is not None:
            for item in records:
                _add_object(item, lineno, out)
            continue
        _add_object(obj, lineno, out)


def _links_in_json_object(obj: dict) -> list | None:
    """The list of link objects inside an export wrapper like {"bookmarks": [...]}, if any."""
    if _first(obj, URL_KEYS) is not None:
        return None
    for key in ("links", "bookmarks", "items", "posts", "entries", "list", "data", "results", "snapshots"):
        value = obj.get(key)
        if isinstance(value, list):
            return value
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            return list(value.values())  # Pocket API style: {"list": {"id": {...}}}
    return None


def _iter_json_array(text: str, out: _Collector) -> Iterator[tuple[Any, int]]:
    """Elements of a JSON array with their line numbers; stops (and says where) at a broken one."""
    lines = _LineIndex(text)
    decoder = json.JSONDecoder()
    start = text.index("[") + 1
    pos = start
    length = len(text)
    while True:
        while pos < length and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= length:
            out.skip(lines.line(pos), "", "the JSON array is not closed (truncated file?)")
            return
        if text[pos] == "]":
            return
        try:
            obj, end = decoder.raw_decode(text, pos)
        except ValueError as err:
            out.skip(lines.line(pos), text[pos:pos + 80].split("\n", 1)[0],
                     f"not valid JSON ({getattr(err, 'msg', err)}); the rest is not read")
            return
        except RecursionError:
            out.skip(lines.line(pos), "", "JSON nested too deeply; the rest is not read")
            return
        yield obj, lines.line(pos)
        pos = end


def _parse_json_like(text: str, out: _Collector, tag_separators: str) -> None:
    stripped = text.lstrip()
    offset = len(text) - len(stripped)
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except (ValueError, RecursionError):
            _parse_jsonl(text, out)
            return
        records = _links_in_json_object(obj) if isinstance(obj, dict) else None
        for item in records if records is not None else [obj]:
            _add_object(item, 1, out, tag_separators=tag_separators)
        return
    if not stripped.startswith("["):
        raise ParseError("not JSON: a JSON export starts with [ or {")
    for obj, line in _iter_json_array(text[offset:], out):
        _add_object(obj, line + text.count("\n", 0, offset), out, tag_separators=tag_separators)


def _parse_json(text: str, out: _Collector) -> None:
    _parse_json_like(text, out, ",")


def _parse_pinboard(text: str, out: _Collector) -> None:
    _parse_json_like(text, out, " ")  # Pinboard separates tags with spaces


def _parse_csv(text: str, out: _Collector) -> None:
    first_line = text.lstrip()[:SNIFF_CHARS].split("\n", 1)[0]
    reader = csv.reader(io.StringIO(text.lstrip(), newline=""), delimiter=_csv_delimiter(first_line))
    try:
        header = [c.strip().lower() for c in next(reader)]
    except (StopIteration, csv.Error) as err:
        raise ParseError(f"not CSV with a url column: {err or 'no header row'}") from None
    url_col = next((header.index(c) for c in CSV_URL_COLUMNS if c in header), None)
    if url_col is None:
        raise ParseError(f"CSV without a url column (columns: {', '.join(header)[:200]})")

    def col(*names: str) -> int | None:
        return next((header.index(n) for n in names if n in header), None)

    title_col, tags_col = col("title", "name"), col("tags", "tag", "labels")
    date_col = col("time_added", "bookmarked_at", "created", "created_at", "date_added", "added", "date", "timestamp")
    while True:
        line = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            out.skip(line, "", f"not valid CSV ({err})")
            continue
        if not any(cell.strip() for cell in row):
            continue
        if len(row) <= url_col:
            out.skip(line, ",".join(row), "row has no url column")
            continue

        def cell(index: int | None, row: list[str] = row) -> str:
            return row[index] if index is not None and index < len(row) else ""

        out.add(row[url_col], line, title=cell(title_col), tags=_split_tags(cell(tags_col), "|,"),
                date=cell(date_col) or None)


_PARSERS: dict[str, Callable[[str, _Collector], None]] = {
    "txt": _parse_txt,
    "html": _parse_html,
    "rss": _parse_feed,
    "atom": _parse_feed,
    "sitemap": _parse_sitemap,
    "netscape": _parse_netscape,
    "jsonl": _parse_jsonl,
    "json": _parse_json,
    "pinboard": _parse_pinboard,
    "pocket": _parse_csv,
    "csv": _parse_csv,
}
