"""Files in the JSON formats of Microsoft's benchmark-qed, so its AutoE and AutoQ tools can read what
lazygraph produces (and lazygraph can read AutoQ's questions).

- AutoE pairwise scoring reads one folder per condition holding one JSON file per question set,
  ``<condition>/<question_set>.json``: a JSON array of ``{"question_id", "question_text", "answer"}``;
  conditions are paired by ``question_id``.
- AutoE retrieval scoring reads a JSON array of ``{"question_id", "question_text", "context": [...]}``,
  each context item ``{"chunk_id", "text"}`` (set ``context_id_key: chunk_id`` and ``context_text_key:
  text`` in its configuration).
- AutoQ writes ``<kind>_questions/selected_questions.json``: a JSON array of ``{"id", "text",
  "question_type", "references", "attributes"}`` with ``question_type`` ``data_local`` or
  ``data_global``, and ``selected_questions_text.json``, the question texts alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from lazygraph.errors import InputError

# lazygraph's question types and AutoQ's question classes, both ways.
QED_TYPES = {"local": "data_local", "global": "data_global"}
_FROM_QED = {
    "data_local": "local",
    "activity_local": "local",
    "data_entity": "local",
    "data_global": "global",
    "activity_global": "global",
}


def _write_json(path: Path, data: Any) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False))
    return path


def safe_name(name: str) -> str:
    """A condition or question-set name usable as a folder or file name."""
    cleaned = "".join(c if c.isalnum() or c in "-_." else "_" for c in name).strip("._")
    return cleaned or "condition"


def write_answers(
    qed_dir: Path, condition: str, question_set: str, answers: Iterable[dict[str, Any]]
) -> Path:
    """``<qed_dir>/<condition>/<question_set>.json`` from rows with question_id, question and answer."""
    records = [
        {"question_id": str(a["question_id"]), "question_text": a["question"], "answer": a["answer"]}
        for a in answers
    ]
    return _write_json(Path(qed_dir) / safe_name(condition) / f"{safe_name(question_set)}.json", records)


def write_contexts(
    qed_dir: Path, condition: str, question_set: str, contexts: Iterable[dict[str, Any]]
) -> Path:
    """``<qed_dir>/<condition>/<question_set>_retrieval_results.json`` from rows with question_id,
    question and context (a list of ``{"chunk_id", "text"}``)."""
    records = [
        {
            "question_id": str(c["question_id"]),
            "question_text": c["question"],
            "context": [{"chunk_id": str(i["chunk_id"]), "text": i["text"]} for i in c["context"]],
        }
        for c in contexts
    ]
    name = f"{safe_name(question_set)}_retrieval_results.json"
    return _write_json(Path(qed_dir) / safe_name(condition) / name, records)


def write_questions(qed_dir: Path, questions: Sequence[dict[str, Any]]) -> list[Path]:
    """AutoQ's layout: ``data_local_questions/`` and ``data_global_questions/``, each with
    ``selected_questions.json`` and ``selected_questions_text.json``."""
    written = []
    for kind, qed_type in QED_TYPES.items():
        chosen = [q for q in questions if q.get("type") == kind]
        if not chosen:
            continue
        folder = Path(qed_dir) / f"{qed_type}_questions"
        records = [_autoq_record(q, qed_type) for q in chosen]
        written.append(_write_json(folder / "selected_questions.json", records))
        written.append(_write_json(folder / "selected_questions_text.json", [q["question"] for q in chosen]))
    return written


def _autoq_record(question: dict[str, Any], qed_type: str) -> dict[str, Any]:
    attributes = {
        key: question[key]
        for key in ("answer", "source_chunk_ids", "source_doc_ids", "community_id")
        if key in question
    }
    return {
        "id": str(question["question_id"]),
        "text": question["question"],
        "question_type": qed_type,
        "references": list(question.get("references", [])),
        "attributes": attributes,
    }


def read_json_array(path: Path, what: str) -> list[Any]:
    """A JSON file holding an array (benchmark-qed's files); InputError says what was expected."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{what} file {path} does not exist or is not a file")
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(
            f"{path} is not a JSON file ({exc}); pass a JSON array or a JSON Lines file"
        ) from exc
    if not isinstance(data, list):
        raise InputError(f"{path} must hold a JSON array of {what} records")
    return data


def read_questions(path: Path) -> list[dict[str, Any]]:
    """AutoQ's questions (``selected_questions.json``, or a plain list of question texts) as lazygraph
    question rows: question_id, question, type, and whatever the attributes carried."""
    rows = []
    for number, item in enumerate(read_json_array(path, "questions"), start=1):
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, dict):
            raise InputError(f"{path}: item {number} must be an object or a question text")
        text = item.get("text", item.get("question_text", item.get("question")))
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{path}: item {number} has no question text (the field text)")
        row: dict[str, Any] = {
            "question_id": str(item.get("id", item.get("question_id", f"q{number}"))),
            "question": text.strip(),
        }
        kind = _FROM_QED.get(str(item.get("question_type", "")), item.get("type"))
        if kind:
            row["type"] = kind
        attributes = item.get("attributes") or {}
        row.update(
            {k: v for k, v in attributes.items() if k in ("answer", "source_chunk_ids", "source_doc_ids")}
        )
        rows.append(row)
    return rows


def read_answers(path: Path) -> list[dict[str, Any]]:
    """An AutoE answers file as rows of question_id, question and answer."""
    rows = []
    for number, item in enumerate(read_json_array(path, "answers"), start=1):
        if not isinstance(item, dict):
            raise InputError(
                f"{path}: item {number} must be an object with question_id, question_text, answer"
            )
        question = item.get("question_text", item.get("question"))
        rows.append({**item, "question": question, "question_id": item.get("question_id", f"q{number}")})
    return rows
