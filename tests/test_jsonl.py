"""Reading a hook's stdout (waybox.engine.jsonl): pure and fast, no database, no processes.

Every problem must become a logged `Line` with its line number, never an exception: a hook's
stdout is untrusted (it may echo hostile page content).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waybox.engine.jsonl import MAX_LINE_BYTES, LineSplitter, looks_like_path, parse_line, unsafe_path_reason


def split(*chunks: bytes, max_bytes: int = MAX_LINE_BYTES) -> list:
    splitter = LineSplitter(max_bytes)
    lines = [line for chunk in chunks for line in splitter.feed(chunk)]
    return lines + list(splitter.close())


def summary(lines) -> list[tuple[int, object]]:
    return [(line.number, line.record if line.record is not None else line.problem) for line in lines]


# -- parse_line -------------------------------------------------------------------------------


def test_a_valid_record() -> None:
    line = parse_line(3, b'{"type": "Tag", "name": "x"}\r\n')
    assert line.number == 3 and line.record == {"type": "Tag", "name": "x"} and not line.problem


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"hello world", "not JSON"),
        (b'{"type": "Tag", ', "invalid JSON"),
        (b"\xff\xfe{}", "invalid UTF-8 at byte 0"),
        (b'{"type": "Tag", "name": "caf\xc3"}', "invalid UTF-8"),
        (b'{"type": "Bogus"}', "unknown record type 'Bogus'"),
        (b'{"name": "x"}', "'type'"),
        (b'{"type": 5}', "'type'"),
        (b"[1, 2, 3]", "not JSON"),
        (b'"a string"', "not JSON"),
    ],
)
def test_problems_are_reported_not_raised(raw: bytes, words: str) -> None:
    line = parse_line(7, raw)
    assert line.record is None and line.number == 7
    assert words in line.problem, line.problem


@pytest.mark.parametrize("raw", [b"", b"   ", b"\r", b"\t \r"])
def test_blank_lines_are_ignored(raw: bytes) -> None:
    assert parse_line(1, raw) is None


def test_deeply_nested_json_is_a_problem_not_a_crash() -> None:
    """json.loads raises RecursionError (not JSONDecodeError) on deep nesting; 1 MiB allows it."""
    raw = b'{"type": "Tag", "x": ' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_001
    assert len(raw) < MAX_LINE_BYTES
    line = parse_line(2, raw)
    assert line.record is None and "invalid JSON" in line.problem


def test_huge_integers_are_a_problem_not_a_crash() -> None:
    """Python refuses to convert integers of more than 4300 digits: a ValueError, not a
    JSONDecodeError."""
    line = parse_line(4, b'{"type": "Tag", "name": "x", "n": ' + b"9" * 5000 + b"}")
    assert line.record is None and "invalid JSON" in line.problem


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_standard_json_constants_are_rejected(constant: bytes) -> None:
    """NaN/Infinity are not JSON (RFC 8259) and PostgreSQL's jsonb refuses them."""
    line = parse_line(1, b'{"type": "ArchiveResult", "output_json": ' + constant + b"}")
    assert line.record is None and "invalid JSON" in line.problem


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_give_a_line_or_nothing(raw: bytes) -> None:
    line = parse_line(1, raw)
    assert line is None or (line.record is None) != (not line.problem)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=20))
def test_any_json_value_in_a_record_round_trips(value) -> None:
    raw = json.dumps({"type": "ArchiveResult", "output_json": value}).encode()
    assert parse_line(1, raw).record == {"type": "ArchiveResult", "output_json": value}


# -- LineSplitter -----------------------------------------------------------------------------


def test_lines_split_across_chunks_keep_their_numbers() -> None:
    lines = split(b'{"type": "Ta', b'g", "name": "a"}\nnot json\n\n{"type": "Tag", "name": "b"}')
    assert summary(lines) == [
        (1, {"type": "Tag", "name": "a"}),
        (2, "not JSON, ignored: 'not json'"),
        (4, {"type": "Tag", "name": "b"}),  # line 3 was blank; the last line had no newline
    ]


def test_one_byte_at_a_time() -> None:
    data = b'{"type": "Tag", "name": "a"}\nxx\n{"type": "Tag", "name": "b"}\n'
    lines = split(*(data[i : i + 1] for i in range(len(data))))
    assert [(n, r if isinstance(r, dict) else "problem") for n, r in summary(lines)] == [
        (1, {"type": "Tag", "name": "a"}), (2, "problem"), (3, {"type": "Tag", "name": "b"})]


def test_an_oversized_line_is_reported_once_and_the_next_lines_still_count() -> None:
    big = b"x" * 100
    first, last = b'{"type": "Tag", "name": "a"}\n', b'\n{"type": "Tag", "name": "b"}\n'
    lines = split(first + big[:30], big[30:70], big[70:] + last, max_bytes=40)
    assert summary(lines) == [
        (1, {"type": "Tag", "name": "a"}),
        (2, "line longer than 40 bytes, ignored"),
        (3, {"type": "Tag", "name": "b"}),
    ]


def test_an_oversized_line_in_one_chunk() -> None:
    lines = split(b"y" * 50 + b"\n" + b'{"type": "Tag", "name": "b"}\n', max_bytes=40)
    assert summary(lines) == [(1, "line longer than 40 bytes, ignored"), (2, {"type": "Tag", "name": "b"})]


def test_an_oversized_last_line_without_newline() -> None:
    lines = split(b'{"type": "Tag", "name": "a"}\n', b"z" * 45, b"z" * 45, max_bytes=40)
    assert summary(lines) == [(1, {"type": "Tag", "name": "a"}), (2, "line longer than 40 bytes, ignored")]


def test_a_line_of_exactly_the_cap_is_accepted() -> None:
    record = b'{"type": "Tag", "name": "' + b"n" * 10 + b'"}'
    lines = split(record + b"\n", max_bytes=len(record))
    assert summary(lines) == [(1, json.loads(record))]


def test_ten_megabytes_of_one_line_use_bounded_memory() -> None:
    splitter = LineSplitter()
    chunk = b"x" * 65536
    problems = []
    for _ in range(160):  # 10 MiB in the 64 KiB chunks the hook runner reads
        problems += list(splitter.feed(chunk))
        assert len(splitter.buffer) <= MAX_LINE_BYTES + len(chunk)
    problems += list(splitter.feed(b'\n{"type": "Tag", "name": "after"}\n'))
    assert summary(problems) == [(1, f"line longer than {MAX_LINE_BYTES} bytes, ignored"),
                                 (2, {"type": "Tag", "name": "after"})]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=60).filter(lambda b: b"\n" not in b), max_size=20), st.data())
def test_chunking_never_changes_the_result(lines: list[bytes], data) -> None:
    stream = b"\n".join(lines) + b"\n"
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert summary(split(*chunks, max_bytes=40)) == summary(split(stream, max_bytes=40))


# -- paths ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "../../etc/passwd", "a/../../b", "..", "~/x", "~root/.ssh", "x/../../..", "\0", "a\0b", ""],
)
def test_paths_leaving_the_folder_are_unsafe(path: str) -> None:
    assert unsafe_path_reason(path)


@pytest.mark.parametrize("path", ["index.html", "sub/page.html", "./x", "a/b/c.txt", "..hidden", "a..b/c"])
def test_paths_inside_the_folder_are_safe(path: str) -> None:
    assert unsafe_path_reason(path) is None


@pytest.mark.parametrize("value", [None, 5, ["a"], {"a": 1}])
def test_non_string_paths_are_unsafe(value) -> None:
    assert unsafe_path_reason(value) == "empty or not a string"


@pytest.mark.parametrize(("text", "expected"), [("404 Not Found", False), ("page.html", False),
                                                 ("sub/page.html", True), ("../x", True), ("~/x", True)])
def test_only_path_shaped_output_str_is_checked(text: str, expected: bool) -> None:
    assert looks_like_path(text) is expected
