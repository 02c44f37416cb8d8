"""Pure validation of input records: one JSON line or one file becomes a document or a rejection.

These functions run inside Spark tasks (no Spark imports here) and are unit-tested directly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import NamedTuple

TEXT_SUFFIXES = (".txt", ".md")

# Reasons recorded in the rejected table.
EMPTY_TEXT = "empty_text"
DUPLICATE_ID = "duplicate_id"
INVALID_UTF8 = "invalid_utf8"
MALFORMED_JSON = "malformed_json"
MISSING_FIELD = "missing_field"
NOT_TEXT_FILE = "not_text_file"
TOO_LARGE = "too_large"
REASONS = (EMPTY_TEXT, DUPLICATE_ID, INVALID_UTF8, MALFORMED_JSON, MISSING_FIELD, NOT_TEXT_FILE, TOO_LARGE)

# Spark schema of a parsed record (reason is null for a valid document).
RECORD_SCHEMA = (
    "seq long, record string, doc_id string, title string, text string, reason string, detail string"
)


class Record(NamedTuple):
    seq: int  # position in the input, so "keep the first" of duplicate ids is well defined
    record: str  # "line N" or the file's relative path
    doc_id: str | None
    title: str | None
    text: str | None
    reason: str | None
    detail: str | None


def _reject(seq: int, record: str, reason: str, detail: str, doc_id: str | None = None) -> Record:
    return Record(seq, record, doc_id, None, None, reason, detail)


def _as_id(value: object) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str | int):
        text = str(value).strip()
        return text or None
    return None


def parse_json_line(raw: bytes | str, line_index: int, max_bytes: int) -> Record | None:
    """A JSON Lines record; None for a blank line (blank lines are not records).

    ``raw`` is the line's bytes, or the line as decoded by Spark's text reader, which replaces
    invalid UTF-8 with U+FFFD: a replacement character is therefore taken as invalid input.
    """
    record = f"line {line_index + 1}"
    if not raw.strip():
        return None
    if isinstance(raw, bytes):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return _reject(line_index, record, INVALID_UTF8, f"byte {exc.start}: {exc.reason}")
    else:
        line = raw
    if "\ufffd" in line:
        return _reject(
            line_index, record, INVALID_UTF8, f"undecodable bytes at character {line.index(chr(0xFFFD))}"
        )
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return _reject(line_index, record, MALFORMED_JSON, f"{exc.msg} at column {exc.colno}")
    if not isinstance(obj, dict):
        return _reject(line_index, record, MALFORMED_JSON, f"expected an object, got {type(obj).__name__}")
    doc_id = _as_id(obj.get("doc_id"))
    if doc_id is None:
        return _reject(line_index, record, MISSING_FIELD, "doc_id is missing or not a string/integer")
    text = obj.get("text")
    if not isinstance(text, str):
        return _reject(line_index, record, MISSING_FIELD, "text is missing or not a string", doc_id)
    title = obj.get("title")
    title = title.strip() if isinstance(title, str) and title.strip() else doc_id
    return _document(line_index, record, doc_id, title, text, max_bytes)


def _document(seq: int, record: str, doc_id: str, title: str, text: str, max_bytes: int) -> Record:
    if not text.strip():
        return _reject(seq, record, EMPTY_TEXT, "text is empty or whitespace only", doc_id)
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        return _reject(
            seq, record, TOO_LARGE, f"{size} bytes > chunking.max_document_bytes={max_bytes}", doc_id
        )
    return Record(seq, record, doc_id, title, text, None, None)


def parse_json_lines(lines: Iterable[tuple[bytes | str, int]], max_bytes: int) -> Iterator[Record]:
    for raw, index in lines:
        parsed = parse_json_line(raw, index, max_bytes)
        if parsed is not None:
            yield parsed


def parse_text_file(relative_path: str, content: bytes, max_bytes: int) -> Record:
    """A .txt/.md file: title is the file stem, doc_id the path relative to the input folder."""
    name = relative_path.rsplit("/", 1)[-1]
    if not name.lower().endswith(TEXT_SUFFIXES):
        return _reject(0, relative_path, NOT_TEXT_FILE, "only .txt and .md files are read")
    if len(content) > max_bytes:
        return _reject(
            0,
            relative_path,
            TOO_LARGE,
            f"{len(content)} bytes > chunking.max_document_bytes={max_bytes}",
            relative_path,
        )
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return _reject(0, relative_path, INVALID_UTF8, f"byte {exc.start}: {exc.reason}", relative_path)
    if "\x00" in text:
        return _reject(0, relative_path, NOT_TEXT_FILE, "contains NUL bytes (binary content)", relative_path)
    stem = name.rsplit(".", 1)[0]
    return _document(0, relative_path, relative_path, stem, text, max_bytes)
