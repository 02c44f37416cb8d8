"""Reading the queries file of `lazygraph batch`.

Two formats, told apart by the first non-blank line:
- JSON Lines: one ``{"query_id": ..., "question": ...}`` object a line (``id`` is accepted too);
- plain text: one question a line; the query id is the 1-based line number, so ids stay stable
  when the file is edited below a line or blank lines are present.

An empty question is never sent to the engine: a blank text line is not a query, and a JSON line with
an empty question refuses the file, naming the line. A question too long for the model's window is
refused by the engine, which makes it that query's error row.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lazygraph.errors import InputError
from lazygraph.jsonlines import iter_json_objects, iter_lines


@dataclass(frozen=True)
class BatchQuery:
    query_id: str
    question: str


def read_queries(path: Path) -> list[BatchQuery]:
    """All queries of the file, in file order; raises InputError naming the bad line."""
    if not path.is_file():
        raise InputError(f"queries file {path} does not exist; pass a JSON Lines or text file to --queries")
    lines = list(iter_lines(path))  # each line bounded: one huge line is refused, not loaded
    first = next((line.strip() for _, line in lines if line.strip()), "")
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


def _read_text_lines(lines: list[tuple[int, str]]) -> list[BatchQuery]:
    """Blank lines are not queries (and keep their number, so that ids stay put)."""
    return [BatchQuery(str(number), line.strip()) for number, line in lines if line.strip()]


def _check_unique(path: Path, queries: list[BatchQuery]) -> None:
    seen: set[str] = set()
    for q in queries:
        if q.query_id in seen:
            raise InputError(f"query_id {q.query_id!r} appears more than once in {path}; ids must be unique")
        seen.add(q.query_id)
