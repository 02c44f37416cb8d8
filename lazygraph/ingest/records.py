"""Pure validation of input records: one JSON line or one file becomes a document or a rejection.

These functions run inside Spark tasks (no Spark imports here) and are unit-tested directly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from lazygraph.ingest.lines import Line

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


def parse_json_line(raw: bytes, line_index: int, max_bytes: int) -> Record | None:
    """A JSON Lines record from the line's raw bytes; None for a blank line (blank lines are not records).

    Only bytes that do not decode as UTF-8 make a line invalid: a U+FFFD character validly encoded
    (EF BF BD) is text like any other, which is why the reader hands over bytes, not decoded strings.
    """
    record = f"line {line_index + 1}"
    if not raw.strip():
        return None
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _reject(line_index, record, INVALID_UTF8, f"byte {exc.start}: {exc.reason}")
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


def parse_json_lines(lines: Iterable[Line], max_bytes: int, max_line_bytes: int) -> Iterator[Record]:
    """Records of the lines read by ``lines.read_lines``; a line over the limit is rejected unparsed."""
    for line in lines:
        if line.raw is None:
            yield _reject(
                line.number - 1,
                f"line {line.number}",
                TOO_LARGE,
                f"line of {line.size} bytes > chunking.max_line_bytes={max_line_bytes}; not read",
            )
            continue
        parsed = parse_json_line(line.raw, line.number - 1, max_bytes)
        if parsed is not None:
            yield parsed


def parse_text_file(
    relative_path: str, content: bytes | None, max_bytes: int, size: int | None = None
) -> Record:
    """A .txt/.md file: title is the file stem, doc_id the path relative to the input folder.

    ``content`` is None for a file the reader left unread because its ``size`` is over the limit.
    """
    name = relative_path.rsplit("/", 1)[-1]
    if not name.lower().endswith(TEXT_SUFFIXES):
        return _reject(0, relative_path, NOT_TEXT_FILE, "only .txt and .md files are read")
    if size is None:
        size = len(content) if content is not None else 0
    if content is None or size > max_bytes:
        return _reject(
            0,
            relative_path,
            TOO_LARGE,
            f"{size} bytes > chunking.max_document_bytes={max_bytes}",
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
