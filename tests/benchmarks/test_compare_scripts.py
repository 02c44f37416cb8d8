"""The paired comparisons that BENCHMARKS.md quotes, on rows whose answer is known."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import compare_answers  # noqa: E402
import compare_recall  # noqa: E402


def _answer(question: str, method: str, f1: float, tokens: int, kind: str = "bridge") -> dict:
    return {
        "question_id": question,
        "type": kind,
        "method": method,
        "budget": 50 if method == "lazy" else None,
        "context_tokens": 1000,
        "f1": f1,
        "em": float(f1 == 1.0),
        "span_f1": f1,
        "span_em": float(f1 == 1.0),
        "llm_tokens": tokens,
    }


def test_paired_difference_counts_questions_ahead_and_behind() -> None:
    result = compare_recall.paired({"a": 1.0, "b": 0.5, "c": 0.0}, {"a": 0.5, "b": 0.5, "c": 0.5, "d": 1.0})
    assert result["questions"] == 3
    assert result["difference"] == pytest.approx((0.5 + 0.0 - 0.5) / 3)
    assert (result["ahead"], result["behind"]) == (1, 1)
    low, high = result["interval"]
    assert low <= result["difference"] <= high


def test_answers_pair_lazy_with_each_baseline_on_common_questions() -> None:
    rows = [
        _answer("q1", "lazy", 1.0, 9000),
        _answer("q2", "lazy", 0.5, 11000, kind="comparison"),
        _answer("q3", "lazy", 1.0, 10000),  # no baseline answer yet: left out
        _answer("q1", "vector", 0.0, 1000),
        _answer("q2", "vector", 0.5, 1000, kind="comparison"),
        _answer("q1", "hybrid", 1.0, 2000),
    ]
    report = {entry["against"]: entry for entry in compare_answers.compare_answers(rows)}
    assert set(report) == {"vector", "hybrid"}
    vector = report["vector"]
    assert vector["questions"] == 2
    assert vector["f1"]["difference"] == pytest.approx(0.5)
    assert (vector["f1"]["ahead"], vector["f1"]["behind"]) == (1, 0)
    assert vector["tokens"]["ratio"] == pytest.approx(10.0)
    assert vector["by_type"]["comparison"]["f1"]["difference"] == pytest.approx(0.0)
    assert report["hybrid"]["questions"] == 1
    assert report["hybrid"]["f1"]["difference"] == pytest.approx(0.0)


def test_answers_script_rejects_rows_without_a_baseline(tmp_path: Path) -> None:
    rows = tmp_path / "answers.jsonl"
    rows.write_text(json.dumps(_answer("q1", "lazy", 1.0, 9000)) + "\n")
    with pytest.raises(SystemExit):
        compare_answers.main(["--answers", str(rows)])
    with pytest.raises(SystemExit):
        compare_answers.main(["--answers", str(tmp_path / "missing.jsonl")])
