"""What a query asks of the approximate index: a subquery's similarities and its best-first ranking.

``rank_subquery`` is the approximate counterpart of the exact steps in
``lazygraph.query.search.lazy`` (similarities, concept bonus, BM25 fusion, community ranking); the
lazy search calls it when its snapshot holds a vector index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lazygraph.vectors.ranking import CandidateRanking, QuerySimilarity, candidate_scores

if TYPE_CHECKING:
    from lazygraph.query.snapshot import IndexSnapshot


def query_similarity(snapshot: IndexSnapshot, vector: np.ndarray) -> QuerySimilarity:
    """The ``vectors.candidates`` nearest chunks to ``vector`` from the snapshot's index."""
    index = snapshot.vector_index
    chunks, scores = index.search(vector, index.cfg.candidates)
    return QuerySimilarity(index, vector, chunks, scores)


def rank_subquery(
    snapshot: IndexSnapshot,
    vector: np.ndarray,
    k: int,
    concept_indices: list[int] | None = None,
    concept_boost: float = 0.0,
    bm25: np.ndarray | None = None,
    rrf_k: float | None = None,
) -> tuple[CandidateRanking, QuerySimilarity]:
    """The subquery's community ranking from the index's candidates, and its per-chunk similarities
    (what the relevance rule reads as the similarity signal)."""
    similarity = query_similarity(snapshot, vector)
    cfg = snapshot.vector_index.cfg
    chunks, scores = candidate_scores(snapshot, similarity, cfg, concept_indices, concept_boost, bm25, rrf_k)
    ranking = CandidateRanking(snapshot, chunks, scores, k, similarity, cfg.rerank_community_max)
    return ranking, similarity
