"""waybox.parsers: format detection, every import format, broken input on purpose, and a fuzz
test that nothing but ParseError ever comes out."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from waybox import parsers
from waybox.parsers import Link, ParseError, Skipped, parse, parse_file
from waybox.urlinput import normalize_url

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SITE = FIXTURES / "site"
BROKEN = FIXTURES / "parsers"


# -- every format ----------------------------------------------------------------------------


@pytest.mark.parametrize("name, fmt", [
    ("feed.rss", "rss"), ("feed.atom", "atom"), ("bookmarks.html", "netscape"), ("links.jsonl", "jsonl"),
    ("pinboard.json", "pinboard"), ("pocket.csv", "pocket"), ("links.txt", "txt"), ("links.html", "html"),
    ("index.html", "html"),
])
def test_detect_format(name: str, fmt: str) -> None:
    data = (SITE / name).read_bytes()
    assert parsers.detect_format(data) == fmt
    assert parse(data).format == fmt


def test_rss() -> None:
    result = parse_file(SITE / "feed.rss")
    assert result.links == [
        Link("https://example.com/posts/1", "First post & more", ("news", "tech"), "2003-06-10T04:00:00+00:00", 7),
        Link("https://example.com/posts/2?ref=rss", "Second <b>post</b>", (), "2024-02-03T04:05:06+00:00", 14),
        Link("https://example.com/posts/3", "Only a guid here", (), None, 20),
    ]
    assert result.skipped == []


def test_atom() -> None:
    result = parse_file(SITE / "feed.atom")
    assert [(link.url, link.title, link.tags, link.bookmarked_at) for link in result.links] == [
        ("https://example.org/blog/one", "Atom entry one", ("atom", "fixtures"), "2024-04-30T08:00:00+00:00"),
        ("https://example.org/blog/two", "Atom entry <two>", (), "2024-05-02T08:30:00+00:00"),
    ]


def test_rss_1_0_rdf_and_relative_atom_links() -> None:
    rdf = """<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"
         xmlns:dc="http://purl.org/dc/elements/1.1/">
  <channel rdf:about="https://example.com/"><title>x</title></channel>
  <item rdf:about="https://example.com/rdf/1"><title>One</title><dc:subject>rdf</dc:subject></item>
  <item rdf:about="https://example.com/rdf/2"><link>https://example.com/rdf/2b</link></item>
</rdf:RDF>"""
    result = parse(rdf)
    assert result.format == "rss"
    assert result.urls == ["https://example.com/rdf/1", "https://example.com/rdf/2b"]
    assert result.links[0].tags == ("rdf",)
    atom = '<feed xmlns="http://www.w3.org/2005/Atom"><entry><link href="/post/9"/></entry></feed>'
    assert parse(atom, base_url="https://example.org/feed.xml").urls == ["https://example.org/post/9"]
    assert parse(atom).skipped[0].reason == "relative link and no page URL to resolve it against"


def test_netscape_bookmarks_keep_tags_and_dates() -> None:
    result = parse_file(SITE / "bookmarks.html")
    assert [link.record() for link in result.links] == [
        {"type": "Snapshot", "url": "https://example.net/article", "title": "An article",
         "tags": ["reading", "longform"], "bookmarked_at": "2023-11-14T22:13:21+00:00"},
        {"type": "Snapshot", "url": "https://example.net/tool#usage", "title": "A tool & its docs", "tags": ["tools"],
         "bookmarked_at": "2020-09-13T12:26:40+00:00"},  # ADD_DATE in milliseconds
        {"type": "Snapshot", "url": "https://example.net/plain", "title": "No tags or date"},
    ]


def test_pocket_html_export_is_read_as_html_with_attributes() -> None:
    pocket = """<!DOCTYPE html><html><head><title>Pocket Export</title></head><body><h1>Unread</h1><ul>
<li><a href="https://example.com/p/1" time_added="1700000000" tags="x,y">Pocket item</a></li></ul></body></html>"""
    result = parse(pocket)
    assert result.links == [Link("https://example.com/p/1", "Pocket item", ("x", "y"), "2023-11-14T22:13:20+00:00", 2)]


def test_jsonl_pinboard_pocket_and_json() -> None:
    assert parse_file(SITE / "links.jsonl").links == [
        Link("https://example.com/jsonl/1", "JSONL one", ("a", "b"), "2024-01-01T00:00:00+00:00", 1),
        Link("https://example.com/jsonl/2", "", ("c", "d"), None, 2),
        Link("https://example.com/jsonl/3", "", (), "2023-11-14T22:13:20+00:00", 4),
    ]
    assert parse_file(SITE / "pinboard.json").links == [
        Link("https://example.com/pin/1", "Pinned one", ("python", "web"), "2014-03-18T10:44:28+00:00", 1),
        Link("https://example.com/pin/2", "Pinned two", (), "2015-01-02T03:04:05+00:00", 2),
    ]
    assert parse_file(SITE / "pocket.csv").links == [
        Link("https://example.com/pocket/1", "Pocket one", ("news", "later"), "2023-11-14T22:13:20+00:00", 2),
        Link("https://example.com/pocket/2", "Pocket, two", (), "2020-09-13T12:26:40+00:00", 3),
    ]
    exported = json.dumps({"links": [{"url": "https://example.com/j/1", "title": "J"}, "https://example.com/j/2"]},
                          indent=2)
    assert parse(exported).urls == ["https://example.com/j/1", "https://example.com/j/2"]
    assert parse('["https://example.com/a", {"link": "https://example.com/b"}]').urls == [
        "https://example.com/a", "https://example.com/b"]


def test_csv_with_url_column_and_semicolons() -> None:
    result = parse("name;URL;tags\nOne;https://example.com/c/1;a|b\nTwo;;\n")
    assert result.format == "csv"
    assert result.links == [Link("https://example.com/c/1", "One", ("a", "b"), None, 2)]
    assert [(s.line, s.reason) for s in result.skipped] == [(3, "no URL")]


def test_sitemap() -> None:
    sitemap = """<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>https://example.com/s/1</loc><lastmod>2024-01-02</lastmod></url>
  <url><loc>https://example.com/s/2</loc></url>
</urlset>"""
    result = parse(sitemap)
    assert result.format == "sitemap"
    assert result.urls == ["https://example.com/s/1", "https://example.com/s/2"]
    assert result.links[0].bookmarked_at == "2024-01-02T00:00:00+00:00"


def test_html_links_resolve_against_the_page_and_leave_out_the_page_itself() -> None:
    result = parse_file(SITE / "links.html", base_url="http://127.0.0.1:8000/links.html")
    assert result.urls == ["http://127.0.0.1:8000/page2.html", "http://127.0.0.1:8000/index.html",
                           "https://example.com/external?q=1"]
    assert [(s.line, s.text) for s in result.skipped] == [(9, "mailto:someone@example.com"),
                                                         (10, "javascript:void(0)")]
    based = '<html><head><base href="https://cdn.example.com/docs/"></head><a href="a.html">a</a></html>'
    assert parse(based, base_url="https://example.com/").urls == ["https://cdn.example.com/docs/a.html"]


def test_html_without_base_url_reports_relative_links() -> None:
    result = parse('<html><a href="/relative">r</a><a href="https://example.com/abs">a</a></html>')
    assert result.urls == ["https://example.com/abs"]
    assert result.skipped == [Skipped(1, "/relative", "relative link and no page URL to resolve it against")]


def test_plain_text_reports_each_line_it_skips() -> None:
    text = "# comment\nhttps://example.com/1\nexample.com/no-scheme\n\nfoo bar\nftp://files.example.com/x\n" \
           "https://example.com/1\nread <https://example.com/2>.\n"
    result = parse(text)
    assert result.format == "txt"
    assert result.urls == ["https://example.com/1", "ftp://files.example.com/x", "https://example.com/2"]
    assert [(s.line, s.text) for s in result.skipped] == [(3, "example.com/no-scheme"), (5, "foo bar"),
                                                         (7, "https://example.com/1")]
    assert "no scheme" in result.skipped[0].reason
    assert result.skipped[2].reason == "duplicate of line 2"


def test_text_that_starts_like_json_is_still_text() -> None:
    result = parse("{notes} see https://example.com/n1\nhttps://example.com/n2\n")
    assert result.format == "txt"
    assert result.urls == ["https://example.com/n1", "https://example.com/n2"]
    broken_first = parse('{"url": "https://example.com/b1",\n{"url": "https://example.com/b2"}\n')
    assert broken_first.format == "jsonl" and broken_first.urls == ["https://example.com/b2"]


def test_bytes_decoding() -> None:
    latin = '<?xml version="1.0" encoding="ISO-8859-1"?><rss><channel><item><title>Caf\xe9</title>' \
            "<link>https://example.com/cafe</link></item></channel></rss>"
    assert parse(latin.encode("latin-1")).links[0].title == "Café"
    utf16 = codecs.BOM_UTF16_LE + "https://example.com/utf16\n".encode("utf-16-le")
    assert parse(utf16).urls == ["https://example.com/utf16"]
    assert parse(codecs.BOM_UTF8 + b"https://example.com/bom\n").urls == ["https://example.com/bom"]


# -- broken input, on purpose ----------------------------------------------------------------


def test_truncated_feed_keeps_the_items_before_the_cut() -> None:
    result = parse_file(BROKEN / "truncated.rss")
    assert result.format == "rss"
    assert result.urls == ["https://example.com/posts/1", "https://example.com/posts/2?ref=rss"]
    [cut] = result.skipped
    assert cut.line == 18 and "not well-formed XML" in cut.reason and "cut off" in cut.reason


def test_truncated_feed_mid_link_drops_the_unfinished_item() -> None:
    text = (SITE / "feed.rss").read_text()
    cut = text[: text.index("https://example.com/posts/2") + 10]
    result = parse(cut)
    assert result.urls == ["https://example.com/posts/1"]
    assert result.skipped[0].line == cut.count("\n") + 1


def test_bookmarks_with_bad_lines_import_the_rest() -> None:
    result = parse_file(BROKEN / "bad_bookmarks.html")
    assert result.format == "netscape"
    assert result.urls == ["https://example.net/good-1", "https://example.net/good-2", "https://example.net/good-3"]
    assert result.links[1].bookmarked_at is None  # ADD_DATE="not-a-date": kept, without a date
    assert [(s.line, s.reason.split(" (")[0]) for s in result.skipped] == [
        (7, "unsupported scheme 'javascript'"),
        (8, "contains whitespace or control characters"),
        (9, "bookmark without an HREF"),
        (11, "duplicate of line 6"),
    ]


def test_broken_jsonl_lines_are_skipped_with_line_numbers() -> None:
    result = parse_file(BROKEN / "broken.jsonl")
    assert result.urls == ["https://example.com/a", "https://example.com/c"]
    assert result.links[1].tags == ("x", "y")
    assert [(s.line, s.reason.split(" (")[0]) for s in result.skipped] == [
        (2, "not valid JSON"), (3, "not valid JSON"), (4, "no url, href or link field"),
        (5, "not a JSON object with a url"),
    ]


def test_truncated_pinboard_export_yields_what_it_can() -> None:
    result = parse_file(BROKEN / "truncated_pinboard.json")
    assert result.format == "pinboard"
    assert result.urls == ["https://example.com/pin/1"]
    assert result.skipped[0].line == 2 and "the rest is not read" in result.skipped[0].reason


@pytest.mark.parametrize("name, message", [
    ("empty.txt", "empty"), ("blank.txt", "empty"), ("garbage.bin", "binary"),
])
def test_unreadable_files_raise_parse_error(name: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_file(BROKEN / name)


def test_text_without_any_url_says_no_parser_understands_it() -> None:
    with pytest.raises(ParseError, match="no parser understands") as caught:
        parse("just some words\nand more words\n")
    assert [s.line for s in caught.value.skipped] == [1, 2]
    with pytest.raises(ParseError, match="no parser understands"):
        parse("<foo>bar</foo>")


def test_forced_format_that_does_not_fit_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="not an RSS or Atom feed"):
        parse((SITE / "index.html").read_text(), format="rss")
    with pytest.raises(ValueError, match="unknown format"):
        parse("https://example.com/", format="docx")


def test_entity_declarations_are_refused() -> None:
    bomb = ('<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
            "<rss><channel><item><title>&b;</title><link>https://example.com/x</link></item></channel></rss>")
    with pytest.raises(ParseError, match="declares XML entities; refused"):
        parse(bomb)


def test_html_parser_quirks_do_not_escape() -> None:
    result = parse('<html><a href="https://example.com/1">1</a><![weird[ x ]]><a href="https://example.com/2">2</a>')
    assert result.urls == ["https://example.com/1", "https://example.com/2"]


@pytest.mark.parametrize("value, expected", [
    (1700000000, "2023-11-14T22:13:20+00:00"),
    ("1700000000000", "2023-11-14T22:13:20+00:00"),
    ("1700000000000000", "2023-11-14T22:13:20+00:00"),
    ("2024-01-02T03:04:05Z", "2024-01-02T03:04:05+00:00"),
    ("2024-01-02T05:04:05+02:00", "2024-01-02T03:04:05+00:00"),
    ("Tue, 10 Jun 2003 04:00:00 GMT", "2003-06-10T04:00:00+00:00"),
    ("yesterday", None), ("", None), (None, None), (True, None), (0, None), (-5, None),
    (float("inf"), None), (float("nan"), None), (10**400, None), ("9" * 17, None), ("0001-01-01", None),
])
def test_parse_date(value: object, expected: str | None) -> None:
    assert parsers.parse_date(value) == expected


# -- fuzzing ---------------------------------------------------------------------------------

PIECES = st.sampled_from([
    "<rss>", "<channel>", "<item>", "<link>", "</link>", "</item>", "<feed>", "<entry>", '<link href="/x"/>',
    "<title>", "</title>", "<![CDATA[", "]]>", "<!DOCTYPE NETSCAPE-Bookmark-file-1>", '<DT><A HREF="', '" ADD_DATE="',
    '" TAGS="', '">', "</A>", "<a href='", "<![x[", "<base href='", "<urlset>", "<loc>", "&nbsp;", "&#0;",
    "<!ENTITY a 'b'>", "http://a.b/c", "https://example.com/p?q=1#f", "ftp://x", "javascript:x", "//host/p",
    "{", "}", "[", "]", '"url":', '"href":', '"hash":', '"time":', '"tags":', '"', ",", ":", "\n", "\r", "\t", " ",
    "1e400", "99999999999999999", "-1", "null", "title,url,time_added,tags\n", "\x00", "\ufeff", "é", "\u2028",
])


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    data=st.one_of(st.text(), st.binary(), st.lists(PIECES, max_size=60).map("".join),
                   st.lists(PIECES, max_size=60).map(lambda parts: "".join(parts).encode("utf-8", "surrogatepass"))),
    fmt=st.sampled_from([None, *parsers.FORMATS]),
    base_url=st.sampled_from([None, "http://example.com/dir/page.html", "not a url"]),
)
def test_fuzz_only_parse_error_escapes(data: str | bytes, fmt: str | None, base_url: str | None) -> None:
    try:
        result = parse(data, format=fmt, base_url=base_url)
    except ParseError as err:
        assert str(err)
        return
    urls = result.urls
    assert len(urls) == len(set(urls))
    for link in result.links:
        assert normalize_url(link.url) == link.url
        json.dumps(link.record())
    for skipped in result.skipped:
        assert skipped.reason and skipped.line >= 0
