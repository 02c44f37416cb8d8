"""Ranking from the index's candidates against the exact ranking it replaces."""

from __future__ import annotations

import numpy as np
from support.fakes import FakeLLM, two_level_tree

from lazygraph.query.cost import CostRecorder
from lazygraph.query.ranking import CandidateRanking, CommunityRanking, query_similarity, rank_subquery
from lazygraph.query.search.lazy.match import search_subquery
from lazygraph.settings import QuerySettings, VectorIndexSettings
from lazygraph.vectors.ann import VectorIndex


def _snapshot_with_index(candidates: int, seed: int = 0):
    index, members = two_level_tree(n_roots=4, children=3, chunks_per_leaf=5)  # 60 chunks
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((len(index.texts), 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index.embeddings = vectors
    snap = index.snapshot()
    # 4 lists all probed: the search is exhaustive, so only code rounding differs from exact
    cfg = VectorIndexSettings(nlist=4, nprobe=4, candidates=candidates, rerank_community_max=100)
    ann = VectorIndex.train(vectors, len(vectors), cfg)
    ann.add(vectors, np.arange(len(vectors)))
    snap.vector_index = ann
    return snap, members, vectors


def test_with_every_chunk_a_candidate_the_ranking_is_the_exact_one() -> None:
    snap, _, vectors = _snapshot_with_index(candidates=1_000)
    q = vectors[7] + 0.3 * vectors[33]
    q /= np.linalg.norm(q)
    exact_sims = vectors @ q
    exact = CommunityRanking(snap, exact_sims, k=2)
    approx, similarity = rank_subquery(snap, q, k=2)
    assert np.array_equal(approx.rank(snap.roots()), exact.rank(snap.roots()))
    assert np.array_equal(approx.order[:10], exact.order[:10])
    tested_a, tested_e = np.zeros(snap.n_chunks, bool), np.zeros(snap.n_chunks, bool)
    for community in exact.rank(snap.roots()):
        assert approx.take_untested(int(community), 3, tested_a) == exact.take_untested(
            int(community), 3, tested_e
        )
    assert abs(similarity[33] - exact_sims[33]) < 0.02


def test_chunks_outside_the_candidates_rank_below_them_and_are_still_reached() -> None:
    snap, members, vectors = _snapshot_with_index(candidates=3)
    q = vectors[0]
    ranking, similarity = rank_subquery(snap, q, k=2)
    assert ranking.order[0] == 0 and len(ranking.order) == 3
    roots = ranking.rank(snap.roots())
    # the root holding chunk 0 comes first; roots without any candidate come after those with
    holders = {
        int(c) for c in roots if np.intersect1d(members[str(snap.community_ids[c])], ranking.order).size
    }
    assert int(roots[0]) in holders and set(map(int, roots[: len(holders)])) == holders
    # within a community, after its candidates: the rest by decoded similarity (community is small)
    leaf = next(c for c in range(snap.n_communities) if str(snap.community_ids[c]) == "R0.0")
    tested = np.zeros(snap.n_chunks, bool)
    taken = ranking.take_untested(leaf, 5, tested)
    assert taken[0] == 0 and sorted(taken) == members["R0.0"]
    rest = taken[np.count_nonzero(np.isin(taken, ranking.order)) :]
    assert [similarity[c] for c in rest] == sorted((similarity[c] for c in rest), reverse=True)
    assert not ranking.has_untested(leaf, tested)


def test_dense_similarities_put_every_other_chunk_below_the_candidates() -> None:
    snap, _, vectors = _snapshot_with_index(candidates=5)
    dense = snap.similarities(vectors[9])
    assert dense.shape == (snap.n_chunks,)
    top = np.argsort(-dense)[:5]
    assert 9 in top
    assert dense[np.setdiff1d(np.arange(snap.n_chunks), top)].max() < dense[top].min()
    assert len(query_similarity(snap, vectors[9]).known) == 5


def test_concept_chunks_join_the_candidates_with_their_bonus() -> None:
    snap, _, vectors = _snapshot_with_index(candidates=2)
    snap.concept_chunks = type(snap.concept_chunks)(  # concept 0 mentioned by chunk 50 only
        (np.ones(1, np.float32), np.asarray([50]), np.asarray([0, 1])), shape=(1, snap.n_chunks)
    )
    ranking, _ = rank_subquery(snap, vectors[0], k=2, concept_indices=[0], concept_boost=5.0)
    assert ranking.order[0] == 50 and 0 in ranking.order


def test_search_spends_its_budget_over_the_candidate_ranking() -> None:
    snap, _, vectors = _snapshot_with_index(candidates=4)
    ranking, _ = rank_subquery(snap, vectors[3], k=2)
    assert isinstance(ranking, CandidateRanking)
    llm = FakeLLM(is_relevant=lambda question, passage: passage.endswith("\nchunk 3"))
    result = search_subquery(snap, ranking, "q", 12, llm, QuerySettings(), CostRecorder())
    assert 0 < result.tests <= 12
    assert 3 in result.relevant
