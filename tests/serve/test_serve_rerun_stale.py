"""A standing batch answers again what an older version of the index answered: the version each row was
answered by, which queries are done, and rows replaced in one commit so the table keeps one per query."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from lazygraph.manifest import index_version
from lazygraph.serve.batch import plan_work
from lazygraph.serve.queries import BatchQuery
from lazygraph.serve.results import ResultWriter, result_row
from lazygraph.tables.results import Answered, read_answered, results_uri

QUERIES = [BatchQuery(str(i), f"question {i}") for i in range(4)]


def _run(tables: dict[str, int], index_id: str = "first-run") -> dict:
    facts = {name: [version, 10] for name, version in tables.items()}
    return {"run_id": "r", "versions_json": json.dumps({"tables": facts, "index_id": index_id})}


def test_the_index_version_changes_with_any_table_and_only_then() -> None:
    base = index_version(_run({"chunks": 3, "edges": 5}))
    assert base == index_version(_run({"edges": 5, "chunks": 3})), "a run that changed nothing keeps it"
    assert base != index_version(_run({"chunks": 4, "edges": 5}))
    assert base != index_version(_run({"chunks": 3, "edges": 5}, index_id="rebuilt"))


def test_done_means_ok_by_the_current_version() -> None:
    answered = {
        "0": Answered("ok", "iv-new"),
        "1": Answered("ok", "iv-old"),
        "2": Answered("error", "iv-new"),
        "3": Answered("ok", None),  # a table written before versions were recorded
    }
    todo, stale = plan_work(QUERIES, answered, "iv-new", rerun_stale=True)
    assert [q.query_id for q in todo] == ["1", "2", "3"] and [q.query_id for q in stale] == ["1", "3"]
    todo, stale = plan_work(QUERIES, answered, "iv-new", rerun_stale=False)
    assert [q.query_id for q in todo] == ["2"] and not stale
    todo, _ = plan_work(QUERIES, {}, "iv-new", rerun_stale=True)
    assert len(todo) == 4


def test_new_answers_replace_old_rows_in_one_commit(tmp_path: Path) -> None:
    uri = results_uri(str(tmp_path / "out"))
    first = ResultWriter(uri, flush_every=10, flush_interval_s=60, index_version="iv-old")
    for q in QUERIES[:3]:
        first.add(
            result_row(q.query_id, q.question, answer="old", error="boom" if q.query_id == "2" else None)
        )
    first.flush()
    before = read_answered(uri)
    assert before["0"] == Answered("ok", "iv-old") and before["2"].status == "error"

    again = ResultWriter(uri, flush_every=10, flush_interval_s=60, existing=before, index_version="iv-new")
    again.add(result_row("1", "question 1", answer="new", index_version="iv-new"))
    again.add(result_row("2", "question 2", answer="fixed", index_version="iv-new"))
    again.add(result_row("3", "question 3", answer="first", index_version="iv-new"))
    again.flush()
    rows = DeltaTable(str(tmp_path / "out")).to_pyarrow_table().to_pylist()
    by_id = {row["query_id"]: row for row in rows}
    assert len(rows) == len(by_id) == 4, "one row per query"
    assert by_id["0"]["answer"] == "old" and by_id["0"]["index_version"] == "iv-old"
    assert {by_id[i]["answer"] for i in "123"} == {"new", "fixed", "first"}
    assert all(by_id[i]["index_version"] == "iv-new" and by_id[i]["status"] == "ok" for i in "123")
    assert again.commits == 2  # the new query appended, the two replacements merged


def test_a_table_written_before_versions_were_recorded_gains_the_column(tmp_path: Path) -> None:
    old_schema = pa.schema(
        [
            ("query_id", pa.string()),
            ("question", pa.string()),
            ("answer", pa.string()),
            ("result_json", pa.string()),
            ("status", pa.string()),
            ("error", pa.string()),
            ("seconds", pa.float64()),
            ("finished_at", pa.timestamp("us", tz="UTC")),
        ]
    )
    now = datetime.now(UTC)
    old = [{"query_id": "0", "question": "q", "answer": "a", "result_json": None, "status": "ok",
            "error": None, "seconds": 1.0, "finished_at": now}]  # fmt: skip
    write_deltalake(str(tmp_path / "out"), pa.Table.from_pylist(old, schema=old_schema))
    uri = results_uri(str(tmp_path / "out"))
    assert read_answered(uri) == {"0": Answered("ok", None)}
    writer = ResultWriter(uri, 10, 60, existing=["0"], index_version="iv-now")
    writer.add(result_row("0", "q", answer="again"))
    writer.add(result_row("1", "q1", answer="new"))
    writer.flush()
    assert read_answered(uri) == {"0": Answered("ok", "iv-now"), "1": Answered("ok", "iv-now")}
