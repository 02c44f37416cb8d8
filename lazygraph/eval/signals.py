"""How well each relevance signal separates gold passages from the rest, alone and combined.

Three signals are known for a candidate passage before or after its LLM test: the assessor's P(yes),
the cosine similarity of the passage to the question, and its BM25 score (normalised by the best
BM25 score of that question over the whole index, so that scores of long and short questions are
comparable). ``fit_combinations`` fits a logistic regression on the calibration passages for two
combinations — the signals without the LLM (similarity + BM25), and all three — and reports each
one's ROC AUC *out of fold*: passages are scored by a model fitted without their question
(``GroupKFold`` over questions), so neither the AUC nor the threshold table is measured on data the
weights were fitted on. The final coefficients are fitted on all calibration passages.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from lazygraph.eval.stats import roc_auc

# A combination is a name and the row features it reads.
NO_LLM = ("similarity", "bm25")


def signal_aucs(rows: Sequence[dict[str, Any]], p_yes_key: str) -> dict[str, float | None]:
    """ROC AUC of each signal on its own."""
    labels = [r["gold"] for r in rows]
    return {
        "p_yes": _round(roc_auc([r["p_yes"][p_yes_key] for r in rows], labels)),
        "similarity": _round(roc_auc([r["similarity"] for r in rows], labels)),
        "bm25": _round(roc_auc([r["bm25"] for r in rows], labels)),
    }


def feature_matrix(rows: Sequence[dict[str, Any]], features: Sequence[str], p_yes_key: str) -> np.ndarray:
    columns = [[r["p_yes"][p_yes_key] if f == "p_yes" else r[f] for r in rows] for f in features]
    return np.asarray(columns, dtype=np.float64).T


def fit_combination(
    rows: Sequence[dict[str, Any]], features: Sequence[str], p_yes_key: str, folds: int = 5
) -> dict[str, Any] | None:
    """Logistic regression over ``features``: out-of-fold scores and AUC, and the weights fitted on all
    rows; None when there are too few questions or only one kind of label."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold, cross_val_predict

    labels = np.asarray([bool(r["gold"]) for r in rows])
    groups = np.asarray([r["question_id"] for r in rows])
    n_groups = len(set(groups.tolist()))
    if len(set(labels.tolist())) < 2 or n_groups < 2:
        return None
    x = feature_matrix(rows, features, p_yes_key)
    by_question = GroupKFold(n_splits=min(folds, n_groups))
    with warnings.catch_warnings():  # a fold with one label kind warns; its scores are still usable
        warnings.simplefilter("ignore")
        out_of_fold = cross_val_predict(
            LogisticRegression(), x, labels, groups=groups, cv=by_question, method="predict_proba"
        )[:, 1]
    fitted = LogisticRegression().fit(x, labels)
    return {
        "features": list(features),
        "coefficients": {f: round(float(w), 4) for f, w in zip(features, fitted.coef_[0], strict=True)},
        "intercept": round(float(fitted.intercept_[0]), 4),
        "roc_auc_out_of_fold": _round(roc_auc(out_of_fold.tolist(), labels.tolist())),
        "out_of_fold_scores": [round(float(s), 4) for s in out_of_fold],
    }


def fit_combinations(rows: Sequence[dict[str, Any]], p_yes_key: str) -> dict[str, Any]:
    return {
        "similarity+bm25": fit_combination(rows, NO_LLM, p_yes_key),
        "p_yes+similarity+bm25": fit_combination(rows, ("p_yes", *NO_LLM), p_yes_key),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
