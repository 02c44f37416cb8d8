"""Context fill: the tokens the claims leave free go to focused passages, best estimate first."""

from __future__ import annotations

import numpy as np
import pytest
from support.fakes import FakeLLM, HashEmbedder, TinyIndex, fake_roles, with_terms

from lazygraph.query.engine import QueryEngine
from lazygraph.query.evidence import Claim, Evidence
from lazygraph.query.search.lazy.fill import (
    FillCandidates,
    fill_context,
    interleave_themes,
    rank_fill_candidates,
)
from lazygraph.query.search.lazy.reduce import render_evidence
from lazygraph.query.search.lazy.relevance import ChunkSignals, RelevanceRule
from lazygraph.query.snapshot import build_snapshot
from lazygraph.settings import LexicalSettings, QuerySettings, load_settings

TEXTS = [
    "The tide rises twice a day because the moon pulls the ocean.",
    "Tide tables list the tide times of each harbour.",
    "Bread dough rises because yeast ferments sugar.",
    "A volcano erupts when magma breaks the crust.",
    "The moon orbits the earth every month.",
]


def _snapshot(lexical: bool = True):
    index = TinyIndex(texts=list(TEXTS))
    index.communities = {"all": (0, None)}
    index.memberships = [(i, 0, "all") for i in range(len(TEXTS))]
    embedder = HashEmbedder()
    arrow = with_terms(index, embedder) if lexical else index.arrow(embedder)
    return build_snapshot("memory://fill", (), arrow), embedder


def _candidates(assessed: dict[int, float], **query) -> FillCandidates:
    snap, embedder = _snapshot()
    qs = QuerySettings(**query)
    vector = embedder.encode(["When does the tide rise?"])[0]
    return rank_fill_candidates(
        snap, "When does the tide rise?", vector, assessed, RelevanceRule(qs), qs, LexicalSettings()
    )


def test_candidates_rank_by_the_prior_whatever_the_assessor_said() -> None:
    free = _candidates({}, context_fill_min=0.0)
    assert free.chunks[:2] == [0, 1]  # the two tide chunks lead on similarity and BM25 alone
    assert free.scores == sorted(free.scores, reverse=True)
    # The assessor turned chunk 0 down and judged chunk 4 relevant: the order stays the prior's.
    judged = _candidates({0: 0.0, 4: 0.99}, context_fill_min=0.0)
    assert judged.chunks == free.chunks and judged.scores == free.scores


def test_the_assessed_order_puts_the_assessor_verdicts_in_place_of_the_priors() -> None:
    judged = _candidates({0: 0.0, 4: 0.99}, context_fill_order="assessed", context_fill_min=0.0)
    assert judged.chunks[0] == 4 and judged.chunks[-1] == 0  # turned down: last, but not left out
    assert judged.scores[0] == 0.99
    floored = _candidates({0: 0.0, 4: 0.99}, context_fill_order="assessed", context_fill_min=0.01)
    assert 0 not in floored.chunks and floored.chunks[0] == 4


def test_subquery_targets_bring_each_hops_chunks_with_their_best_prior() -> None:
    """A question about the tide with a subquery about volcanoes: with ``context_fill_targets:
    subqueries`` the volcano chunk joins the candidates on the subquery's prior; with the question
    alone it stays under the floor."""
    snap, embedder = _snapshot()
    question, sub = "When does the tide rise?", "When does a volcano erupt?"
    vectors = embedder.encode([question, sub])
    rule_of = lambda qs: RelevanceRule(qs)  # noqa: E731

    def ranked(targets: str) -> FillCandidates:
        qs = QuerySettings(context_fill_targets=targets, context_fill_min=0.3)
        return rank_fill_candidates(
            snap, question, vectors[0], {}, rule_of(qs), qs, LexicalSettings(), "local", [(sub, vectors[1])]
        )

    alone, with_sub = ranked("question"), ranked("subqueries")
    assert 3 not in alone.chunks and 3 in with_sub.chunks
    assert with_sub.chunks[0] in (0, 3) and with_sub.scores == sorted(with_sub.scores, reverse=True)
    # a chunk's score is its best prior over the targets: never below its prior for the question alone
    for chunk, score in zip(alone.chunks, alone.scores, strict=True):
        assert with_sub.scores[with_sub.chunks.index(chunk)] >= score
    rule = rule_of(QuerySettings())
    volcano = ChunkSignals.from_scores(snap.similarities(vectors[1]), snap.bm25(sub, LexicalSettings()))
    assert with_sub.scores[with_sub.chunks.index(3)] == pytest.approx(rule.prior(3, volcano))


def test_the_floor_and_the_switch_leave_candidates_out() -> None:
    assert _candidates({}, context_fill_min=1.0).chunks == []
    assert _candidates({}, context_fill="none").chunks == []


def test_an_index_without_lexical_statistics_fills_by_similarity_uncut() -> None:
    """No calibrated prior without BM25: when no chunk was tested (budget 0) the candidates are every
    chunk by similarity alone, not cut by ``context_fill_min``; after tests, none (the tests decide)."""
    snap, embedder = _snapshot(lexical=False)
    qs = QuerySettings(context_fill_min=0.99)
    vector = embedder.encode(["tide"])[0]
    rule = RelevanceRule(qs, lexical=False)
    assert rank_fill_candidates(snap, "tide", vector, {3: 0.9}, rule, qs, LexicalSettings()).chunks == []
    found = rank_fill_candidates(snap, "tide", vector, {}, rule, qs, LexicalSettings())
    assert sorted(found.chunks) == list(range(len(TEXTS)))
    similarity = snap.similarities(vector)
    assert found.scores == sorted(found.scores, reverse=True)
    assert found.scores == [float(similarity[c]) for c in found.chunks]
    assert found.question_vector is not None


def test_fill_keeps_the_evidence_skips_present_documents_and_respects_the_limit() -> None:
    words = lambda text: len(text.split())  # noqa: E731
    candidates = FillCandidates([1, 2, 5, 3, 4], [0.9, 0.5, 0.45, 0.4, 0.3])
    kept = [Evidence(1, "the tide rises twice a day", [Claim("the tide rises", [1], 0, 0)])]
    documents = {1: "d1", 2: "d2", 5: "d2", 3: "d3", 4: "d4"}  # chunk 5 is a second chunk of d2
    rendered: list[list[int]] = []

    def render(chunks: list[int]) -> list[str]:
        rendered.append(list(chunks))
        return [f"passage of chunk {c} " + "word " * 10 for c in chunks]

    limit = words(render_evidence(1, kept[0])) + 2 * 16
    out = fill_context(
        kept, candidates, limit, words, render, lambda chunk: 7, documents.get, render_evidence
    )
    assert out[0] is kept[0] and all(item.kind == "passage" and not item.claims for item in out[1:])
    # chunk 1 is in the context already, and chunk 5's document came with chunk 2
    assert [item.chunk for item in out[1:]] == [2, 3]
    used = sum(words(render_evidence(n, item)) for n, item in enumerate(out, start=1))
    assert used <= limit
    assert rendered == [[2, 5, 3, 4]]  # rendered ahead in one call, only once
    assert out[1].community == 7 and out[1].score == 0.5


def test_a_global_fill_takes_the_best_of_each_theme_in_turn() -> None:
    candidates = FillCandidates([1, 2, 3, 4, 5], [0.9, 0.8, 0.7, 0.6, 0.5])
    themes = {1: "a", 2: "a", 3: "b", 4: "a", 5: "c"}
    spread = interleave_themes(candidates, themes.get)
    assert spread.chunks == [1, 3, 5, 2, 4] and spread.scores == [0.9, 0.7, 0.5, 0.8, 0.6]


def test_a_lazy_context_is_filled_with_what_the_assessor_turned_down(tmp_path) -> None:
    snap, embedder = _snapshot()
    settings = load_settings(home=tmp_path, query={"relevance": {"cascade": False}})
    only_bread = FakeLLM(is_relevant=lambda q, p: "bread" in p.lower())
    engine = QueryEngine(settings, snap, roles=fake_roles(only_bread), embedder=embedder)
    result = engine.answer("When does the tide rise?", budget=5, context_tokens=400)
    kinds = [c["kind"] for c in result.to_json()["claims"]]
    assert kinds and kinds.count("claim") >= 1 and "passage" in kinds
    assert kinds == sorted(kinds)  # every claim comes before the first passage
    assert "c0000" in result.context_chunk_ids  # the tide chunk reaches the context as a passage
    none = load_settings(home=tmp_path, query={"relevance": {"cascade": False}, "context_fill": "none"})
    claims_only = QueryEngine(
        none, snap, roles=fake_roles(FakeLLM(is_relevant=only_bread.is_relevant)), embedder=embedder
    ).answer("When does the tide rise?", budget=5, context_tokens=400)
    assert "c0000" not in claims_only.context_chunk_ids
    assert set(claims_only.context_chunk_ids) < set(result.context_chunk_ids)
    assert np.all([c["kind"] == "claim" for c in claims_only.to_json()["claims"]])
