"""The statistics every evaluation reports: ROC AUC, intervals of a proportion, a sign test, agreement
rates, and the paired bootstrap of a difference between two methods over the same questions.

Kept apart from the measuring and judging so that every figure a report gives can be checked by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations

import numpy as np
from scipy.stats import binomtest
from sklearn.metrics import roc_auc_score

# Two-sided 95 %: the normal quantile at 0.975.
Z95 = 1.959963984540054


def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """P(a random relevant passage scores above a random irrelevant one); ties count half. None
    without passages of both kinds."""
    y = np.asarray(labels, dtype=bool)
    if y.all() or not y.any():
        return None
    return float(roc_auc_score(y, np.asarray(scores, dtype=np.float64)))


def wilson_interval(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion; (0, 1) when there is nothing to estimate from.

    ``successes`` may be fractional (a question's mean score counts as that share of a success): for
    scores in [0, 1] the variance is at most that of a 0/1 outcome with the same mean, so the interval
    is conservative rather than too narrow.
    """
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial (sign) test of wins against losses, ties already left out; 1.0 with
    no decided pair (nothing contradicts "no difference")."""
    n = wins + losses
    if n == 0:
        return 1.0
    return float(binomtest(wins, n, 0.5, alternative="two-sided").pvalue)


def agreement(groups: Sequence[Sequence[str]]) -> tuple[float | None, int]:
    """Share of agreeing pairs among every pair of verdicts inside each group, and the number of pairs.

    With two verdicts per group (the usual two orders, or two trials) it is the share of groups whose
    verdicts agree. None when no group holds two verdicts.
    """
    agreeing = pairs = 0
    for verdicts in groups:
        for first, second in combinations(verdicts, 2):
            pairs += 1
            agreeing += first == second
    return (agreeing / pairs if pairs else None, pairs)


def rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


BOOTSTRAP_SAMPLES = 10_000


def paired_difference(lazy: dict[str, float], other: dict[str, float], seed: int = 0) -> dict:
    """Mean of a score of both on their common questions (by question id), the difference and its 95 %
    paired-bootstrap interval over questions, and on how many questions the first is ahead or behind."""
    common = sorted(set(lazy) & set(other))
    if not common:
        none = {"questions": 0, "lazy": 0.0, "other": 0.0, "difference": 0.0, "ahead": 0, "behind": 0}
        return {**none, "interval": (0.0, 0.0)}
    a = np.array([lazy[q] for q in common])
    b = np.array([other[q] for q in common])
    diff = a - b
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(BOOTSTRAP_SAMPLES, len(diff)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {
        "questions": len(common),
        "lazy": float(a.mean()),
        "other": float(b.mean()),
        "difference": float(diff.mean()),
        "interval": (float(low), float(high)),
        "ahead": int((diff > 0).sum()),
        "behind": int((diff < 0).sum()),
    }
