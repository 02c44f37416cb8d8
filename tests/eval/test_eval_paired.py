"""`lazygraph eval paired`: the paired comparisons that BENCHMARKS.md quotes, on rows whose answer is
known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lazygraph.cli import app, main
from lazygraph.errors import InputError
from lazygraph.eval.paired import paired_answers, paired_recall, paired_runs
from lazygraph.eval.stats import paired_difference


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
    result = paired_difference({"a": 1.0, "b": 0.5, "c": 0.0}, {"a": 0.5, "b": 0.5, "c": 0.5, "d": 1.0})
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
    report = {entry["against"]: entry for entry in paired_answers(rows)}
    assert set(report) == {"vector", "hybrid"}
    vector = report["vector"]
    assert vector["questions"] == 2
    assert vector["f1"]["difference"] == pytest.approx(0.5)
    assert (vector["f1"]["ahead"], vector["f1"]["behind"]) == (1, 0)
    assert vector["tokens"]["ratio"] == pytest.approx(10.0)
    assert vector["by_type"]["comparison"]["f1"]["difference"] == pytest.approx(0.0)
    assert report["hybrid"]["questions"] == 1
    assert report["hybrid"]["f1"]["difference"] == pytest.approx(0.0)


def test_answers_pair_lazy_with_the_baselines_at_equal_cost_and_count_gold_in_answer() -> None:
    def row(q: str, method: str, budget: int | None, f1: float, gold: bool | None, tokens: int) -> dict:
        return _answer(q, method, f1, tokens) | {"budget": budget, "gold_in_answer": gold}

    rows = [
        row("q1", "lazy", 50, 1.0, True, 9000),
        row("q2", "lazy", 50, 0.5, None, 9000),  # a yes/no gold: no gold_in_answer either side
        row("q3", "lazy", 50, 0.0, False, 9000),
        row("q1", "vector", None, 0.0, False, 1000),
        row("q2", "vector", None, 0.5, None, 1000),
        row("q3", "vector", None, 0.0, False, 1000),
        # vector at the lazy cell's cost: its rows carry the lazy budget they are matched to
        row("q1", "vector", 50, 1.0, True, 9000) | {"equal_cost": True, "context_limit": 8000},
        row("q3", "vector", 50, 1.0, True, 9000) | {"equal_cost": True, "context_limit": 8000},
    ]
    report = {entry["against"]: entry for entry in paired_answers(rows)}
    assert set(report) == {"vector", "vector at equal cost"}
    plain, matched = report["vector"], report["vector at equal cost"]
    assert plain["questions"] == 3 and matched["questions"] == 2
    # gold_in_answer as a share of the questions where it is a fact (q2's yes/no gold left out)
    assert plain["gold_in_answer"]["questions"] == 2
    assert (plain["gold_in_answer"]["lazy"], plain["gold_in_answer"]["other"]) == (0.5, 0.0)
    assert (plain["gold_in_answer"]["ahead"], plain["gold_in_answer"]["behind"]) == (1, 0)
    assert matched["gold_in_answer"]["other"] == 1.0 and matched["gold_in_answer"]["behind"] == 1
    assert matched["f1"]["difference"] == pytest.approx(-0.5)
    assert matched["tokens"]["ratio"] == pytest.approx(1.0)


def test_answers_script_rejects_rows_without_a_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = tmp_path / "answers.jsonl"
    rows.write_text(json.dumps(_answer("q1", "lazy", 1.0, 9000)) + "\n")
    monkeypatch.setattr("sys.argv", ["lazygraph", "eval", "paired", str(rows)])
    with pytest.raises(SystemExit):
        main()
    monkeypatch.setattr("sys.argv", ["lazygraph", "eval", "paired", str(tmp_path / "missing.jsonl")])
    with pytest.raises(SystemExit):
        main()


def test_recall_pairs_lazy_with_the_rankings_and_the_ablations(tmp_path: Path) -> None:
    grid = [
        {"question_id": q, "type": "bridge", "budget": 20, "context_tokens": 1000, "lazy_recall": lazy}
        | {"lazy_claims_only_recall": 0.5, "vector_recall": vector, "hybrid_recall": 1.0}
        for q, lazy, vector in (("q1", 1.0, 0.5), ("q2", 0.5, 0.5), ("q3", 1.0, 0.0))
    ]
    ablations = [
        {"question_id": q, "method": "prior-focused", "context_tokens": 1000, "recall": 0.5}
        for q in ("q1", "q2")
    ]
    report = {entry["against"]: entry for entry in paired_recall(grid, ablations)}
    assert set(report) == {"lazy, claims only", "vector", "hybrid", "prior-focused"}
    assert report["vector"]["difference"] == pytest.approx(0.5) and report["vector"]["questions"] == 3
    assert (report["hybrid"]["ahead"], report["hybrid"]["behind"]) == (0, 1)
    assert report["prior-focused"]["questions"] == 2
    assert report["vector"]["by_type"]["bridge"]["difference"] == pytest.approx(0.5)


def test_the_command_prints_the_comparisons_and_writes_them(tmp_path: Path) -> None:
    rows = tmp_path / "answers.jsonl"
    answers = [_answer("q1", "lazy", 1.0, 9000), _answer("q1", "vector", 0.5, 3000)]
    rows.write_text("".join(json.dumps(row) + "\n" for row in answers))
    out = tmp_path / "paired.json"
    result = CliRunner().invoke(app, ["eval", "paired", str(rows), "--out", str(out)], terminal_width=220)
    assert result.exit_code == 0, result.output
    assert (
        "+50.0" in result.stdout
        and "LLM tokens an answer, lazy 9,000 against vector 3,000 (3.0 ×)" in result.stdout
    )
    written = json.loads(out.read_text())
    assert written["kind"] == "answers" and written["comparisons"][0]["f1"]["difference"] == 0.5


def test_one_run_against_another_pairs_each_cell_with_the_same_cell(tmp_path: Path) -> None:
    def rows(f1s: dict[str, float], recall: float) -> list[dict]:
        return [
            _answer(q, method, f1, 1000) | {"recall": recall}
            for q, f1 in f1s.items()
            for method in ("lazy", "vector")
        ]

    pos_rules = rows({"q1": 1.0, "q2": 0.0, "q3": 0.5}, recall=0.5)
    parser = rows({"q1": 0.5, "q2": 0.0}, recall=1.0)  # q3 not answered yet: left out
    report = {entry["against"]: entry for entry in paired_runs(pos_rules, parser, "parser")}
    assert set(report) == {"lazy in parser", "vector in parser"}
    lazy = report["lazy in parser"]
    assert (lazy["method"], lazy["budget"], lazy["questions"]) == ("lazy", 50, 2)
    assert lazy["f1"]["difference"] == pytest.approx(0.25)
    assert lazy["recall"]["difference"] == pytest.approx(-0.5)
    assert (lazy["recall"]["ahead"], lazy["recall"]["behind"]) == (0, 2)

    first, second = tmp_path / "pos_rules.jsonl", tmp_path / "parser.jsonl"
    first.write_text("".join(json.dumps(row) + "\n" for row in pos_rules))
    second.write_text("".join(json.dumps(row) + "\n" for row in parser))
    command = ["eval", "paired", str(first), "--against", str(second)]
    result = CliRunner().invoke(app, command, terminal_width=220)
    assert result.exit_code == 0, result.output
    assert "pos_rules against parser" in result.stdout and "lazy in parser" in result.stdout
    # rows of another budget share no cell: a clear error, not an empty table
    second.write_text("".join(json.dumps(row | {"budget": 0}) + "\n" for row in parser))
    result = CliRunner().invoke(app, command, terminal_width=220)
    assert result.exit_code != 0 and isinstance(result.exception, InputError)
    assert "share no (method, budget, context limit) cell" in str(result.exception)


def test_each_budget_is_paired_with_the_lowest_and_questions_can_be_chosen(tmp_path: Path) -> None:
    """A higher budget against budget 0 (what its relevance tests buy), and only the questions that
    --questions, --skip and --limit choose, in the questions file's order."""

    def lazy(question: str, budget: int, f1: float) -> dict:
        return {**_answer(question, "lazy", f1, 1000 + 100 * budget), "budget": budget}

    rows = [
        lazy("q1", 0, 0.0),
        lazy("q1", 20, 1.0),
        lazy("q2", 0, 0.5),
        lazy("q2", 20, 0.5),
        lazy("q3", 0, 1.0),
        lazy("q3", 20, 0.0),
        _answer("q1", "vector", 0.0, 1000),
        _answer("q2", "vector", 0.0, 1000),
        _answer("q3", "vector", 0.0, 1000),
    ]
    report = [e for e in paired_answers(rows) if e["against"] == "lazy at budget 0"]
    assert [e["budget"] for e in report] == [20]
    assert report[0]["questions"] == 3 and report[0]["f1"]["difference"] == pytest.approx(0.0)
    assert report[0]["tokens"]["ratio"] == pytest.approx(3000 / 1000)

    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        "".join(
            json.dumps({"question_id": q, "question": f"{q}?", "answer": "x"}) + "\n"
            for q in ("q3", "q1", "q2")
        )
    )
    out = tmp_path / "paired.json"
    # The first two questions of the file: q3 and q1, where budget 20 loses one and wins one.
    result = CliRunner().invoke(
        app, ["eval", "paired", str(path), "--questions", str(questions), "--limit", "2", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    chosen = {e["against"]: e for e in json.loads(out.read_text())["comparisons"]}
    assert chosen["lazy at budget 0"]["questions"] == 2
    assert (chosen["lazy at budget 0"]["f1"]["ahead"], chosen["lazy at budget 0"]["f1"]["behind"]) == (1, 1)
    # --skip 1 --limit 1 is q1 alone, where budget 20 wins.
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "paired",
            str(path),
            "--questions",
            str(questions),
            "--skip",
            "1",
            "--limit",
            "1",
            "--out",
            str(out),
        ],
    )
    assert json.loads(out.read_text())["comparisons"][0]["questions"] == 1
    chosen = {e["against"]: e for e in json.loads(out.read_text())["comparisons"]}
    assert chosen["lazy at budget 0"]["f1"]["difference"] == pytest.approx(1.0)
    # Questions that answered nothing, and --skip without a questions file, are refused.
    result = CliRunner().invoke(
        app, ["eval", "paired", str(path), "--questions", str(questions), "--skip", "3"]
    )
    assert isinstance(result.exception, InputError) and "none of the" in str(result.exception)
    result = CliRunner().invoke(app, ["eval", "paired", str(path), "--skip", "1"])
    assert isinstance(result.exception, InputError) and "--questions" in str(result.exception)
