"""The driver-side reader of question and query files: bounded lines, errors naming file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from lazygraph import jsonlines
from lazygraph.errors import InputError
from lazygraph.jsonlines import iter_json_objects, iter_lines
from lazygraph.serve.queries import BatchQuery, read_queries


def test_lines_are_numbered_and_stripped_of_their_breaks(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\n{"b": "caf\xef\xbf\xbd"}')
    assert list(iter_lines(path, 20)) == [(1, '{"a": 1}'), (2, ""), (3, '{"b": "caf\ufffd"}')]
    assert list(iter_json_objects(path)) == [(1, {"a": 1}), (3, {"b": "caf\ufffd"})]


def test_a_line_over_the_limit_is_refused_with_its_place(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "short"}\n{"question": "' + "x" * 100 + '"}\n')
    with pytest.raises(InputError, match=r"q.jsonl:2 is longer than 50 bytes"):
        list(iter_json_objects(path, max_line_bytes=50))
    assert len(list(iter_json_objects(path, max_line_bytes=120))) == 2
    exact = tmp_path / "exact.txt"
    exact.write_bytes(b"y" * 50 + b"\r\n" + b"z" * 50)  # at the limit, with and without a break
    assert [len(line) for _, line in iter_lines(exact, 50)] == [50, 50]


def test_undecodable_bytes_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_bytes(b'{"question": "ok"}\n{"question": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"q.jsonl:2 is not UTF-8 text"):
        list(iter_json_objects(path))


def test_batch_queries_files_are_read_with_the_limit(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(jsonlines, "MAX_LINE_BYTES", 40)
    path = tmp_path / "q.txt"
    path.write_text("first question\n\n" + "why " * 20 + "\n")
    with pytest.raises(InputError, match=r"q.txt:3 is longer than 40 bytes"):
        read_queries(path)
    path.write_text("first question\n\nthird line question\n")
    assert read_queries(path) == [BatchQuery("1", "first question"), BatchQuery("3", "third line question")]
    path.write_text('{"query_id": "a", "question": "   "}\n')
    with pytest.raises(InputError, match=r"q.txt:1 needs a query_id and a non-empty question"):
        read_queries(path)
