"""Deciding that a chunk bears on a subquery: the assessor's P(yes) alone, or combined with the two
signals known without an LLM call (cosine similarity and BM25), with an optional cascade.

A small assessor's P(yes) separates gold passages from others no better than the embedding does,
but the two make different mistakes, and BM25 catches exact names the embedding blurs; a logistic
combination of the three (weights fitted by ``lazygraph eval relevance``) separates them better than
any one alone. The cascade spends the relevance budget only where the cheap signals are unsure:
a chunk whose prior (similarity and BM25 only) is very high is taken without a test, one whose prior
is very low is skipped without a test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lazygraph.query.snapshot import IndexSnapshot
from lazygraph.settings import LazySearchSettings, LexicalSettings, RelevanceRuleSettings


@dataclass(frozen=True)
class ChunkSignals:
    """The no-LLM signals of every chunk for one subquery."""

    similarity: np.ndarray  # cosine similarity to the subquery's search vector
    bm25: np.ndarray  # BM25 of the subquery's text over the best chunk's (0..1)

    @classmethod
    def of(
        cls, snapshot: IndexSnapshot, vector: np.ndarray, text: str, lexical: LexicalSettings
    ) -> ChunkSignals:
        return cls.from_scores(snapshot.similarities(vector), snapshot.bm25(text, lexical))

    @classmethod
    def from_scores(cls, similarity: np.ndarray, bm25: np.ndarray) -> ChunkSignals:
        """From the plain similarities and the raw BM25 scores (scaled here to the best chunk's)."""
        best = float(bm25.max()) if bm25.size else 0.0
        return cls(similarity, bm25 / best if best > 0 else bm25)


class RelevanceRule:
    """One query's relevance decisions under ``query.relevance``."""

    def __init__(self, qs: LazySearchSettings, lexical: bool = True) -> None:
        """``lexical``: whether the index has BM25 statistics. Without them (an index built before
        the chunk_terms table) every BM25 signal would read 0, which the fitted weights never saw:
        relevance is then P(yes) against its threshold, with no cascade."""
        self.settings: RelevanceRuleSettings = qs.relevance
        self.combined = self.settings.rule == "combined" and lexical
        self.cascade = self.settings.cascade and lexical
        self.threshold = self.settings.threshold_for("combined" if self.combined else "p_yes")

    @property
    def needs_signals(self) -> bool:
        return self.combined or self.cascade

    def prejudge(self, chunk: int, signals: ChunkSignals | None) -> bool | None:
        """True: relevant without a test; False: skipped without a test; None: the LLM must judge."""
        s = self.settings
        if not self.cascade or signals is None:
            return None
        prior = self.prior(chunk, signals)
        if prior >= s.accept_above:
            return True
        if prior < s.reject_below:
            return False
        return None

    def prior(self, chunk: int, signals: ChunkSignals) -> float:
        """P(relevant) from similarity and BM25 alone: the cascade's estimate before any test."""
        s = self.settings
        return _logistic(
            s.prior_intercept
            + s.prior_similarity * signals.similarity[chunk]
            + s.prior_bm25 * signals.bm25[chunk]
        )

    def priors(self, signals: ChunkSignals) -> np.ndarray:
        """``prior`` of every chunk at once."""
        s = self.settings
        x = s.prior_intercept + s.prior_similarity * signals.similarity + s.prior_bm25 * signals.bm25
        return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))

    def score(self, p_yes: float, chunk: int, signals: ChunkSignals | None) -> float:
        """The score compared with ``threshold``: P(yes) itself, or the combined probability."""
        s = self.settings
        if not self.combined or signals is None:
            return p_yes
        return _logistic(
            s.intercept
            + s.p_yes * p_yes
            + s.similarity * signals.similarity[chunk]
            + s.bm25 * signals.bm25[chunk]
        )

    def is_relevant(self, score: float) -> bool:
        return score >= self.threshold


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-float(x)))
