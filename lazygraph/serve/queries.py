"""Reading the queries file of `lazygraph batch`.

Two formats, told apart by the first non-blank line:
- JSON Lines: one ``{"query_id": ..., "question": ...}`` object a line (``id`` is accepted too);
- plain text: one question a line; the query id is the 1-based line number, so ids stay stable
  when the file is edited below a line or blank lines are present.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lazygraph.errors import InputError
from lazygraph.jsonlines import iter_json_objects


@dataclass(frozen=True)
class BatchQuery:
    query_id: str
    question: str


def read_queries(path: Path) -> list[BatchQuery]:
    """All queries of the file, in file order; raises InputError naming the bad line."""
    if not path.is_file():
        raise InputError(f"queries file {path} does not exist; pass a JSON Lines or text file to --queries")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"queries file {path} is not UTF-8 text: {exc}") from exc
    first = next((line.strip() for line in lines if line.strip()), "")
    queries = _read_json_lines(path) if first.startswith("{") else _read_text_lines(lines)
    if not queries:
        raise InputError(
            f"queries file {path} holds no questions; write one question a line, "
            "or JSON Lines with query_id and question"
        )
    _check_unique(path, queries)
    return queries


def _read_json_lines(path: Path) -> list[BatchQuery]:
    queries = []
    for number, record in iter_json_objects(path):
        query_id = record.get("query_id", record.get("id"))
        question = record.get("question")
        if query_id is None or not isinstance(question, str) or not question.strip():
            raise InputError(f"{path}:{number} needs a query_id and a non-empty question string")
        queries.append(BatchQuery(str(query_id), question.strip()))
    return queries


def _read_text_lines(lines: list[str]) -> list[BatchQuery]:
    return [
        BatchQuery(str(number), line.strip()) for number, line in enumerate(lines, start=1) if line.strip()
    ]


def _check_unique(path: Path, queries: list[BatchQuery]) -> None:
    seen: set[str] = set()
    for q in queries:
        if q.query_id in seen:
            raise InputError(f"query_id {q.query_id!r} appears more than once in {path}; ids must be unique")
        seen.add(q.query_id)
