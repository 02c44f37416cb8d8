"""Calibrating the relevance assessor on labelled questions.

The lazy search keeps a chunk when its score reaches ``query.relevance.threshold``. A small
model's P(yes) is not a calibrated probability: where its scores for relevant and irrelevant passages
separate depends on the model and the prompt. This measures it. For each question, the passages most
similar to it (the ones a search tests first) are scored; a passage is labelled relevant when its
document is one of the question's gold ``supporting_doc_ids``. The report gives, per prompt version,
how well the scores separate the two (ROC AUC) and, per threshold, the share of gold and of other
passages kept, with the threshold that keeps at least ``target_recall`` of the gold passages.

Calibrate on questions you do not evaluate on (``--skip``), or the evaluation flatters the threshold.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import roc_curve

from lazygraph.errors import ConfigError
from lazygraph.eval.retrieval import check_questions, load_questions, progress_bar, write_report
from lazygraph.eval.signals import fit_combinations, signal_aucs
from lazygraph.eval.stats import roc_auc
from lazygraph.llm.prompts import load_prompt
from lazygraph.query.engine import QueryEngine
from lazygraph.query.source import with_index_source
from lazygraph.settings import Settings

THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(1, 20))


def threshold_table(scores: Sequence[float], labels: Sequence[bool]) -> list[dict[str, float]]:
    """Per threshold of ``THRESHOLDS``, the share of gold and of other passages scoring at or above it
    (0.0 for a kind with no passages)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    gold_kept = other_kept = np.zeros(len(THRESHOLDS))
    if len(s):
        with warnings.catch_warnings():  # a kind with no passages has no rate (nan): reported as 0.0
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            other_rate, gold_rate, cuts = roc_curve(y, s, drop_intermediate=False)
        # The cuts fall from +inf; threshold t keeps what the last cut at or above t keeps.
        at = np.searchsorted(-cuts, -np.asarray(THRESHOLDS), side="right") - 1
        gold_kept, other_kept = np.nan_to_num(gold_rate[at]), np.nan_to_num(other_rate[at])
    return [
        {"threshold": t, "gold_kept": round(float(g), 4), "other_kept": round(float(o), 4)}
        for t, g, o in zip(THRESHOLDS, gold_kept, other_kept, strict=True)
    ]


def suggest_threshold(table: list[dict[str, float]], target_recall: float) -> float | None:
    """The highest threshold that still keeps ``target_recall`` of the gold passages."""
    fitting = [row["threshold"] for row in table if row["gold_kept"] >= target_recall]
    return max(fitting) if fitting else None


def calibrate_relevance(
    settings: Settings,
    index: str,
    questions_file: Path,
    out_file: Path,
    console: Console,
    *,
    skip: int = 0,
    limit: int | None = None,
    top: int = 10,
    prompt_versions: Sequence[int] = (),
    target_recall: float = 0.9,
    engine: QueryEngine | None = None,
) -> dict[str, Any]:
    """Score the ``top`` most similar passages of each question with each prompt version; write a report."""
    if top < 1:
        raise ConfigError("--top must be at least 1")
    if not 0 < target_recall <= 1:
        raise ConfigError("--target-recall must be in (0, 1]")
    questions = load_questions(Path(questions_file), None if limit is None else skip + limit)[skip:]
    versions = list(prompt_versions) or [settings.query.prompts.relevance]
    prompts = [load_prompt("relevance", v) for v in versions]
    # Evaluation reads per-chunk data (ranks, breadth, the focus) that only the snapshot holds.
    engine = engine or QueryEngine.open(with_index_source(settings, "snapshot"), index, console=console)
    check_questions(engine, questions, engine.plan())
    client = engine.roles(engine.plan().synthesis_role).relevance
    snapshot = engine.snapshot
    docs = np.asarray(snapshot.chunk_doc_ids).astype(str)
    rows: list[dict[str, Any]] = []
    with progress_bar(console) as progress:
        task = progress.add_task("relevance calibration", total=len(questions))
        for question in questions:
            vector = engine.encode([question["question"]])[0]
            sims = snapshot.similarities(vector)
            chunks = np.argsort(-sims, kind="stable")[:top]
            # The passages the assessor reads in a query: each chunk's sentences bearing on the question
            # (query.relevance_focus_tokens, else query.focus_tokens).
            passages = engine.focus().passages(
                [int(c) for c in chunks],
                vector,
                question["question"],
                max_tokens=settings.query.assessor_focus_tokens,
            )
            # The other two signals: similarity, and BM25 relative to the question's best chunk anywhere.
            bm25 = snapshot.bm25(question["question"], settings.lexical)
            bm25 = bm25 / bm25.max() if bm25.size and bm25.max() > 0 else bm25
            scores = {
                f"v{p.version}": client.relevance(question["question"], passages, prompt=p) for p in prompts
            }
            gold = set(question["supporting_doc_ids"])
            for rank, chunk in enumerate(chunks):
                rows.append(
                    {
                        "question_id": question["question_id"],
                        "rank": rank,
                        "doc_id": str(docs[chunk]),
                        "gold": str(docs[chunk]) in gold,
                        "similarity": round(float(sims[chunk]), 4),
                        "bm25": round(float(bm25[chunk]), 4) if bm25.size else 0.0,
                        "p_yes": {v: round(float(s[rank]), 4) for v, s in scores.items()},
                    }
                )
            progress.advance(task)
    report = summarise_calibration(rows, [f"v{p.version}" for p in prompts], target_recall)
    report.update({"n_questions": len(questions), "skip": skip, "top": top, "passages": rows})
    write_report(out_file, report)
    return report


def summarise_calibration(
    rows: list[dict[str, Any]], versions: Sequence[str], target_recall: float
) -> dict[str, Any]:
    labels = [r["gold"] for r in rows]
    by_version = {}
    for v in versions:
        scores = [r["p_yes"][v] for r in rows]
        table = threshold_table(scores, labels)
        auc = roc_auc(scores, labels)
        by_version[v] = {
            "roc_auc": None if auc is None else round(auc, 4),
            "suggested_threshold": suggest_threshold(table, target_recall),
            "thresholds": table,
        }
    # Signals alone and fitted combinations, for the prompt in force (the first version asked).
    signals = signal_aucs(rows, versions[0]) if rows else {}
    combinations = fit_combinations(rows, versions[0]) if rows else {}
    for fit in combinations.values():
        if fit is not None:
            scores = fit.pop("out_of_fold_scores")
            table = threshold_table(scores, labels)
            fit["suggested_threshold"] = suggest_threshold(table, target_recall)
            fit["thresholds"] = table
    return {
        "n_passages": len(rows),
        "n_gold_passages": int(sum(labels)),
        "target_recall": target_recall,
        "prompts": by_version,
        "signals": signals,
        "combinations": combinations,
    }
