"""The serving store of a real index (the bundled sample corpus through Spark, spaCy and MiniLM): its
lookups agree with the in-memory snapshot the query engine loads from the same table versions, and the
vector and hybrid methods answer alike from both (``query.index_source: store``). The LLM cache is off
there, so each source's answers come from the embedded model itself (temperature 0), and short contexts
keep the answer calls quick on two cores. One index serves every test: building it is most of their
time."""

from __future__ import annotations

import numpy as np
import pytest

from lazygraph import api
from lazygraph.lexical import tokenize
from lazygraph.query.snapshot import clear_cache, load_snapshot
from lazygraph.settings import Settings

pytestmark = pytest.mark.e2e

QUESTIONS = [
    "Which fishers use the old harbour?",
    "What did the survey after Storm Isolde find in the eelgrass?",
    "Who sponsors the Lantern Tide Festival?",
]
CONTEXT_TOKENS = 700  # two or three passages


@pytest.fixture(scope="module")
def sample_index(settings, spark, tmp_path_factory) -> str:
    from rich.console import Console

    from lazygraph.demo_data import sample_corpus_path
    from lazygraph.pipeline import build_index

    index = str(tmp_path_factory.mktemp("serving") / "sample-index")
    report = build_index(settings, str(sample_corpus_path()), index, False, Console(stderr=True))
    assert report["counts"]["chunks"] == 30
    assert report["serving_store"]["status"] == "built"  # by the index run itself
    return index


def test_the_store_of_a_real_index_answers_as_the_snapshot(sample_index, settings, embedder) -> None:
    meta = api.build_store(sample_index, settings=settings)
    assert not meta["built"]  # the index run built it, with everything a store holds
    assert meta["concept_vectors"] and meta["full_text"]
    store = api.open_store(sample_index, settings=settings)
    clear_cache()
    snapshot = load_snapshot(sample_index, settings)
    assert meta["datasets"]["chunks"] == snapshot.n_chunks
    assert meta["tables"].items() <= dict(snapshot.versions).items()  # the versions the snapshot read

    # nearest chunks: an exact search over the snapshot's embeddings (ids and order, k = 5)
    questions = ["Which fishers use the old harbour?", "What does the lighthouse keeper record?"]
    for vector in [*embedder.encode(questions), snapshot.embeddings[3]]:
        sims = snapshot.similarities(np.asarray(vector, np.float32))
        expected = [snapshot.chunk_ids[i] for i in np.argsort(-sims, kind="stable")[:5]]
        got = store.nearest_chunks(vector, 5)
        assert [h.id for h in got] == expected
        assert [h.score for h in got] == pytest.approx(np.sort(sims)[::-1][:5], abs=1e-4)

    # chunks of every community, and communities of every chunk
    keys, members = [], {}
    for c in range(snapshot.n_communities):
        key = (int(snapshot.community_level[c]), str(snapshot.community_ids[c]))
        row = snapshot.community_chunks.indices[
            snapshot.community_chunks.indptr[c] : snapshot.community_chunks.indptr[c + 1]
        ]
        keys.append(key)
        members[key] = sorted(snapshot.chunk_ids[i] for i in row)
    stored = store.chunks_of(keys)
    assert {key: links.chunk_ids.to_pylist() for key, links in stored.items()} == members
    by_chunk = store.communities_of(snapshot.chunk_ids.tolist())
    for chunk_id, links in by_chunk.items():
        assert {(m.level, m.community_id) for m in links} == {k for k, v in members.items() if chunk_id in v}

    # BM25 of the chunks holding a question's terms: the snapshot's scores, from the store's postings
    for question in questions:
        expected_bm25 = snapshot.bm25(question, settings.lexical)
        got_bm25 = store.lexical_scores(tokenize(question), settings.lexical.k1, settings.lexical.b)
        assert got_bm25 and set(got_bm25) == {snapshot.chunk_ids[i] for i in np.flatnonzero(expected_bm25)}
        index_of = snapshot.chunk_index()
        assert all(
            score == pytest.approx(expected_bm25[index_of[c]], rel=1e-5) for c, score in got_bm25.items()
        )

    # the texts a prompt would quote
    some = [snapshot.chunk_ids[i] for i in (0, 7, 29)]
    assert [c.text for c in store.chunks(some)] == [snapshot.chunk_texts[i] for i in (0, 7, 29)]
    # the nearest concept names, as the snapshot's concept vectors rank them
    concept_vectors = snapshot.concept_vectors(embedder.encode, None)
    query = embedder.encode(["harbour"])[0]
    best = snapshot.concept_ids[int(np.argmax(concept_vectors @ query))]
    assert store.nearest_concepts(query, 3)[0].id == best


def source_settings(settings: Settings, source: str) -> Settings:
    query = settings.query.model_copy(
        update={
            "index_source": source,
            "llm_cache": settings.query.llm_cache.model_copy(update={"enabled": False}),
            "answer_max_tokens": 128,
        }
    )
    return settings.model_copy(update={"query": query})


@pytest.mark.parametrize("method", ["vector", "hybrid"])
def test_the_store_and_the_snapshot_answer_alike(sample_index, settings, method) -> None:
    assert settings.llm.synthesis.temperature == 0.0  # answers are deterministic
    answers = {}
    for source in ("snapshot", "store"):
        index = api.open_index(sample_index, settings=source_settings(settings, source))
        answers[source] = [index.query(q, method=method, context_tokens=CONTEXT_TOKENS) for q in QUESTIONS]
        assert index.engine().has_snapshot == (source == "snapshot")
    for by_snapshot, by_store in zip(answers["snapshot"], answers["store"], strict=True):
        assert by_store.context_text == by_snapshot.context_text  # the same prompt
        assert by_store.context_chunk_ids == by_snapshot.context_chunk_ids and by_store.context_chunk_ids
        assert by_store.text == by_snapshot.text and by_store.text
        assert by_store.sources == by_snapshot.sources
        assert by_store.cost.llm_calls == by_snapshot.cost.llm_calls == 1


def test_the_lazy_search_on_the_store_sends_the_snapshots_prompts(sample_index, settings, tmp_path) -> None:
    """The lazy search with the real model on the snapshot, then on the store's working set, sharing
    one fresh LLM cache (keyed by the prompt): the store's run is answered by the cache alone, so
    every prompt it sent (refine, relevance tests, claims, reduce) was one the snapshot's run sent,
    and its answer is the same."""
    cache = settings.query.llm_cache.model_copy(update={"enabled": True, "location": str(tmp_path / "llm")})
    answers = {}
    for source in ("snapshot", "store"):
        base = source_settings(settings, source)
        cfg = base.model_copy(update={"query": base.query.model_copy(update={"llm_cache": cache})})
        index = api.open_index(sample_index, settings=cfg)
        answers[source] = index.query(QUESTIONS[1], method="lazy", budget=4, context_tokens=CONTEXT_TOKENS)
        assert index.engine().has_snapshot == (source == "snapshot")
    by_snapshot, by_store = answers["snapshot"], answers["store"]
    assert by_snapshot.to_json()["index_source"] == "snapshot"
    assert by_store.to_json()["index_source"] == "store"
    assert by_snapshot.cost.relevance_tests > 0 and by_snapshot.cost.prompt_tokens > 0
    assert by_store.cost.prompt_tokens == 0 and by_store.cost.llm_cache_hits > 0  # nothing new was asked
    assert by_store.cost.llm_tokens == by_snapshot.cost.llm_tokens
    assert by_store.subqueries == by_snapshot.subqueries
    assert by_store.context_text == by_snapshot.context_text and by_store.text == by_snapshot.text
    assert by_store.text and by_store.sources == by_snapshot.sources


def test_equivalence_benchmark_compares_the_contexts_answers_read(sample_index, settings, tmp_path) -> None:
    """``lazygraph bench store-equivalence --contexts-only`` stops at the context cut: its context is
    the one a full query answers from, and both sources give the same for vector and hybrid."""
    import json

    from lazygraph.bench import store_equivalence as bench

    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS[:2]))
    out = tmp_path / "rows.jsonl"
    argv = ["--index", sample_index, "--questions", str(questions), "--out", str(out)]
    argv += ["--methods", "vector,hybrid", "--context-tokens", str(CONTEXT_TOKENS), "--contexts-only"]
    assert bench.main(argv, settings) == 0
    rows = bench.read_rows(out)
    assert [(r["question_id"], r["method"]) for r in rows] == [
        ("q1", "vector"),
        ("q1", "hybrid"),
        ("q2", "vector"),
        ("q2", "hybrid"),
    ]
    assert all(r["same_context"] and r["same_chunks"] and not r["answered"] for r in rows)
    assert {r["store_index_source"] for r in rows} == {"store"}
    # what the row compared is what a full query of the snapshot puts in its answer prompt
    index = api.open_index(sample_index, settings=source_settings(settings, "snapshot"))
    searched = bench.searched_context(index, QUESTIONS[0], "vector", None, CONTEXT_TOKENS)
    answered = index.query(QUESTIONS[0], method="vector", context_tokens=CONTEXT_TOKENS)
    assert searched["text"] == answered.context_text and searched["text"]
    assert searched["chunk_ids"] == answered.context_chunk_ids
