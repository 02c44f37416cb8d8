"""Relevance signals alone and combined: per-signal AUC and out-of-fold fitted combinations."""

from __future__ import annotations

import numpy as np

from lazygraph.eval.relevance import summarise_calibration
from lazygraph.eval.signals import feature_matrix, fit_combination, signal_aucs


def _rows(n_questions: int = 12, seed: int = 3) -> list[dict]:
    """Gold passages have higher BM25 and similarity; P(yes) is noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n_questions):
        for rank in range(8):
            gold = rank in (0, 3)
            rows.append(
                {
                    "question_id": f"q{q}",
                    "gold": gold,
                    "similarity": float(0.5 + 0.2 * gold + rng.normal(0, 0.05)),
                    "bm25": float(0.3 + 0.5 * gold + rng.normal(0, 0.1)),
                    "p_yes": {"v2": float(rng.uniform())},
                }
            )
    return rows


def test_each_signal_is_scored_on_its_own() -> None:
    aucs = signal_aucs(_rows(), "v2")
    assert aucs["bm25"] > 0.95 and aucs["similarity"] > 0.95
    assert 0.2 < aucs["p_yes"] < 0.8  # noise


def test_feature_matrix_reads_p_yes_of_the_named_prompt() -> None:
    rows = _rows(1)
    x = feature_matrix(rows, ("p_yes", "bm25"), "v2")
    assert x.shape == (8, 2) and x[0, 0] == rows[0]["p_yes"]["v2"] and x[0, 1] == rows[0]["bm25"]


def test_the_combination_is_scored_out_of_fold() -> None:
    fit = fit_combination(_rows(), ("similarity", "bm25"), "v2")
    assert fit is not None and fit["roc_auc_out_of_fold"] > 0.95
    assert fit["coefficients"]["bm25"] > 0 and fit["coefficients"]["similarity"] > 0
    assert len(fit["out_of_fold_scores"]) == 12 * 8


def test_no_fit_without_two_questions_or_two_label_kinds() -> None:
    assert fit_combination(_rows(1), ("bm25",), "v2") is None
    no_gold = [dict(r, gold=False) for r in _rows()]
    assert fit_combination(no_gold, ("bm25",), "v2") is None


def test_the_calibration_summary_reports_signals_and_combinations() -> None:
    summary = summarise_calibration(_rows(), ["v2"], target_recall=0.9)
    assert set(summary["signals"]) == {"p_yes", "similarity", "bm25"}
    combined = summary["combinations"]["p_yes+similarity+bm25"]
    assert combined["roc_auc_out_of_fold"] > 0.9 and "out_of_fold_scores" not in combined
    assert combined["suggested_threshold"] is not None and combined["thresholds"]
