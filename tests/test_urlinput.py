"""waybox.urlinput as pure functions: which lines are URLs, how they are normalised, and the
reason a user is given for each line that is not one."""

from __future__ import annotations

import pytest

from waybox.urlinput import InvalidURL, Rejected, normalize_url, parse_url_lines, split_valid


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://example.com", "https://example.com/"),
        ("  HTTP://EXAMPLE.COM/Path?Q=1#Frag  ", "http://example.com/Path?Q=1#Frag"),
        ("http://User:PassWord@Host.Example.com:8080/a", "http://User:PassWord@host.example.com:8080/a"),
        ("http://x.com?q=1", "http://x.com/?q=1"),
        ("ftp://files.example.org/pub/", "ftp://files.example.org/pub/"),
        ("http://[::1]:8000/", "http://[::1]:8000/"),
        ("http://127.0.0.1:8000/a", "http://127.0.0.1:8000/a"),
        ("https://例え.jp/", "https://例え.jp/"),
    ],
)
def test_valid_urls_are_normalised(text: str, expected: str) -> None:
    assert normalize_url(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("notaurl", "no scheme"),
        ("example.com", "e.g. https://example.com"),
        ("localhost:8000/page", "e.g. https://localhost:8000/page"),
        ("javascript:alert(1)", "unsupported scheme 'javascript'"),
        ("mailto:someone@example.com", "unsupported scheme 'mailto'"),
        ("file:///etc/passwd", "unsupported scheme 'file'"),
        ("http://", "no host"),
        ("http:/example.com", "no host"),
        ("http://exa mple.com/", "whitespace"),
        ("http://example.com/\x00", "control characters"),
        ("http://a..b/", "invalid host name"),
        ("http://example.com:99999/", "out of range"),
        ("http://example.com:abc/", "Port"),
        ("http://example.com/" + "a" * 5000, "longer than"),
    ],
)
def test_invalid_urls_say_why(text: str, reason: str) -> None:
    with pytest.raises(InvalidURL) as err:
        normalize_url(text)
    assert reason in str(err.value)


def test_no_scheme_hint_only_for_host_looking_text() -> None:
    """A suggestion like `e.g. https://[/x]` would be nonsense; only host names get one."""
    for text in ("[/x]", "justwords"):
        with pytest.raises(InvalidURL) as err:
            normalize_url(text)
        assert "e.g." not in str(err.value)


def test_lines_skip_blanks_and_comments_and_number_rejects() -> None:
    lines = ["# my bookmarks", "", "https://a.example/", "   ", "not a url", "https://b.example/x"]
    items = list(parse_url_lines(lines, "list.txt"))
    assert items[0] == "https://a.example/"
    assert items[1] == Rejected("list.txt:5", "not a url", "contains whitespace or control characters")
    assert items[2] == "https://b.example/x"


def test_split_valid_keeps_first_seen_order_without_repeats() -> None:
    items = list(parse_url_lines(["https://b.example/", "HTTPS://B.EXAMPLE", "https://a.example/", "bad"], "x"))
    valid, rejected = split_valid(items)
    assert valid == ["https://b.example/", "https://a.example/"]
    assert [r.text for r in rejected] == ["bad"]
