"""The real Spark readers on raw bytes: U+FFFD is text, undecodable bytes are not, long input is bounded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lazygraph.ingest import lines
from lazygraph.ingest.readers import read_input

pytestmark = pytest.mark.e2e


def _doc(doc_id: str, text: str) -> bytes:
    return json.dumps({"doc_id": doc_id, "title": doc_id.title(), "text": text}, ensure_ascii=False).encode()


def _limited(settings, **chunking):
    return settings.model_copy(update={"chunking": settings.chunking.model_copy(update=chunking)})


def _read(spark, settings, path: Path) -> tuple[dict[str, str], dict[str, tuple[str, str, str]]]:
    """doc_id -> text of the documents, record -> (reason, doc_id, detail) of the rejections."""
    result = read_input(spark, settings, str(path), "run-1")
    docs = {r["doc_id"]: r["text"] for r in result.documents.collect()}
    rejected = {r["record"]: (r["reason"], r["doc_id"], r["detail"]) for r in result.rejected.collect()}
    result.unpersist()
    return docs, rejected


@pytest.mark.parametrize("range_bytes", [lines.MIN_SPLIT_BYTES, 64])
def test_json_lines_keep_replacement_characters_and_bound_line_length(
    tmp_path: Path, settings, spark, monkeypatch, range_bytes: int
) -> None:
    monkeypatch.setattr(lines, "MIN_SPLIT_BYTES", range_bytes)  # 64: many ranges, split mid-line
    huge = _doc("huge", "word " * 200)  # a line over the 300-byte limit
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(
        b"\n".join(
            [
                lines.BOM + _doc("fffd", "The sign \ufffd marks a replaced character."),
                json.dumps({"doc_id": "escaped", "text": "Escaped \ufffd too."}).encode(),
                b'{"doc_id": "bad", "text": "broken \xff\xfe bytes"}',
                huge,
                _doc("after", "The line after the long one."),
                b"",
                _doc("last", "No line break at the end."),
            ]
        )
    )
    docs, rejected = _read(spark, _limited(settings, max_line_bytes=300), corpus)
    assert docs == {
        "fffd": "The sign \ufffd marks a replaced character.",
        "escaped": "Escaped \ufffd too.",
        "after": "The line after the long one.",
        "last": "No line break at the end.",
    }
    assert set(rejected) == {"line 3", "line 4"}
    assert rejected["line 3"][0] == "invalid_utf8"
    reason, doc_id, detail = rejected["line 4"]
    assert (reason, doc_id) == ("too_large", None)
    assert detail.startswith(f"line of {len(huge)} bytes > chunking.max_line_bytes=300")


def test_folders_keep_replacement_characters_and_leave_big_files_unread(
    tmp_path: Path, settings, spark
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "fffd.txt").write_bytes("A real \ufffd in a text file.".encode())
    (folder / "bad.md").write_bytes(b"broken \xff\xfe bytes")
    (folder / "big.txt").write_bytes(b"x" * 5000)
    docs, rejected = _read(spark, _limited(settings, max_document_bytes=1000), folder)
    assert docs == {"fffd.txt": "A real \ufffd in a text file."}
    assert rejected["bad.md"][0] == "invalid_utf8"
    assert rejected["big.txt"] == ("too_large", "big.txt", "5000 bytes > chunking.max_document_bytes=1000")
