"""Relevance decisions: P(yes) alone, the fitted combination, and the cascade that skips LLM tests."""

from __future__ import annotations

import math

import numpy as np
from support.fakes import FakeLLM, two_level_tree

from lazygraph.query.cost import CostRecorder
from lazygraph.query.ranking import CommunityRanking
from lazygraph.query.search.lazy.match import search_subquery
from lazygraph.query.search.lazy.relevance import ChunkSignals, RelevanceRule
from lazygraph.settings import QuerySettings

SIGNALS = ChunkSignals(similarity=np.array([0.9, 0.5, 0.1]), bm25=np.array([1.0, 0.4, 0.0]))


def test_the_published_rule_is_p_yes_against_the_relevance_threshold() -> None:
    rule = RelevanceRule(QuerySettings(relevance={"rule": "p_yes", "cascade": False, "threshold": 0.3}))
    assert rule.score(0.31, 0, SIGNALS) == 0.31 and rule.is_relevant(0.31) and not rule.is_relevant(0.29)
    assert not rule.needs_signals and rule.prejudge(0, SIGNALS) is None


def test_the_combined_rule_is_the_fitted_logistic_function() -> None:
    weights = {"rule": "combined", "p_yes": 2.0, "similarity": 3.0, "bm25": 1.0, "intercept": -4.0}
    rule = RelevanceRule(QuerySettings(relevance={**weights, "threshold": 0.5}))
    expected = 1 / (1 + math.exp(-(-4.0 + 2.0 * 0.2 + 3.0 * 0.9 + 1.0 * 1.0)))
    assert math.isclose(rule.score(0.2, 0, SIGNALS), expected)
    assert rule.is_relevant(rule.score(0.2, 0, SIGNALS))  # similar and lexically close: kept
    assert not rule.is_relevant(rule.score(0.2, 2, SIGNALS))  # neither: dropped at the same P(yes)


def test_the_cascade_settles_only_confident_chunks() -> None:
    cascade = {
        "rule": "p_yes",
        "cascade": True,
        "prior_similarity": 6.0,
        "prior_bm25": 2.0,
        "prior_intercept": -5.0,
    }
    rule = RelevanceRule(QuerySettings(relevance={**cascade, "accept_above": 0.9, "reject_below": 0.1}))
    # priors: chunk 0 ~0.95, chunk 1 ~0.31, chunk 2 ~0.01
    assert [rule.prejudge(c, SIGNALS) for c in range(3)] == [True, None, False]


def test_settled_chunks_cost_no_test_and_the_rest_are_tested() -> None:
    index, members = two_level_tree(n_roots=2, children=1, chunks_per_leaf=3)
    snap = index.snapshot()
    n = snap.n_chunks
    similarity = np.full(n, 0.5)
    similarity[members["R0"][0]] = 0.99  # taken without a test
    similarity[members["R1"]] = 0.0  # skipped without a test
    signals = ChunkSignals(similarity=similarity, bm25=np.zeros(n))
    qs = QuerySettings(
        relevance={
            "rule": "p_yes",
            "cascade": True,
            "prior_bm25": 0.0,
            "prior_similarity": 10.0,
            "prior_intercept": -5.0,
            "accept_above": 0.99,
            "reject_below": 0.01,
        }
    )
    llm = FakeLLM(is_relevant=lambda q, p: True)
    ranking = CommunityRanking(snap, similarity.astype(np.float32), qs.community_rank_k)
    result = search_subquery(
        snap, ranking, "question", 10, llm, qs, CostRecorder(), "sq", rule=RelevanceRule(qs), signals=signals
    )
    accepted, *others = members["R0"]
    assert accepted in result.relevant and result.tested[accepted] == 1.0
    # The search sent only the unsure chunks; the budget it left went to the skipped ones afterwards.
    assert llm.relevance_batches == [len(others), len(members["R1"])]
    assert result.tests == len(others) + len(members["R1"])


def test_without_budget_left_skipped_chunks_are_never_sent_to_the_model() -> None:
    index, members = two_level_tree(n_roots=2, children=1, chunks_per_leaf=3)
    snap = index.snapshot()
    similarity = np.full(snap.n_chunks, 0.5)
    similarity[members["R0"]] = 0.9  # ranked first, and skipped by the prior below
    signals = ChunkSignals(similarity=np.where(similarity > 0.8, 0.0, 0.5), bm25=np.zeros(snap.n_chunks))
    qs = QuerySettings(
        relevance={
            "rule": "p_yes",
            "cascade": True,
            "accept_above": 1.0,
            "prior_bm25": 0.0,
            "prior_similarity": 10.0,
            "prior_intercept": -5.0,
            "reject_below": 0.01,
        }
    )
    llm = FakeLLM(is_relevant=lambda q, p: True)
    ranking = CommunityRanking(snap, similarity.astype(np.float32), qs.community_rank_k)
    result = search_subquery(
        snap, ranking, "question", 3, llm, qs, CostRecorder(), "sq", rule=RelevanceRule(qs), signals=signals
    )
    assert all(result.tested.get(c) == 0.0 for c in members["R0"])  # judged, never sent to the model
    assert result.tests == sum(llm.relevance_batches) == 3


def test_the_second_look_spends_the_budget_left_on_the_skipped_chunks_best_prior_first() -> None:
    index, members = two_level_tree(n_roots=2, children=1, chunks_per_leaf=3)
    for i in members["R1"]:
        index.texts[i] += " REL"
    snap = index.snapshot()
    similarity = np.full(snap.n_chunks, 0.5)
    similarity[members["R1"]] = [0.05, 0.2, 0.1]  # all skipped by the prior
    signals = ChunkSignals(similarity=similarity, bm25=np.zeros(snap.n_chunks))
    qs = QuerySettings(
        relevance={
            "rule": "p_yes",
            "cascade": True,
            "accept_above": 1.0,
            "prior_bm25": 0.0,
            "prior_similarity": 10.0,
            "prior_intercept": -5.0,
            "reject_below": 0.1,
        }
    )
    llm = FakeLLM(is_relevant=lambda q, p: "REL" in p)
    ranking = CommunityRanking(snap, similarity.astype(np.float32), qs.community_rank_k)
    recorder = CostRecorder(trace_enabled=True)
    result = search_subquery(
        snap, ranking, "question", 6, llm, qs, recorder, "sq", rule=RelevanceRule(qs), signals=signals
    )
    assert result.tests == 6 and llm.relevance_batches == [3, 3]  # R0's three, then R1's on a second look
    first, second, third = members["R1"]
    assert result.relevant == [second, third, first]  # tested best prior first
    assert any("second look: 3 of 3 skipped chunks tested, 3 relevant" in line for line in recorder.trace)


def test_communities_the_cascade_skips_whole_are_not_misses() -> None:
    index, members = two_level_tree(n_roots=5, children=1, chunks_per_leaf=2)
    for i in members["R4"]:
        index.texts[i] += " REL"
    snap = index.snapshot()
    similarity = np.zeros(snap.n_chunks)
    for r in range(5):  # ranked R0 > R1 > ... ; R0-R2 are skipped by the prior, R3 and R4 are tested
        similarity[members[f"R{r}"]] = [0.9, 0.8, 0.7, 0.5, 0.4][r]
    skipped = members["R0"] + members["R1"] + members["R2"]
    prior = np.where(np.isin(np.arange(snap.n_chunks), skipped), 0.0, 0.5)
    signals = ChunkSignals(similarity=prior, bm25=np.zeros(snap.n_chunks))
    qs = QuerySettings(
        z_successive_misses=2,
        relevance={
            "rule": "p_yes",
            "cascade": True,
            "accept_above": 1.0,
            "prior_bm25": 0.0,
            "prior_similarity": 10.0,
            "prior_intercept": -5.0,
            "reject_below": 0.01,
        },
    )
    llm = FakeLLM(is_relevant=lambda q, p: "REL" in p)
    ranking = CommunityRanking(snap, similarity.astype(np.float32), qs.community_rank_k)
    result = search_subquery(
        snap, ranking, "question", 4, llm, qs, CostRecorder(), "sq", rule=RelevanceRule(qs), signals=signals
    )
    # Three skipped communities did not end the round (z = 2): R3 (a tested miss) and R4 were reached.
    assert set(members["R4"]) <= set(result.relevant)
    assert result.tests == 4  # only R3's and R4's chunks were sent to the assessor


def test_without_lexical_statistics_the_default_rule_falls_back_to_p_yes() -> None:
    qs = QuerySettings()  # the default rule: combined, with the cascade; P(yes) alone is calibrated at 0.4
    with_terms, without = RelevanceRule(qs), RelevanceRule(qs, lexical=False)
    assert with_terms.needs_signals and not without.needs_signals
    assert without.prejudge(2, SIGNALS) is None  # no cascade
    assert without.score(0.45, 2, SIGNALS) == 0.45 and without.is_relevant(0.45)
    assert not without.is_relevant(0.35)
    assert not with_terms.is_relevant(with_terms.score(0.45, 2, SIGNALS))  # dissimilar, no shared term
