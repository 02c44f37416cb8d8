"""The retrieval evaluation over a small Delta index, with the fake LLM and the hashed embedder."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from lazygraph.errors import InputError
from lazygraph.eval.retrieval import load_questions, recall, run_retrieval_eval, run_retrieval_grid


def test_eval_report_has_the_contract_fields(tmp_path, engine, questions_file) -> None:
    out = tmp_path / "out" / "report.json"
    report = run_retrieval_eval(
        engine.settings,
        engine.snapshot.uri,
        questions_file,
        budget=8,
        context_tokens=200,
        limit=2,
        out_file=out,
        console=Console(quiet=True),
        engine=engine,
    )
    assert json.loads(out.read_text())["lazy"]["mean_recall"] == report["lazy"]["mean_recall"]
    assert [r["question_id"] for r in report["questions"]] == ["q1", "q2"]
    for row in report["questions"]:
        assert row["lazy_relevance_tests"] <= 8
        assert 0.0 <= row["lazy_recall"] <= 1.0 and 0.0 <= row["vector_recall"] <= 1.0
        assert set(row["lazy_doc_ids"]) <= {f"hp{d:04d}" for d in range(10)}
    q2 = report["questions"][1]
    assert q2["lazy_recall"] == 0.5  # hp0005 found through the relevance test, hp0009 is never relevant
    outcomes = q2["gold_outcomes"]
    assert outcomes["hp0005"]["outcome"] == "kept"
    assert outcomes["hp0009"]["outcome"] in {"judged_irrelevant", "untested"}
    if outcomes["hp0009"]["outcome"] == "judged_irrelevant":
        assert outcomes["hp0009"]["p_relevant"] < engine.settings.query.relevance.threshold_for("p_yes")
    assert all(o["vector_rank"] >= 0 for o in outcomes.values())
    assert sum(report["lazy"]["gold_outcomes"].values()) == 4  # two gold documents per question
    assert report["lazy"]["mean_relevance_tests"] > 0 and report["lazy"]["mean_llm_tokens"] > 0
    assert report["vector"]["mean_llm_tokens"] == 0
    assert set(report["lazy"]["recall_by_type"]) == {"bridge", "comparison"}


def test_one_search_serves_every_context_limit(engine, questions_file) -> None:
    grid = run_retrieval_grid(
        engine, load_questions(questions_file, 2), [4, 10], [20, 400], Console(quiet=True)
    )
    assert set(grid) == {(4, 20), (4, 400), (10, 20), (10, 400)}
    for budget in (4, 10):
        small, large = grid[(budget, 20)], grid[(budget, 400)]
        assert small["lazy"]["mean_recall"] <= large["lazy"]["mean_recall"]
        assert small["vector"]["mean_recall"] <= large["vector"]["mean_recall"]
        # the same searches: identical test counts at both limits
        assert small["lazy"]["mean_relevance_tests"] == large["lazy"]["mean_relevance_tests"]
        assert large["lazy"]["mean_relevance_tests"] <= budget


def test_recall_and_bad_question_files(tmp_path) -> None:
    assert recall(["a", "b", "x"], ["a", "b"]) == 1.0
    assert recall(["a"], ["a", "b"]) == 0.5
    with pytest.raises(InputError, match="does not exist"):
        load_questions(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "no gold"}\n')
    with pytest.raises(InputError, match="supporting_doc_ids"):
        load_questions(bad)


def test_a_grid_with_a_rows_file_resumes_without_searching_again(tmp_path, engine, questions_file) -> None:
    questions = load_questions(questions_file, 2)
    rows = tmp_path / "rows.jsonl"
    first = run_retrieval_grid(engine, questions[:1], [4], [300, 1000], Console(quiet=True), rows)
    assert len(rows.read_text().splitlines()) == 2  # one row per context limit, written at once
    llm = engine.roles("relevance").relevance
    calls_before = len(llm.tasks)
    again = run_retrieval_grid(engine, questions, [4], [300, 1000], Console(quiet=True), rows)
    assert len(llm.tasks) > calls_before  # the second question was searched ...
    assert len(rows.read_text().splitlines()) == 4
    calls_after = len(llm.tasks)
    third = run_retrieval_grid(engine, questions, [4], [300, 1000], Console(quiet=True), rows)
    assert len(llm.tasks) == calls_after  # ... and nothing was searched on the third run
    assert again[(4, 300)]["questions"][0] == first[(4, 300)]["questions"][0]
    assert third[(4, 1000)]["lazy"]["mean_recall"] == again[(4, 1000)]["lazy"]["mean_recall"]
    assert [r["question_id"] for r in third[(4, 300)]["questions"]] == ["q1", "q2"]
