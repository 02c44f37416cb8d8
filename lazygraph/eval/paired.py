"""Lazy search against every other method, question by question, at equal context limits.

Two kinds of rows are paired:

- answers (``eval answers`` or ``eval sweep`` rows): each lazy cell (budget, context limit) against
  every method without relevance tests at the same limit, and against that method's equal-cost cell
  (its context grown to the lazy search's LLM tokens on each question: the rows ``--equal-cost`` adds,
  keyed by the lazy budget they are matched to), on every answer score (F1 and EM of the whole answer
  and of its span, and ``gold_in_answer``: whether the answer holds the gold answer word for word,
  counted on the questions whose gold is not yes or no), with the LLM tokens an answer of each and
  their ratio;
- retrieval (``bench query --rows``: the recall of lazy search, and of the vector and hybrid rankings,
  per question, budget and limit), optionally with the rows of ``bench baselines --rows`` (the no-LLM
  ablations): the recall of lazy search against each of them.

Two runs of the same methods under different settings (an index built with another concept extractor,
another prompt) are paired cell by cell instead (``paired_runs``): each (method, budget, limit) of the
first file against the same cell of the second.

For each comparison: the mean of both, the difference with a 95 % paired-bootstrap interval over
questions (``eval.stats.paired_difference``; a difference whose interval spans 0 is not established on
these questions), and on how many questions lazy search is ahead or behind, overall and per question
type. Only questions present on both sides are compared, so a run still going can be read as it stands.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console

from lazygraph.errors import InputError
from lazygraph.eval.retrieval import baselines, write_report
from lazygraph.eval.rows import read_row_file
from lazygraph.eval.stats import paired_difference

SCORES = ("f1", "em", "span_f1", "span_em", "gold_in_answer")
# Run against run also pairs what each context held: gold-document recall (absent from older rows).
RUN_SCORES = (*SCORES, "recall")
Cell = tuple[str, int | None, int]  # method, budget, context limit


# ---- answers ---------------------------------------------------------------------------------------
def cells(rows: list[dict]) -> dict[Cell, dict[str, dict]]:
    """(method, budget, limit) -> question_id -> row."""
    out: dict = defaultdict(dict)
    for row in rows:
        out[(row["method"], row["budget"], row["context_tokens"])][row["question_id"]] = row
    return out


def compare_cell(lazy: dict[str, dict], other: dict[str, dict], scores: tuple[str, ...] = SCORES) -> dict:
    """Every score paired over the common questions, and the LLM tokens an answer of both."""
    common = sorted(set(lazy) & set(other))
    result: dict = {"questions": len(common)}
    for score in scores:
        # gold_in_answer is true, false or None (a yes/no gold): the questions where it is a fact
        result[score] = paired_difference(
            {q: float(lazy[q][score]) for q in common if lazy[q].get(score) is not None},
            {q: float(other[q][score]) for q in common if other[q].get(score) is not None},
        )
    lazy_tokens = sum(lazy[q]["llm_tokens"] for q in common) / max(len(common), 1)
    other_tokens = sum(other[q]["llm_tokens"] for q in common) / max(len(common), 1)
    result["tokens"] = {
        "lazy": lazy_tokens,
        "other": other_tokens,
        "ratio": lazy_tokens / other_tokens if other_tokens else None,
    }
    return result


def paired_answers(rows: list[dict]) -> list[dict]:
    """Each lazy cell against each baseline at the same context limit and at the lazy cell's cost
    (``"<method> at equal cost"``), and against lazy search at the lowest budget of the same limit
    (what the relevance tests of the higher budget buy), overall and per question type."""
    by_cell = cells(rows)
    report = []
    for (method, budget, limit), lazy in sorted(by_cell.items(), key=lambda item: str(item[0])):
        if method != "lazy":
            continue
        lowest = min(b for m, b, lim in by_cell if m == "lazy" and lim == limit)
        if budget != lowest:
            report.append(
                {
                    "budget": budget,
                    "context_tokens": limit,
                    "against": f"lazy at budget {lowest}",
                    **compare_typed(lazy, by_cell[("lazy", lowest, limit)]),
                }
            )
        # each baseline at the same context limit, and at lazy's cost (its equal-cost cell, keyed by the
        # lazy budget it is matched to)
        for against, other in [
            *((name, by_cell.get((name, None, limit))) for name in baselines()),
            *((f"{name} at equal cost", by_cell.get((name, budget, limit))) for name in baselines()),
        ]:
            if not other:
                continue
            report.append(
                {"budget": budget, "context_tokens": limit, "against": against, **compare_typed(lazy, other)}
            )
    return report


def compare_typed(first: dict[str, dict], second: dict[str, dict], scores: tuple[str, ...] = SCORES) -> dict:
    """``compare_cell`` over all common questions, and ``by_type``: the same per question type."""
    types = sorted({row.get("type") or "unknown" for row in first.values()})
    per_type = {
        kind: compare_cell(
            {q: r for q, r in first.items() if (r.get("type") or "unknown") == kind}, second, scores
        )
        for kind in types
    }
    return {**compare_cell(first, second, scores), "by_type": per_type}


def paired_runs(rows: list[dict], other_rows: list[dict], other_name: str) -> list[dict]:
    """Each (method, budget, limit) cell of ``rows`` against the same cell of ``other_rows``, on the
    questions both answered, overall and per question type; ``against`` names the other run's cell."""
    mine, theirs = cells(rows), cells(other_rows)
    report = []
    for cell in sorted(set(mine) & set(theirs), key=str):
        method, budget, limit = cell
        report.append(
            {
                "method": method,
                "budget": budget,
                "context_tokens": limit,
                "against": f"{method} in {other_name}",
                **compare_typed(mine[cell], theirs[cell], RUN_SCORES),
            }
        )
    return report


# ---- retrieval -------------------------------------------------------------------------------------
def recalls(grid: list[dict], ablations: list[dict]) -> dict:
    """(budget, limit) -> method -> question_id -> recall; "lazy" is the lazy search itself."""
    out: dict = defaultdict(lambda: defaultdict(dict))
    others: dict = defaultdict(dict)  # (method, limit) -> question -> recall
    for row in ablations:
        others[(row["method"], row["context_tokens"])][row["question_id"]] = row["recall"]
    ranked = [m for m in baselines() if f"{m}_recall" in (grid[0] if grid else {})]
    for row in grid:
        key, question = (row["budget"], row["context_tokens"]), row["question_id"]
        out[key]["lazy"][question] = row["lazy_recall"]
        out[key]["lazy, claims only"][question] = row.get("lazy_claims_only_recall", row["lazy_recall"])
        for method in ranked:
            out[key][method][question] = row[f"{method}_recall"]
        for (method, limit), by_question in others.items():
            same_limit = limit == row["context_tokens"] and method not in ranked
            if same_limit and question in by_question:
                out[key][method][question] = by_question[question]
    return out


def paired_recall(grid: list[dict], ablations: list[dict]) -> list[dict]:
    """Lazy search's recall against every other method's, per budget and limit, overall and per type."""
    types = {row["question_id"]: row.get("type") or "unknown" for row in grid}
    report = []
    for (budget, limit), methods in sorted(recalls(grid, ablations).items()):
        for method, other in methods.items():
            if method == "lazy":
                continue
            per_type = {
                kind: paired_difference(
                    {q: r for q, r in methods["lazy"].items() if types[q] == kind},
                    {q: r for q, r in other.items() if types.get(q) == kind},
                )
                for kind in sorted(set(types.values()))
            }
            result = paired_difference(methods["lazy"], other)
            report.append(
                {"budget": budget, "context_tokens": limit, "against": method, **result, "by_type": per_type}
            )
    return report


# ---- the command -------------------------------------------------------------------------------------
def run_paired(
    rows_file: Path,
    console: Console,
    ablations_file: Path | None = None,
    out: Path | None = None,
    against_file: Path | None = None,
    question_ids: set[str] | None = None,
) -> dict[str, Any]:
    """Pair the rows of ``rows_file`` (answers or retrieval rows, told apart by their fields) and, for
    retrieval, those of ``ablations_file``; or, with ``against_file``, each answer cell of one run with
    the same cell of the other; only the questions in ``question_ids`` when it is given (a calibration
    or an evaluation part of a data set). The report (also written to ``out``)."""
    rows = _only(_read(rows_file, console), question_ids)
    if question_ids is not None and not rows:
        raise InputError(
            f"none of the {len(question_ids)} questions chosen has a row in {rows_file}; check --questions, "
            "--skip and --limit against the questions the rows answered"
        )
    kind = "recall" if any("lazy_recall" in row for row in rows) else "answers"
    if against_file is not None:
        return _run_against_run(rows_file, rows, against_file, kind, console, out, question_ids)
    if kind == "answers":
        if ablations_file is not None:
            raise InputError("--baselines goes with retrieval rows (bench query --rows), not answer rows")
        comparisons = paired_answers(rows)
    else:
        ablations = _only(_read(ablations_file, console), question_ids) if ablations_file else []
        comparisons = paired_recall(rows, ablations)
    if not comparisons:
        raise InputError(
            f"{rows_file} has no lazy rows with a row of {' or '.join(baselines())} at the same context "
            "limit; pair the rows of a run that answered with both"
        )
    scores = list(SCORES) if kind == "answers" else ["recall"]
    report = {"kind": kind, "rows": str(rows_file), "scores": scores, "comparisons": comparisons}
    if out is not None:
        write_report(out, report)
    return report


def _run_against_run(
    rows_file: Path,
    rows: list[dict],
    against_file: Path,
    kind: str,
    console: Console,
    out: Path | None,
    question_ids: set[str] | None,
) -> dict[str, Any]:
    if kind != "answers":
        raise InputError(
            "--against pairs two files of answer rows (`eval answers --out`), not retrieval rows"
        )
    other = _only(_read(against_file, console), question_ids)
    if any("lazy_recall" in row for row in other):
        raise InputError(
            f"{against_file} holds retrieval rows; --against needs answer rows like {rows_file}'s"
        )
    comparisons = paired_runs(rows, other, Path(against_file).stem)
    if not comparisons:
        raise InputError(
            f"{rows_file} and {against_file} share no (method, budget, context limit) cell; pair the rows "
            "of two runs of the same methods"
        )
    report = {
        "kind": "answers",
        "rows": str(rows_file),
        "against": str(against_file),
        "scores": list(RUN_SCORES),
        "comparisons": comparisons,
    }
    if out is not None:
        write_report(out, report)
    return report


def _only(rows: list[dict], question_ids: set[str] | None) -> list[dict]:
    return rows if question_ids is None else [row for row in rows if row["question_id"] in question_ids]


def _read(path: Path, console: Console) -> list[dict]:
    if not Path(path).is_file():
        raise InputError(
            f"{path} does not exist; give the rows of `lazygraph eval answers --out` or `bench query --rows`"
        )
    return read_row_file(Path(path), ("question_id", "context_tokens"), console, repair=False)
