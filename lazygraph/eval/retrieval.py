"""Retrieval evaluation: the share of each question's gold documents that reach the final context.

- lazy: the documents of the source chunks of the claims kept within T context tokens. Refine, the
  budgeted relevance tests and the claim extraction (map) run as in a real query; the answer call
  (reduce) is skipped because it does not change which claims are in the context.
- vector: the documents of the top chunks by similarity that fit in the same T tokens. No answer call
  is made, so its LLM tokens are 0.
- hybrid: the same cut over chunks ranked by reciprocal-rank fusion of similarity and BM25 (``--method
  hybrid``); no LLM call either.

Both run through ``QueryEngine.search``, the entry every answer starts with, stopping at the context
cut. One lazy search serves several context limits (the cut is applied to the same ranked claims),
which is what the benchmark grid uses.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from lazygraph.errors import InputError
from lazygraph.eval.rows import append_rows, read_row_file
from lazygraph.jsonlines import iter_json_objects
from lazygraph.query.cost import llm_tokens
from lazygraph.query.engine import QueryEngine
from lazygraph.query.evidence import Claim
from lazygraph.query.question import validate_question
from lazygraph.query.search import SEARCHES, Plan, Retrieval
from lazygraph.query.source import with_index_source
from lazygraph.settings import Settings


def load_questions(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    if not Path(path).is_file():
        raise InputError(f"questions file {path} does not exist; pass a JSON Lines file to --questions")
    questions = []
    for number, row in iter_json_objects(path):
        if "question" not in row or "supporting_doc_ids" not in row:
            raise InputError(f"{path}:{number} needs the fields question and supporting_doc_ids")
        if not isinstance(row["question"], str) or not row["question"].strip():
            raise InputError(f"{path}:{number} has an empty question; write the question or remove the line")
        row.setdefault("question_id", f"q{number}")
        questions.append(row)
        if limit is not None and len(questions) >= limit:
            break
    return questions


def baselines() -> list[str]:
    """The methods lazy search is measured against: every registered method without relevance tests."""
    return [name for name, search in SEARCHES.items() if not search.calls_models]


def recall(found: Sequence[str], gold: Sequence[str]) -> float:
    gold_set = set(gold)
    return len(gold_set & set(found)) / len(gold_set) if gold_set else 0.0


def evaluate_question(
    engine: QueryEngine, question: dict[str, Any], budget: int, limits: Sequence[int]
) -> dict[int, dict[str, Any]]:
    """One lazy search of a question and the ranking of every method without relevance tests (vector,
    hybrid), measured at every context limit."""
    text = question["question"]
    with engine.search(text, "lazy", budget=budget, answering=False) as lazy:
        cost = lazy.recorder.to_json()  # the search's own cost: no answer call follows
    rankings = {}
    for method in baselines():
        with engine.search(text, method, answering=False) as ranked:
            rankings[method] = ranked  # a ranking only: the cut per limit comes below
    vector_scores = rankings["vector"].retrieval.scores
    retrieval: Retrieval = lazy.retrieval
    docs = engine.snapshot.chunk_doc_ids
    gold = list(question["supporting_doc_ids"])
    rows = {}
    for limit in limits:
        context = lazy.context(limit)
        kept = context.claims
        lazy_docs = list(dict.fromkeys(str(docs[c]) for c in context.chunks))
        claim_docs = {str(docs[ch]) for c in kept if c.kind == "claim" for ch in c.chunks}
        ranked_docs = {
            method: list(dict.fromkeys(str(docs[c]) for c in ranked.context(limit).chunks))
            for method, ranked in rankings.items()
        }
        rows[limit] = {
            "question_id": question["question_id"],
            "budget": budget,
            "type": question.get("type", ""),
            "level": question.get("level", ""),
            "context_tokens": limit,
            "lazy_recall": recall(lazy_docs, gold),
            # the same search with the context holding its claims only (query.context_fill: none)
            "lazy_claims_only_recall": recall(list(claim_docs), gold),
            **{f"{method}_recall": recall(found, gold) for method, found in ranked_docs.items()},
            "lazy_relevance_tests": cost["relevance_tests"],
            "lazy_relevant_chunks": len(retrieval.relevant_chunks),
            "lazy_claims": len(retrieval.ranked_claims),
            "lazy_claims_kept": sum(1 for c in kept if c.kind == "claim"),
            "lazy_passages_kept": sum(1 for c in kept if c.kind == "passage"),
            "lazy_llm_calls": cost["llm_calls"],
            # The method's cost: tokens of fresh calls and of calls answered from the LLM cache.
            "lazy_llm_tokens": llm_tokens(cost),
            "lazy_llm_cache_hits": cost["llm_cache_hits"],
            "lazy_seconds": cost["seconds"],
            "lazy_llm_seconds": cost["llm_seconds"],
            "lazy_non_llm_seconds": cost["non_llm_seconds"],
            "lazy_stages": cost["stages"],
            "subqueries": [s.text for s in retrieval.refinement.subqueries],
            "gold_doc_ids": gold,
            "gold_outcomes": gold_outcomes(engine, retrieval, kept, gold, vector_scores),
            "lazy_doc_ids": lazy_docs,
            **{f"{method}_doc_ids": found for method, found in ranked_docs.items()},
        }
    return rows


def gold_outcomes(
    engine: QueryEngine,
    retrieval: Retrieval,
    kept: Sequence[Claim],
    gold: Sequence[str],
    vector_scores: np.ndarray,
) -> dict[str, dict[str, Any]]:
    """Where the lazy search kept or lost each gold document, for tuning and for the benchmark.

    outcome: ``kept`` (a kept claim cites it), ``cut`` (claims cite it, all below the context limit),
    ``no_claim`` (judged relevant, but no claim cites it), ``judged_irrelevant`` (tested, P(relevant)
    under the threshold) or ``untested``; ``filled`` when a fill passage brought it into the context
    all the same; with its best P(relevant) and its best chunk's rank in the
    vector search's ``vector_scores`` (0 = what plain vector search ranks first).
    """
    snapshot = engine.snapshot
    docs = np.asarray(snapshot.chunk_doc_ids).astype(str)
    order = np.argsort(-vector_scores, kind="stable")
    rank_of = np.empty(len(order), dtype=np.int64)
    rank_of[order] = np.arange(len(order))
    kept_docs = {str(docs[ch]) for c in kept if c.kind == "claim" for ch in c.chunks}
    filled_docs = {str(docs[ch]) for c in kept if c.kind == "passage" for ch in c.chunks}
    claimed_docs = {str(docs[ch]) for c in retrieval.ranked_claims for ch in c.chunks}
    relevant_docs = {str(docs[ch]) for ch in retrieval.relevant_chunks}
    outcomes = {}
    for doc in gold:
        chunks = np.flatnonzero(docs == doc)
        tested = [retrieval.chunk_relevance[int(c)] for c in chunks if int(c) in retrieval.chunk_relevance]
        if doc in kept_docs:
            outcome = "kept"
        elif doc in claimed_docs:
            outcome = "cut"
        elif doc in relevant_docs:
            outcome = "no_claim"
        elif tested:
            outcome = "judged_irrelevant"
        else:
            outcome = "untested"
        outcomes[doc] = {
            "outcome": outcome,
            # not a kept claim's source, but in the context as a fill passage
            # (lazygraph.query.search.lazy.fill)
            "filled": outcome != "kept" and doc in filled_docs,
            "p_relevant": round(max(tested), 3) if tested else None,
            "vector_rank": int(rank_of[chunks].min()) if len(chunks) else None,
        }
    return outcomes


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def summarise(rows: list[dict[str, Any]], budget: int, context_tokens: int) -> dict[str, Any]:
    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_type[row["type"] or "(none)"].append(row)
    seconds = sum(r["lazy_seconds"] for r in rows)
    non_llm = sum(r["lazy_non_llm_seconds"] for r in rows)
    return {
        "budget": budget,
        "context_tokens": context_tokens,
        "n_questions": len(rows),
        "lazy": {
            "mean_recall": _mean([r["lazy_recall"] for r in rows]),
            "mean_recall_claims_only": _mean(
                [r.get("lazy_claims_only_recall", r["lazy_recall"]) for r in rows]
            ),
            "mean_relevance_tests": _mean([r["lazy_relevance_tests"] for r in rows]),
            "mean_llm_tokens": _mean([r["lazy_llm_tokens"] for r in rows]),
            "mean_llm_calls": _mean([r["lazy_llm_calls"] for r in rows]),
            "mean_seconds": _mean([r["lazy_seconds"] for r in rows]),
            "mean_llm_seconds": _mean([r["lazy_llm_seconds"] for r in rows]),
            "mean_non_llm_seconds": _mean([r["lazy_non_llm_seconds"] for r in rows]),
            "non_llm_share": round(non_llm / seconds, 4) if seconds else 0.0,
            "recall_by_type": {t: _mean([r["lazy_recall"] for r in rs]) for t, rs in sorted(by_type.items())},
            "gold_outcomes": _outcome_counts(rows),
            "note": "refine, relevance tests and claim extraction run; the answer call (reduce) is skipped "
            "because it does not change the context",
        },
        **{method: _ranking_summary(method, rows, by_type) for method in baselines()},
        "questions": rows,
    }


def _ranking_summary(
    method: str, rows: list[dict[str, Any]], by_type: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """The recall of a method without relevance tests: it makes no LLM call before the answer."""
    key = f"{method}_recall"
    return {
        "mean_recall": _mean([r[key] for r in rows]),
        "mean_llm_tokens": 0,
        "recall_by_type": {t: _mean([r[key] for r in rs]) for t, rs in sorted(by_type.items())},
        "note": f"{SEARCHES[method].selects} within the same context limit; no answer call is made",
    }


def _outcome_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        for found in row.get("gold_outcomes", {}).values():
            counts[found["outcome"] + (", filled" if found.get("filled") else "")] += 1
    return dict(sorted(counts.items()))


def progress_bar(console: Console) -> Progress:
    """The progress display of the evaluation commands (one bar per task, items done, time spent)."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, console=console)


def write_report(out_file: Path, report: dict[str, Any]) -> None:
    out_file = Path(out_file)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(json.dumps(report, indent=2, default=str))


def check_questions(engine: QueryEngine, questions: list[dict[str, Any]], plan: Plan) -> None:
    """Refuse the run before any model call if a question could not be asked (see query/question.py)."""
    for question in questions:
        try:
            validate_question(question["question"], engine.settings, plan, engine.count_tokens)
        except InputError as exc:
            raise InputError(f"question {question['question_id']}: {exc}") from exc


def run_retrieval_grid(
    engine: QueryEngine,
    questions: list[dict[str, Any]],
    budgets: Sequence[int],
    limits: Sequence[int],
    console: Console,
    rows_path: Path | None = None,
) -> dict[tuple[int, int], dict[str, Any]]:
    """Reports per (budget, context limit); each budget's searches serve every context limit.

    With ``rows_path``, every question's rows are appended to that JSON Lines file as soon as they are
    measured, and a question whose rows are already there (at this budget, for every limit) is not
    searched again: a run that is stopped resumes where it was.
    """
    for method in SEARCHES:  # every search runs on every question
        check_questions(engine, questions, engine.plan(method))
    done = _read_grid_rows(rows_path, console) if rows_path is not None else {}
    rows: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    with progress_bar(console) as progress:
        for budget in budgets:
            task = progress.add_task(f"budget {budget}", total=len(questions))
            for question in questions:
                measured = done.get((question["question_id"], budget), {})
                if not all(limit in measured for limit in limits):
                    measured = evaluate_question(engine, question, budget, limits)
                    if rows_path is not None:
                        append_rows(rows_path, measured.values())
                for limit in limits:
                    rows[(budget, limit)].append(measured[limit])
                progress.advance(task)
    return {key: summarise(value, *key) for key, value in rows.items()}


def _read_grid_rows(path: Path, console: Console) -> dict[tuple[str, int], dict[int, dict[str, Any]]]:
    """(question_id, budget) -> {context limit: row} of a rows file written by an earlier run."""
    found: dict[tuple[str, int], dict[int, dict[str, Any]]] = defaultdict(dict)
    for row in read_row_file(Path(path), ("question_id", "budget", "context_tokens"), console):
        found[(row["question_id"], row["budget"])][row["context_tokens"]] = row
    return found


def run_retrieval_eval(
    settings: Settings,
    index: str,
    questions_file: Path,
    budget: int,
    context_tokens: int,
    limit: int | None,
    out_file: Path,
    console: Console,
    *,
    engine: QueryEngine | None = None,
) -> dict[str, Any]:
    """Evaluate the first ``limit`` questions at one budget and context limit; write and return the report."""
    questions = load_questions(Path(questions_file), limit)
    # Evaluation reads per-chunk data (ranks, breadth, the focus) that only the snapshot holds.
    engine = engine or QueryEngine.open(with_index_source(settings, "snapshot"), index, console=console)
    grid = run_retrieval_grid(engine, questions, [budget], [context_tokens], console)
    report = grid.get((budget, context_tokens)) or summarise([], budget, context_tokens)
    write_report(out_file, report)
    return report
