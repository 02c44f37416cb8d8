"""The vector and hybrid methods over the serving store (``query.index_source: store``) against the same
methods over the in-memory snapshot, on a tiny index written as Delta tables (no Spark): the same ranked
chunks and scores, the same context cuts and the same answers; the lazy method refused on the store
before any work; the engine and the batch driver on the store load no snapshot."""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console
from support.fakes import FakeLLM, HashEmbedder, TinyIndex, fake_roles

from lazygraph import api
from lazygraph.errors import IndexSourceError
from lazygraph.query import engine as engine_module
from lazygraph.query.engine import QueryEngine
from lazygraph.query.search.vector import VectorSearch
from lazygraph.query.snapshot import IndexSnapshot
from lazygraph.query.store_reader import StoreReader
from lazygraph.serving import build_store
from lazygraph.settings import Settings, load_settings

TOPICS = ["harbour", "lighthouse", "tide", "storm", "fishers", "whales", "nets", "gulls"]
QUESTIONS = [
    "Which fishers mend their nets at the harbour?",
    "What does the lighthouse keeper record during a storm?",
    "When does the tide turn?",
    "Where do the whales sing?",
]
LIMITS = [40, 120, 400, 8000]  # from a passage or two to every chunk


class NoisyHashEmbedder(HashEmbedder):
    """Hashed word counts plus a small deterministic jitter per text: similar texts stay similar, and no
    two chunks score exactly alike (exact ties may be ordered differently by each source)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = super().encode(texts)
        for i, text in enumerate(texts):
            jitter = np.random.default_rng(zlib.crc32(str(text).encode())).standard_normal(out.shape[1])
            out[i] += 0.05 * jitter
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def corpus() -> TinyIndex:
    texts, titles = [], []
    for i in range(40):
        a, b = TOPICS[i % len(TOPICS)], TOPICS[(i * 3 + 1) % len(TOPICS)]
        words = " ".join(f"word{j}" for j in range(i % 7 * 6))  # lengths vary: cuts fall mid-ranking
        texts.append(f"Note {i}: the {a} and the {b} of the old coast. {words}")
        titles.append("" if i % 5 == 0 else f"Log {i // 4}")  # some passages have no title line
    return TinyIndex(texts=texts, titles=titles, doc_ids=[f"doc{i // 3}" for i in range(40)])


@pytest.fixture()
def embedder() -> NoisyHashEmbedder:
    return NoisyHashEmbedder()


@pytest.fixture()
def index(tmp_path: Path, embedder: NoisyHashEmbedder) -> str:
    uri = corpus().write_delta(tmp_path / "index", embedder, terms=True)
    build_store(uri, load_settings(), encode=embedder.encode)
    return uri


def store_settings() -> Settings:
    return load_settings(query={"index_source": "store"})


def snapshot_settings() -> Settings:
    return load_settings(query={"index_source": "snapshot"})


def open_engine(settings: Settings, uri: str, embedder: Any, llm: FakeLLM | None = None) -> QueryEngine:
    roles = fake_roles(llm or FakeLLM())
    return QueryEngine.open(settings, uri, Console(quiet=True), roles=roles, embedder=embedder)


@pytest.fixture()
def engines(index: str, embedder: NoisyHashEmbedder) -> tuple[QueryEngine, QueryEngine]:
    return open_engine(snapshot_settings(), index, embedder), open_engine(store_settings(), index, embedder)


def chunk_ids(engine: QueryEngine, chunks: list[Any]) -> list[str]:
    return [record.chunk_id for record in engine.reader.chunk_records(chunks)]


# ---- the same results from both sources -------------------------------------------------------------
def test_the_store_engine_reads_the_store_and_loads_no_snapshot(index, embedder, monkeypatch) -> None:
    def no_snapshot(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the store engine loaded the snapshot")

    monkeypatch.setattr(engine_module, "load_snapshot", no_snapshot)
    engine = open_engine(store_settings(), index, embedder)
    assert isinstance(engine.reader, StoreReader) and not engine.has_snapshot
    with pytest.raises(IndexSourceError, match="query.index_source: snapshot"):
        engine.snapshot  # noqa: B018
    assert engine.answer(QUESTIONS[0], method="vector").context_chunk_ids


@pytest.mark.parametrize("method", ["vector", "hybrid"])
def test_both_sources_rank_the_same_chunks_with_the_same_scores(engines, method) -> None:
    by_snapshot, by_store = engines
    assert isinstance(by_snapshot.reader, IndexSnapshot)
    assert by_store.reader.index_version == by_snapshot.reader.index_version
    assert by_store.reader.n_chunks == by_snapshot.reader.n_chunks == 40
    assert by_store.reader.average_chunk_tokens() == pytest.approx(by_snapshot.reader.average_chunk_tokens())
    for question in QUESTIONS:
        rankings = []
        for engine in engines:
            with engine.search(question, method, answering=False) as searched:
                ranked = searched.retrieval.ranked(15)
                rankings.append((chunk_ids(engine, ranked.chunks), ranked.scores))
        (snapshot_ids, snapshot_scores), (store_ids, store_scores) = rankings
        assert store_ids == snapshot_ids and len(store_ids) == 15
        assert np.allclose(store_scores, snapshot_scores, atol=1e-5)


def test_the_store_scores_bm25_as_the_snapshot_does(engines) -> None:
    by_snapshot, by_store = engines
    lexical = by_snapshot.settings.lexical
    for question in QUESTIONS:
        on_snapshot = by_snapshot.reader.lexical_scores(question, lexical)
        on_store = by_store.reader.lexical_scores(question, lexical)
        assert on_snapshot, "the question's terms are in the index"
        named = dict(zip(chunk_ids(by_snapshot, list(on_snapshot)), on_snapshot.values(), strict=True))
        assert set(on_store) == set(named)
        assert all(on_store[c] == pytest.approx(named[c], rel=1e-5) for c in named)


@pytest.mark.parametrize("method", ["vector", "hybrid"])
def test_both_sources_cut_the_same_contexts(engines, method) -> None:
    cuts: list[list[list[str]]] = [[], []]
    for side, engine in enumerate(engines):
        for question in QUESTIONS:
            with engine.search(question, method, answering=False) as searched:
                for limit in LIMITS:  # one search cut to several limits, as the evaluation does
                    context = searched.context(limit)
                    cuts[side].append(chunk_ids(engine, context.chunks))
                    assert searched.rendered(context).count("<passage") == len(context.chunks)
    assert cuts[0] == cuts[1]
    assert all(cuts[0]) and len({len(cut) for cut in cuts[0]}) > 3, "cuts after various numbers of chunks"


@pytest.mark.parametrize("method", ["vector", "hybrid"])
def test_both_sources_give_the_same_answers(index, embedder, method) -> None:
    records = []
    for settings in (snapshot_settings(), store_settings()):
        engine = open_engine(settings, index, embedder, FakeLLM())
        results = [engine.answer(q, method=method, trace=True) for q in QUESTIONS]
        assert {r.index_source for r in results} == {settings.query.index_source}
        records.append(
            [(r.to_json() | {"cost": None, "index_source": None}, r.context_text) for r in results]
        )
    assert records[0] == records[1]
    first = records[0][0][0]
    assert first["sources"] and first["context_chunk_ids"] and first["sentences"][0]["source_chunk_ids"]


def test_a_trace_of_the_vector_method_reads_the_store(index, embedder) -> None:
    both = []
    for settings in (snapshot_settings(), store_settings()):
        opened = api.open_index(index, settings=settings, console=Console(quiet=True))
        opened._engine = open_engine(settings, index, embedder)
        both.append(opened.trace(QUESTIONS[1], method="vector"))
    snapshot_trace, store_trace = both
    assert store_trace.context == snapshot_trace.context and store_trace.context
    assert store_trace.answer.to_json() == snapshot_trace.answer.to_json() | {
        "cost": store_trace.answer.to_json()["cost"],
        "index_source": "store",
    }


# ---- what the store cannot serve ----------------------------------------------------------------------
class InMemoryOnly(VectorSearch):
    """A method that reads the whole index in memory (as a future one might)."""

    serves_from_store = False


def test_a_method_the_store_cannot_serve_is_refused_before_any_work(index, embedder, monkeypatch) -> None:
    from lazygraph.query import search

    monkeypatch.setitem(search.SEARCHES, "in-memory", InMemoryOnly)
    llm = FakeLLM()
    engine = open_engine(store_settings(), index, embedder, llm)
    calls = embedder.calls
    with pytest.raises(IndexSourceError, match="the in-memory method .*`query.index_source: snapshot`"):
        engine.answer(QUESTIONS[0], method="in-memory")
    assert embedder.calls == calls and llm.tasks == [], "nothing was embedded or asked"

    def no_open(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the index was opened")

    monkeypatch.setattr(QueryEngine, "open", no_open)
    opened = api.open_index(index, settings=store_settings(), console=Console(quiet=True))
    with pytest.raises(IndexSourceError):
        opened.query(QUESTIONS[0], method="in-memory")


def test_a_vector_preset_asked_with_the_default_method_runs_on_the_store(engines) -> None:
    _, by_store = engines
    result = by_store.answer(QUESTIONS[2], preset="SS_8K")  # the preset implies the vector method
    assert result.method == "vector" and result.context_chunk_ids


# ---- the batch driver -----------------------------------------------------------------------------------
class InProcessPool:
    """Stands in for the Ray pool: one query actor body (``QueryWorker``) run in this process, which
    opens the index itself, as each actor does."""

    snapshots: list[Any] = []

    def __init__(self, settings, index, factory, llm_handle, handles, console, snapshot) -> None:  # noqa: ANN001
        from lazygraph.serve.worker import QueryWorker

        InProcessPool.snapshots.append(snapshot)
        self.worker = QueryWorker(settings, index, factory, llm_handle, snapshot)
        self.slots: list[Any] = []
        self.placements: list[Any] = []

    def start(self, n: int) -> None:
        assert self.worker.ready() is None, self.worker.ready()
        self.slots = [object()] * n

    def run(self, todo, writer, stats, progress, options) -> list[Any]:  # noqa: ANN001
        for query in todo:
            row = self.worker.answer(query.query_id, query.question, *options)
            writer.add(row)
            stats.record(row, None)
        return []


def batch_in_process_without_snapshot(monkeypatch: pytest.MonkeyPatch, embedder: Any) -> None:
    """``lazygraph batch`` with its actors run in this process, fake LLM roles, the given embedder, and
    every snapshot load failing the test."""
    import lazygraph.embed
    import lazygraph.query.snapshot
    from lazygraph.serve import batch

    def no_snapshot(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a snapshot was loaded")

    monkeypatch.setattr(lazygraph.query.snapshot, "load_snapshot", no_snapshot)
    monkeypatch.setattr(engine_module, "load_snapshot", no_snapshot)
    monkeypatch.setattr(batch, "ensure_ray", lambda settings: False)
    monkeypatch.setattr(batch, "QueryPool", InProcessPool)
    monkeypatch.setattr(engine_module, "make_roles", lambda settings, role: fake_roles(FakeLLM()))
    monkeypatch.setattr(lazygraph.embed, "get_embedder", lambda cfg: embedder)
    InProcessPool.snapshots = []


def test_the_batch_driver_on_the_store_shares_no_snapshot(index, embedder, tmp_path, monkeypatch) -> None:
    from lazygraph.serve import batch

    batch_in_process_without_snapshot(monkeypatch, embedder)
    queries = tmp_path / "queries.jsonl"
    lines = [json.dumps({"query_id": f"q{i}", "question": q}) for i, q in enumerate(QUESTIONS)]
    queries.write_text("\n".join(lines) + "\n")

    report = batch.run_batch(store_settings(), index, queries, str(tmp_path / "out"), method="vector")
    assert report["answered"] == len(QUESTIONS) and report["errors"] == 0
    assert InProcessPool.snapshots == [None]

    # The lazy method too: each actor reads its queries' working sets from the store.
    lazy = batch.run_batch(store_settings(), index, queries, str(tmp_path / "out2"), method="lazy")
    assert lazy["answered"] == len(QUESTIONS) and lazy["errors"] == 0
    assert InProcessPool.snapshots == [None, None]


def test_the_command_line_answers_lazy_on_the_store(index, embedder, monkeypatch) -> None:
    from typer.testing import CliRunner

    from lazygraph.cli import app

    batch_in_process_without_snapshot(monkeypatch, embedder)
    monkeypatch.setenv("LAZYGRAPH_QUERY__INDEX_SOURCE", "store")
    args = ["query", QUESTIONS[0], "--index", index, "--json"]
    answered = CliRunner().invoke(app, args, terminal_width=200)
    assert answered.exit_code == 0, answered.output
    record = json.loads(answered.stdout)
    assert record["method"] == "lazy" and record["index_source"] == "store"


def test_a_chunk_below_the_vector_depth_counts_as_ranked_just_below_it() -> None:
    from lazygraph.query.reader import RankedChunks
    from lazygraph.query.search.hybrid import FusedChunks

    class Nearest:
        def ranked(self, k: int) -> RankedChunks:
            ids = ["a", "b", "c", "d", "e", "f"][:k]
            return RankedChunks(ids, np.linspace(0.9, 0.4, 6, dtype=np.float32)[: len(ids)])

    # "z" has no vector rank within the depth (3): it fuses as rank 4, and its BM25 rank 1 lifts it
    # above "c" (vector rank 3, no term) and "b" (vector rank 2, BM25 rank 2).
    ranking = FusedChunks(Nearest(), {"z": 5.0, "b": 2.0}, k=1.0, depth=3)
    expected = {"z": 1 / 5 + 1 / 2, "b": 1 / 3 + 1 / 3, "a": 1 / 2, "c": 1 / 4}
    ranking.ranked(4)  # read one deeper than the depth: "d" is ranked 4 and "z" 5 now, tied with "b"
    assert ranking.ranked(3).chunks == ["b", "z", "a"]
    ranking = FusedChunks(Nearest(), {"z": 5.0, "b": 2.0}, k=1.0, depth=3)
    fused = ranking.ranked(3)
    assert fused.chunks == list(expected)[:3]
    assert np.allclose(fused.scores, list(expected.values())[:3])


@pytest.mark.parametrize("seed", range(5))
def test_the_fused_head_reads_only_the_best_bm25_chunks_and_equals_a_full_fusion(seed) -> None:
    """BM25 reaching far more chunks than the vector depth: the head equals the fusion of every scored
    chunk (ranks over all of them, ties included, equal scores ordered by chunk id as the snapshot's
    fusion orders them), with scores from arrays (``ChunkScores``)."""
    import pyarrow as pa

    from lazygraph.query.ranking import ranks
    from lazygraph.query.reader import RankedChunks
    from lazygraph.query.search.hybrid import FusedChunks
    from lazygraph.serving import ChunkScores

    rng = np.random.default_rng(seed)
    ids = [f"c{i:04d}" for i in range(2000)]
    similarity = np.sort(rng.random(len(ids)).astype(np.float32))[::-1]

    class Nearest:
        def ranked(self, k: int) -> RankedChunks:
            return RankedChunks(ids[:k], similarity[:k])

    held = rng.choice(len(ids), size=1500, replace=False)
    bm25 = np.round(rng.random(len(held)) * 20).astype(np.float32)  # rounded: many ties
    scores = ChunkScores(pa.array([ids[i] for i in held]), bm25)
    depth, k = 50, 40

    vector_rank = dict(zip(ids[:depth], ranks(similarity[:depth]).tolist(), strict=True))
    lexical_rank = dict(zip([ids[i] for i in held], ranks(bm25).tolist(), strict=True))
    everyone = list(dict.fromkeys([*ids[:depth], *[ids[i] for i in held]]))
    full = np.asarray(
        [
            1 / (60 + vector_rank.get(c, depth + 1))
            + (1 / (60 + lexical_rank[c]) if c in lexical_rank else 0)
            for c in everyone
        ]
    )
    order = np.lexsort((np.asarray(everyone), -full))[:k]  # equal scores by chunk id

    head = FusedChunks(Nearest(), scores, k=60.0, depth=depth).ranked(k)
    assert head.chunks == [everyone[i] for i in order]
    assert np.allclose(head.scores, full[order])
    assert (
        len(FusedChunks(Nearest(), scores, k=60.0, depth=depth)._fuse(Nearest().ranked(depth), depth)) < 200
    )


def test_equal_scores_are_ordered_by_their_key_even_at_the_cut() -> None:
    from lazygraph.query.reader import top_chunks

    scores = np.array([0.5, 0.9, 0.5, 0.7, 0.5, 0.5])
    keys = np.array([5, 0, 1, 4, 3, 2])  # e.g. each chunk's place among the ids in sorted order
    # 0.9, 0.7, then the four chunks at 0.5 by key: chunk 2 (key 1), chunk 5 (key 2), ...
    assert top_chunks(scores, 4, keys).chunks == [1, 3, 2, 5]
    assert top_chunks(scores, 6, keys).chunks == [1, 3, 2, 5, 4, 0]
    assert top_chunks(scores, 3, keys[::-1].copy()).chunks == [1, 3, 4]  # chunk 4 has key 0 now
    assert sorted(top_chunks(scores, 4).chunks[:2]) == [1, 3]  # without keys: only the scores order
