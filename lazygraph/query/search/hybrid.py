"""The hybrid baseline (``--method hybrid``): vector similarity and BM25 fused by reciprocal rank.

Dense vectors miss what only an exact term pins down (a rare name, a number, a code); BM25 misses
paraphrase. Reciprocal rank fusion (Cormack, Clarke & Buettcher 2009, "Reciprocal Rank Fusion
outperforms Condorcet and individual Rank Learning Methods") needs no score calibration between the
two: a chunk scores sum over rankings of 1 / (k + rank). Every chunk has a vector rank; only chunks
with a query term (BM25 > 0) have a lexical one. Like the vector baseline it calls no model before
the answer and tests no relevance: it reuses ``VectorSearch``'s context cut and answer, only the
scores differ. Without lexical statistics (an index built before chunk_terms) the BM25 ranking is
empty and the order is exactly the vector order.
"""

from __future__ import annotations

import numpy as np

from lazygraph.llm.factory import LLMRoles
from lazygraph.query.cost import CostRecorder
from lazygraph.query.search.base import Plan
from lazygraph.query.search.vector import PassageRetrieval, VectorSearch


def ranks(scores: np.ndarray) -> np.ndarray:
    """The 1-based rank of every score, highest first; equal scores share the best rank among them."""
    descending = np.sort(-scores)
    return np.searchsorted(descending, -scores, side="left") + 1


def reciprocal_rank(scores: np.ndarray, k: float, retrieved: np.ndarray | None = None) -> np.ndarray:
    """1 / (k + rank) of every chunk in one ranking; 0 for chunks the ranking did not retrieve, which
    must score below every retrieved one (so only the retrieved few are sorted)."""
    if retrieved is None:
        return 1.0 / (k + ranks(scores))
    contribution = np.zeros(len(scores), dtype=np.float64)
    chosen = np.flatnonzero(retrieved)
    contribution[chosen] = 1.0 / (k + ranks(scores[chosen]))
    return contribution


def fuse(similarities: np.ndarray, bm25: np.ndarray, k: float) -> np.ndarray:
    """Reciprocal rank fusion of the vector ranking (every chunk) and the BM25 ranking (chunks with a
    query term). Float64: deep ranks differ by less than float32 resolves."""
    return reciprocal_rank(similarities, k) + reciprocal_rank(bm25, k, retrieved=bm25 > 0)


class HybridSearch(VectorSearch):
    """The vector search with its scores replaced by the fused ranks (its cut and answer unchanged)."""

    def retrieve(
        self, question: str, plan: Plan, roles: LLMRoles | None, recorder: CostRecorder
    ) -> PassageRetrieval:
        similarities = super().retrieve(question, plan, roles, recorder).scores
        lexical = self.engine.settings.lexical
        with recorder.stage("select"):
            bm25 = self.snapshot.bm25(question, lexical)
            fused = fuse(similarities, bm25, lexical.rrf_k)
        recorder.log(f"hybrid: vector ranks fused with the BM25 ranks of {int((bm25 > 0).sum())} chunks")
        return PassageRetrieval(fused)
