"""The lazy search over the serving store (its per-query working set) against the lazy search over the
in-memory snapshot, on a small index with a three-level community tree, concepts, kept edges and BM25
statistics, written as Delta tables (no Spark), and the store built from them.

Where the working set's candidates cover the index (``serving.lazy_candidates`` at least its chunks)
both give the same subqueries, concepts, relevance tests, claims, contexts and answers; with fewer
candidates the working set holds only what the query's rankings reach and the query still answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console
from support.fakes import FakeLLM, TinyIndex, fake_roles
from test_query_store_reader import NoisyHashEmbedder

from lazygraph import manifest
from lazygraph.errors import StoreOutOfDateError
from lazygraph.query import engine as engine_module
from lazygraph.query.engine import QueryEngine
from lazygraph.query.search.lazy.subqueries import Subquery, match_concepts
from lazygraph.query.search.lazy.working_set import match_store_concepts
from lazygraph.query.snapshot import load_snapshot
from lazygraph.serving import ServingStore, build_store, layout
from lazygraph.settings import Settings, load_settings

TOPICS = {
    "tide": ("water", "sea"),
    "glacier": ("water", "ice"),
    "harbour": ("water", "sea"),
    "storm": ("air", "sky"),
    "gulls": ("air", "sky"),
    "lighthouse": ("land", "coast"),
    "fishers": ("land", "coast"),
    "nets": ("land", "craft"),
}
QUESTIONS = [
    "Why does the tide turn at the harbour?",
    "What do the fishers mend their nets with?",
    "When does a storm reach the lighthouse?",
    "How do gulls follow the glacier?",
]


def corpus() -> TinyIndex:
    """48 chunks: six per topic; topic communities at level 2 under groups (level 1) under realms
    (level 0); each chunk mentions its topic and its group; edges between topics of one group."""
    index = TinyIndex(texts=[], titles=[])
    for topic, (realm, group) in TOPICS.items():
        index.communities.setdefault(realm, (0, None))
        index.communities.setdefault(group, (1, realm))
        index.communities[topic] = (2, group)
        index.concepts.setdefault(topic, [])
        index.concepts.setdefault(group, [])
        for j in range(6):
            i = len(index.texts)
            words = " ".join(f"word{k}" for k in range(j * 5))  # lengths vary
            index.texts.append(f"Note {i}: the {topic} by the {group} ({realm}), seen {j} times. {words}")
            index.titles.append(f"Log of the {topic}")
            index.memberships += [(i, 0, realm), (i, 1, group), (i, 2, topic)]
            index.concepts[topic].append(i)
            index.concepts[group].append(i)
    index.doc_ids = [f"doc{i // 2}" for i in range(len(index.texts))]
    topics = list(TOPICS)
    index.edges = [
        (a, b) for x, a in enumerate(topics) for b in topics[x + 1 :] if TOPICS[a][1] == TOPICS[b][1]
    ] + [("sea", "coast"), ("sky", "ice")]
    return index


class PromptRecordingLLM(FakeLLM):
    """The fake model, keeping every prompt it is sent (refine, relevance tests, map, reduce)."""

    def __init__(self) -> None:
        super().__init__(is_relevant=relevant)
        self.prompts: list[str] = []

    def _chat(self, messages, *, max_tokens, temperature, json_schema):  # noqa: ANN001, ANN202
        self.prompts.append(messages[-1]["content"])
        reply = super()._chat
        return reply(messages, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema)

    def _relevance(self, messages_per_passage):  # noqa: ANN001, ANN202
        self.prompts.extend(messages[-1]["content"] for messages in messages_per_passage)
        return super()._relevance(messages_per_passage)


def relevant(question: str, passage: str) -> bool:
    """A passage is relevant when it names a topic the question names."""
    return any(topic in passage.lower() and topic in question.lower() for topic in TOPICS)


@pytest.fixture()
def embedder() -> NoisyHashEmbedder:
    return NoisyHashEmbedder()


@pytest.fixture()
def index(tmp_path: Path, embedder: NoisyHashEmbedder) -> str:
    uri = corpus().write_delta(tmp_path / "index", embedder, terms=True)
    build_store(uri, load_settings(), encode=embedder.encode)
    return uri


def settings(source: str, tmp_path: Path, **serving: Any) -> Settings:
    return load_settings(home=tmp_path, query={"index_source": source}, serving=serving)


def open_engine(settings: Settings, uri: str, embedder: Any, llm: FakeLLM | None = None) -> QueryEngine:
    roles = fake_roles(llm or FakeLLM(is_relevant=relevant))
    return QueryEngine.open(settings, uri, Console(quiet=True), roles=roles, embedder=embedder)


def records(engine: QueryEngine, budget: int) -> list[dict[str, Any]]:
    out = []
    for question in QUESTIONS:
        result = engine.answer(question, method="lazy", budget=budget, trace=True)
        record = result.to_json() | {"cost": None, "index_source": None, "trace": None}
        out.append(record | {"context": result.context_text})
    return out


@pytest.mark.parametrize("budget", [0, 6, 20])
def test_the_store_and_the_snapshot_give_the_same_lazy_answers(index, embedder, tmp_path, budget) -> None:
    snapshot_llm, store_llm = PromptRecordingLLM(), PromptRecordingLLM()
    by_snapshot = records(open_engine(settings("snapshot", tmp_path), index, embedder, snapshot_llm), budget)
    store_engine = open_engine(settings("store", tmp_path), index, embedder, store_llm)
    assert not store_engine.has_snapshot
    by_store = records(store_engine, budget)
    # Every prompt alike: the relevance tests' passages, the map step's groups and topics, the reduce.
    assert store_llm.prompts == snapshot_llm.prompts and len(store_llm.prompts) > len(QUESTIONS)
    for snapshot_record, store_record in zip(by_snapshot, by_store, strict=True):
        assert store_record == snapshot_record
    first = by_store[0]
    assert first["context_chunk_ids"] and first["sentences"][0]["source_chunk_ids"]
    if budget:
        tested = [s for r in by_store for s in r["subqueries"] if s["relevant_chunk_ids"]]
        assert tested, "the relevance tests found chunks"
        assert any(s["concepts"] for r in by_store for s in r["subqueries"]), "concepts were matched"


def test_the_store_matches_the_concepts_the_snapshot_matches(index, embedder, tmp_path) -> None:
    cfg = settings("snapshot", tmp_path)
    snapshot = load_snapshot(index, cfg)
    concept_vectors = snapshot.concept_vectors(embedder.encode, None)
    store = ServingStore.open(index, cfg)
    texts = [*QUESTIONS, "the sea and the gulls", "nets", "nothing named here"]
    for text in texts:
        vector = embedder.encode([text])[0]
        sub = Subquery(text)
        match_concepts(snapshot, sub, vector, concept_vectors, cfg.query)
        ids = match_store_concepts(
            store, text, vector, cfg.query.concepts_per_subquery, cfg.query.min_concept_similarity
        )
        assert [str(snapshot.concept_ids[i]) for i in sub.concept_indices] == ids, text
    assert any(match_store_concepts(store, "the sea and the gulls", embedder.encode(["x"])[0], 5, 0.99))
    # Several names in one text, all far from it: ordered alike, by similarity then the index's order.
    far = cfg.query.model_copy(update={"min_concept_similarity": 0.999, "concepts_per_subquery": 4})
    for text in ("sea, coast, tide and nets", "the storm over the lighthouse, the sky and the air"):
        vector = embedder.encode([text])[0]
        sub = Subquery(text)
        match_concepts(snapshot, sub, vector, concept_vectors, far)
        ids = match_store_concepts(store, text, vector, 4, 0.999)
        assert len(ids) >= 3 and [str(snapshot.concept_ids[i]) for i in sub.concept_indices] == ids, text


def test_a_small_working_set_reads_only_its_candidates_and_answers(
    index, embedder, tmp_path, monkeypatch
) -> None:
    def no_snapshot(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the snapshot was loaded")

    monkeypatch.setattr(engine_module, "load_snapshot", no_snapshot)
    engine = open_engine(settings("store", tmp_path, lazy_candidates=3), index, embedder)
    with engine.search(QUESTIONS[0], "lazy", budget=6, trace=True) as searched:
        working = searched.method.snapshot
        context = searched.context(400)
        answer = searched.answer(context)
    # 3 subqueries and the question, each bringing at most 3 nearest, 3 by BM25, and 3 per concept
    assert 0 < working.n_chunks < 48
    concepts = {c for sub in searched.retrieval.refinement.subqueries for c in sub.concepts}
    assert working.n_chunks <= 4 * 3 * 2 + 3 * len(concepts)
    assert context.evidence and answer.sentences
    line = next(line for line in searched.recorder.trace if line.startswith("working set:"))
    assert f"{working.n_chunks} chunks" in line
    # The communities above every chunk of the set are in it: each level-2 community has its parents.
    parents = working.community_parent[working.community_level > 0]
    assert (parents >= 0).all()


def test_a_store_before_format_7_is_refused_for_lazy_naming_the_rebuild(index, embedder, tmp_path) -> None:
    _, versions = manifest.complete_versions(index)
    store = layout.store_uri(index, layout.source_versions(versions))
    layout.write_meta(store, layout.read_meta(store) | {"format": 6})
    llm = FakeLLM(is_relevant=relevant)
    engine = open_engine(settings("store", tmp_path), index, embedder, llm)
    assert engine.answer(QUESTIONS[0], method="vector").context_chunk_ids  # vector still reads it
    asked = len(llm.tasks)
    with pytest.raises(StoreOutOfDateError, match="lazygraph store build .*--force"):
        engine.answer(QUESTIONS[0], method="lazy")
    assert len(llm.tasks) == asked, "refused before refine or any other model call"


def test_the_store_holds_the_mentions_and_edges_the_snapshot_reads(index, embedder, tmp_path) -> None:
    cfg = settings("snapshot", tmp_path)
    snapshot = load_snapshot(index, cfg)
    store = ServingStore.open(index, cfg)
    chunk = str(snapshot.chunk_ids[7])
    mentioned = sorted(store.concept_mentions([chunk]).column("concept_id").to_pylist())
    from lazygraph.query.snapshot import row

    at = snapshot.chunk_index()[chunk]
    assert mentioned == sorted(str(snapshot.concept_ids[c]) for c in row(snapshot.chunk_concepts, at))
    concept = str(snapshot.concept_ids[0])
    neighbours = sorted(store.concept_edges([concept]).column("dst").to_pylist())
    assert neighbours == sorted(str(snapshot.concept_ids[c]) for c in row(snapshot.concept_adjacency, 0))
    assert neighbours, "the first concept has kept edges"
    best = store.chunks_mentioning([concept], 2)
    assert best.num_rows == 2 and set(best.column("concept_id").to_pylist()) == {concept}
    named = store.concepts_named(["tide", "gull"])  # lower-cased names; "gull" is no concept's
    assert named == [concept] if str(snapshot.concept_names[0]) == "tide" else named
    assert json.loads(json.dumps(store.meta))["format"] == layout.FORMAT >= layout.LAZY_FORMAT
    assert np.isfinite(snapshot.embeddings).all()


def test_a_groups_concept_subgraph_from_the_store_equals_the_snapshots(index, embedder, tmp_path) -> None:
    """The map step's topics on the store come from the group's chunks alone (their mentions, those
    concepts' names and the kept edges among them), read when asked: the same names, in the same
    order, with the same mention counts and degrees as the snapshot's whole-index arrays give."""
    snapshot = load_snapshot(index, settings("snapshot", tmp_path))
    engine = open_engine(settings("store", tmp_path), index, embedder)
    with engine.search(QUESTIONS[0], "lazy", budget=0) as searched:
        working = searched.method.snapshot
    assert working.n_concepts < snapshot.n_concepts, "the set holds the matched concepts, not all"
    where = snapshot.chunk_index()
    groups = [[0], [0, 6], [0, 1, 12, 13, 18], [40, 41, 42], list(range(0, 48, 5))]
    compared = 0
    for group in groups:
        ids = [str(snapshot.chunk_ids[c]) for c in group]
        held = [i for i, chunk in enumerate(working.chunk_ids.tolist()) if chunk in ids]
        if len(held) != len(ids):
            continue  # a chunk the working set did not read
        expected = snapshot.concept_subgraphs([[where[c] for c in ids]])[0]
        got = working.concept_subgraphs([[0], held])[1]
        assert got.names == expected.names
        assert got.mentions.tolist() == expected.mentions.tolist()
        assert got.degree.tolist() == expected.degree.tolist()
        compared += 1
    assert compared >= 3
    tied = snapshot.concept_subgraphs([list(range(0, 48, 5))])[0]
    assert tied.degree.max() > 0 and len(set(tied.mentions.tolist())) > 1
