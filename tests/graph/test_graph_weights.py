"""NPMI weights and pruning thresholds (pure functions)."""

from __future__ import annotations

import math

import pytest

from lazygraph.graph.cooccurrence import max_chunk_frequency, npmi
from lazygraph.settings import GraphSettings
from lazygraph.stats import distribution


def test_npmi_bounds() -> None:
    # always together -> 1
    assert npmi(5, 5, 5, 5) == pytest.approx(1.0)
    assert npmi(3, 3, 3, 10) == pytest.approx(1.0)
    # independent -> 0
    assert npmi(25, 50, 50, 100) == pytest.approx(0.0, abs=1e-12)
    # less than chance -> negative
    assert npmi(1, 50, 50, 100) < 0


def test_npmi_matches_its_definition() -> None:
    c, fa, fb, n = 4, 10, 8, 200
    p_ab, p_a, p_b = c / n, fa / n, fb / n
    assert npmi(c, fa, fb, n) == pytest.approx(math.log(p_ab / (p_a * p_b)) / -math.log(p_ab))


def test_max_chunk_frequency_has_a_floor_for_small_corpora() -> None:
    cfg = GraphSettings(max_document_frequency=0.05, df_pruning_floor=10)
    assert max_chunk_frequency(cfg, 20) == 10
    assert max_chunk_frequency(cfg, 10_000) == 500


def test_distribution() -> None:
    import numpy as np

    d = distribution(np.array([1, 2, 3, 4, 10]))
    assert (d["n"], d["min"], d["p50"], d["max"], d["mean"]) == (5, 1.0, 3.0, 10.0, 4.0)
    assert distribution(np.array([]))["n"] == 0
