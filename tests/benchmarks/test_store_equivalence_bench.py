"""The store-equivalence benchmark's bookkeeping: what it compares per question, how it sums rows, and
that a run resumes after the rows it wrote (the queries themselves run in the e2e test of the store)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from lazygraph.bench import store_equivalence as bench


def answer(text: str, docs: list[str], fresh: int = 0, cached: int = 0) -> SimpleNamespace:
    cost = SimpleNamespace(prompt_tokens=fresh, completion_tokens=0, llm_tokens=fresh + cached)
    return SimpleNamespace(
        text=text,
        context_text=f"<{text}>",
        context_chunk_ids=[f"{d}-0" for d in docs],
        context_doc_ids=docs,
        subqueries=[],
        cost=cost,
        to_json=lambda: {"index_source": "store"},
    )


def test_a_row_says_what_differs_and_each_sources_recall() -> None:
    same = bench.compare(
        answer("A", ["d1", "d2"], fresh=90), answer("A", ["d1", "d2"], cached=90), ["d1", "d3"]
    )
    assert same["same_answer"] and same["same_context"] and same["same_chunks"]
    assert same["fresh_tokens"] == 0 and same["snapshot_tokens"] == 90
    assert same["recall_snapshot"] == same["recall_store"] == 0.5
    other = bench.compare(answer("A", ["d1"]), answer("B", ["d3"], fresh=7), ["d1", "d3"])
    assert not other["same_answer"] and not other["same_chunks"] and other["fresh_tokens"] == 7
    assert bench.compare(answer("A", []), answer("A", []), [])["recall_store"] is None


def test_rows_are_summed_per_method_and_a_run_resumes_after_them(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    rows = [
        {
            "question_id": "q1",
            "method": "lazy",
            **bench.compare(answer("A", ["d1"]), answer("A", ["d1"]), ["d1"]),
        },
        {
            "question_id": "q2",
            "method": "lazy",
            **bench.compare(answer("A", ["d1"]), answer("B", ["d2"], 5), ["d1"]),
        },
    ]
    for row in rows:
        bench.append_row(out, row)
    assert bench.read_rows(out) == rows
    summary = bench.summary(bench.read_rows(out))["lazy"]
    assert summary == {
        "questions": 2,
        "answered": 2,
        "same_answer": 1,
        "same_context": 1,
        "store_fresh_tokens": 5,
        "recall_snapshot": 1.0,
        "recall_store": 0.5,
    }


def context(text: str, docs: list[str], fresh: int = 0, cached: int = 0) -> dict:
    ids = [f"{d}-0" for d in docs]
    return {"text": text, "chunk_ids": ids, "doc_ids": docs, "index_source": "store"} | {
        "fresh_tokens": fresh,
        "cached_tokens": cached,
    }


def test_a_contexts_only_row_compares_the_contexts_and_counts_no_answer() -> None:
    same = bench.compare_contexts(context("<A>", ["d1"], 40, 2), context("<A>", ["d1"], 0, 42), ["d1", "d2"])
    assert same["same_context"] and same["same_chunks"] and not same["answered"]
    assert same["fresh_tokens"] == 0 and same["snapshot_tokens"] == 42
    assert same["recall_snapshot"] == same["recall_store"] == 0.5
    other = bench.compare_contexts(context("<A>", ["d1"]), context("<B>", ["d2"], fresh=7), ["d1"])
    assert not other["same_context"] and not other["same_chunks"]
    assert (other["recall_snapshot"], other["recall_store"]) == (1.0, 0.0)
    rows = [{"question_id": q, "method": "vector", **row} for q, row in (("q1", same), ("q2", other))]
    summary = bench.summary(rows)["vector"]
    assert summary["answered"] == 0 and summary["same_answer"] == 0 and summary["same_context"] == 1
    assert summary["store_fresh_tokens"] == 7
