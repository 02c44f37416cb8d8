"""The lexical signal without Spark: the tokenizer, BM25 against a hand computation, reciprocal rank
fusion, and the hybrid method through the engine, the CLI and the batch checks."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from support.fakes import FakeLLM, HashEmbedder, TinyIndex, fake_roles, with_terms, write_manifest

from lazygraph import tables
from lazygraph.errors import ConfigError
from lazygraph.lexical.terms import strip_plural, term_counts, tokenize
from lazygraph.query.engine import QueryEngine
from lazygraph.query.ranking import fuse, ranks
from lazygraph.query.snapshot import build_snapshot, clear_cache, load_snapshot
from lazygraph.settings import LexicalSettings, load_settings


# ---- the tokenizer --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("The Tides rise; the tide rose.", ["tide", "rise", "tide", "rose"]),
        ("Apollo 11 landed in July 1969.", ["apollo", "11", "landed", "july", "1969"]),
        ("a I x of to 7 it's", []),  # stop words and one-character tokens
        ("Mozart's symphonies", ["mozart", "symphony"]),  # the possessive "s" is one character
        ("ＮＡＳＡ Straße CAFÉ", ["nasa", "strasse", "café"]),  # NFKC and case folding
        ("snake_case well-known", ["snake", "case", "well", "known"]),
        ("東京 Ελλάδα", ["東京", "ελλάδα"]),  # Unicode words of any script
        ("x" * 49 + " ok", ["ok"]),  # too long to be a term
    ],
)
def test_tokenize(text: str, terms: list[str]) -> None:
    assert tokenize(text) == terms


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("tides", "tide"),
        ("stories", "story"),
        ("rockets", "rocket"),
        ("status", "status"),  # -us kept
        ("glass", "glass"),  # -ss kept
        ("toes", "toe"),  # -oes is not -es: only the s goes
        ("gas", "gas"),  # too short to strip
        ("1960s", "1960s"),  # not alphabetic
    ],
)
def test_strip_plural(word: str, stem: str) -> None:
    assert strip_plural(word) == stem


def test_term_counts() -> None:
    assert term_counts("Tides and tide, the moon's tide.") == {"tide": 3, "moon": 1}


# ---- BM25 -----------------------------------------------------------------------------------------
# lengths 3, 2, 4, 1: N = 4, avgdl = 2.5; "tide" and "moon" are each in 2 chunks
HAND = TinyIndex(texts=["tide tide moon", "moon orbit", "volcano magma crust lava", "tides"])


def test_bm25_matches_a_hand_computation() -> None:
    snap = build_snapshot("memory://hand", (), with_terms(HAND))
    assert list(snap.chunk_lexical_length) == [3, 2, 4, 1] and snap.average_lexical_length == 2.5
    idf = math.log(1 + (4 - 2 + 0.5) / (2 + 0.5))  # = log 2 for a term in 2 of 4 chunks
    # k1 = 1.2, b = 0.75: the length norm k1 * (1 - b + b * dl / avgdl) is 1.38 for dl 3,
    # 1.02 for dl 2 and 0.66 for dl 1; k1 + 1 = 2.2
    tide = [idf * 2 * 2.2 / (2 + 1.38), 0.0, 0.0, idf * 1 * 2.2 / (1 + 0.66)]
    moon = [idf * 2.2 / (1 + 1.38), idf * 2.2 / (1 + 1.02), 0.0, 0.0]
    np.testing.assert_allclose(snap.bm25("the tide?"), tide, rtol=1e-5)
    np.testing.assert_allclose(snap.bm25("Tide tides MOON"), np.add(tide, moon), rtol=1e-5)  # distinct terms
    assert snap.bm25("tide").dtype == np.float32
    assert not snap.bm25("nothing here matches").any()
    # b = 0: no length normalisation, every single occurrence weighs the same
    flat = snap.bm25("moon", LexicalSettings(b=0.0))
    assert flat[0] == pytest.approx(flat[1]) and flat[0] == pytest.approx(idf)


def test_idf_stays_positive_for_common_terms() -> None:
    snap = build_snapshot("memory://common", (), with_terms(TinyIndex(texts=["sea", "sea", "sea", "land"])))
    scores = snap.bm25("sea")
    assert (scores[:3] > 0).all() and scores[3] == 0  # in 3 of 4 chunks, still evidence


def test_terms_of_chunks_outside_the_snapshot_are_ignored() -> None:
    arrow = with_terms(HAND)
    stale = pa.table(
        {"chunk_id": ["gone"], "term": ["tide"], "count": pa.array([5], pa.int32())}
    )  # a replaced chunk's leftover row
    arrow[tables.CHUNK_TERMS] = pa.concat_tables([arrow[tables.CHUNK_TERMS], stale])
    snap = build_snapshot("memory://stale", (), arrow)
    np.testing.assert_allclose(
        snap.bm25("tide"), build_snapshot("memory://hand", (), with_terms(HAND)).bm25("tide")
    )


def test_a_snapshot_without_chunk_terms_scores_zero(tmp_path: Path) -> None:
    snap = HAND.snapshot()  # the Arrow tables of an index built before chunk_terms existed
    assert snap.bm25("tide moon").tolist() == [0.0] * 4
    clear_cache()
    loaded = load_snapshot(HAND.write_delta(tmp_path / "old"))  # its manifest records no chunk_terms
    assert len(loaded.term_vocabulary) == 0 and loaded.bm25("tide").tolist() == [0.0] * 4


# ---- reciprocal rank fusion -----------------------------------------------------------------------
def test_ranks_share_ties() -> None:
    assert ranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [1, 4, 1, 3]


def test_rrf_orders_by_agreement() -> None:
    similarities = np.array([0.9, 0.8, 0.1, 0.5])  # vector ranks 1, 2, 4, 3
    bm25 = np.array([0.0, 0.0, 5.0, 1.0])  # BM25 ranks chunks 2 and 3 only
    fused = fuse(similarities, bm25, k=60)
    expected = [1 / 61, 1 / 62, 1 / 64 + 1 / 61, 1 / 63 + 1 / 62]
    np.testing.assert_allclose(fused, expected, rtol=1e-6)
    assert np.argsort(-fused).tolist() == [2, 3, 0, 1]


def test_rrf_without_lexical_scores_is_the_vector_order() -> None:
    similarities = np.array([0.2, 0.9, 0.5, 0.5, -0.1])
    fused = fuse(similarities, np.zeros(5), k=60)
    assert np.argsort(-fused, kind="stable").tolist() == np.argsort(-similarities, kind="stable").tolist()


# ---- the hybrid method through the engine -----------------------------------------------------------
RARE = TinyIndex(
    texts=[
        "The harbour crane lifts containers onto ships.",
        "Ships unload containers at the harbour.",
        "The zirconium alloy keeps the reactor cladding intact.",
        "Cranes and ships share the busy harbour.",
    ],
    embeddings=np.eye(4, 8, dtype=np.float32),
)


class FixedEmbedder:
    """Every text embeds close to chunk 0, a little less to chunks 1 and 3, least to chunk 2."""

    def encode(self, texts):
        vector = np.array([0.8, 0.5, 0.05, 0.3, 0, 0, 0, 0], dtype=np.float32)
        return np.tile(vector / np.linalg.norm(vector), (len(texts), 1))


def rare_engine(tmp_path: Path, arrow: dict[str, pa.Table]) -> QueryEngine:
    settings = load_settings(home=tmp_path)
    snap = build_snapshot("memory://rare", (), arrow)
    return QueryEngine(settings, snap, roles=fake_roles(FakeLLM()), embedder=FixedEmbedder())


def test_hybrid_ranks_a_rare_exact_term_first(tmp_path: Path) -> None:
    engine = rare_engine(tmp_path, with_terms(RARE))
    question = "Which alloy uses zirconium?"
    vector = engine.answer(question, method="vector", context_tokens=40)
    hybrid = engine.answer(question, method="hybrid", context_tokens=40, trace=True)
    assert vector.context_chunk_ids[0] == RARE.chunk_id(0)
    assert hybrid.context_chunk_ids[0] == RARE.chunk_id(2)
    assert hybrid.method == "hybrid" and hybrid.preset == "SS_8K"
    cost = hybrid.to_json()["cost"]
    assert cost["relevance_tests"] == 0 and cost["llm_calls"] == 1  # the answer call only
    assert any("hybrid:" in line for line in hybrid.trace)


@pytest.mark.parametrize(("ranking", "first"), [("hybrid", 2), ("similarity", 0)])
def test_the_lazy_search_tests_first_what_its_ranking_puts_first(
    tmp_path: Path, ranking: str, first: int
) -> None:
    engine = rare_engine(tmp_path, with_terms(RARE))
    engine.settings.query.ranking = ranking
    with engine.search("Which alloy uses zirconium?", "lazy", budget=1, answering=False) as searched:
        tested = [chunk for match in searched.retrieval.matches for chunk in match.tested]
    assert tested == [first]


def test_hybrid_without_chunk_terms_is_the_vector_search(tmp_path: Path) -> None:
    engine = rare_engine(tmp_path, RARE.arrow())
    question = "Which alloy uses zirconium?"
    with engine.search(question, "vector", answering=False) as vector:
        pass
    with engine.search(question, "hybrid", answering=False) as hybrid:
        pass
    assert hybrid.context(1000).chunks == vector.context(1000).chunks


def test_plan_and_batch_accept_hybrid(tmp_path: Path) -> None:
    from lazygraph.serve.batch import _check_options

    engine = rare_engine(tmp_path, with_terms(RARE))
    plan = engine.plan("hybrid")
    assert (plan.method, plan.preset, plan.budget) == ("hybrid", "SS_8K", 0)
    assert engine.plan("hybrid", preset="SS_64K").method == "hybrid"  # a vector preset keeps hybrid
    assert engine.plan("hybrid", budget=50).budget == 0  # it tests no relevance
    assert engine.plan(preset="SS_64K").method == "vector"
    with pytest.raises(ConfigError, match="lazy, vector, hybrid"):
        engine.plan("graph")
    _check_options(engine.settings, "hybrid", None, None)
    with pytest.raises(ConfigError, match="hybrid"):
        _check_options(engine.settings, "graph", None, None)


def write_delta_with_terms(index: TinyIndex, root: Path, embedder: HashEmbedder) -> str:
    """The index as Delta tables with chunk_terms, recorded by a complete run."""
    from deltalake import DeltaTable, write_deltalake

    versions = {}
    for name, table in with_terms(index, embedder).items():
        write_deltalake(str(root / name), table, mode="overwrite")
        versions[name] = DeltaTable(str(root / name)).version()
    write_manifest(root, versions)
    return str(root)


def test_cli_query_method_hybrid(tmp_path: Path, monkeypatch, hash_embedder) -> None:
    from typer.testing import CliRunner

    import lazygraph.embed
    import lazygraph.query.engine as engine_module
    from lazygraph.cli import app

    index = TinyIndex(texts=["The tide rises twice a day.", "Bread dough rises.", "Volcanoes erupt."])
    uri = write_delta_with_terms(index, tmp_path / "idx", hash_embedder)
    clear_cache()
    monkeypatch.setenv("LAZYGRAPH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(engine_module, "make_roles", lambda settings, role: fake_roles(FakeLLM()))
    monkeypatch.setattr(lazygraph.embed, "get_embedder", lambda cfg: hash_embedder)
    args = ["query", "--index", uri, "--method", "hybrid", "--json", "When do volcanoes erupt?"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{") :])
    assert data["context_chunk_ids"][0] == index.chunk_id(2)
    assert data["cost"]["relevance_tests"] == 0
    assert len(load_snapshot(uri).term_vocabulary) > 0


def test_term_weights_are_the_bm25_idf_of_known_terms() -> None:
    snap = build_snapshot("memory://hand", (), with_terms(HAND))
    weights = snap.term_weights("Tide and the unknown zebra")
    assert weights == {"tide": pytest.approx(math.log(1 + (4 - 2 + 0.5) / (2 + 0.5)))}


def test_the_focus_prefers_the_sentence_naming_the_query_terms() -> None:
    from lazygraph.query.focus import SentenceFocus

    text = "A quiet harbour town on the coast. Its lighthouse was built by Ada Marsh in 1820."
    index = TinyIndex(texts=[text, "Other harbour notes.", "Marsh birds."], titles=["Port", "B", "C"])
    snap = build_snapshot("memory://focus", (), with_terms(index))

    def encode(texts):  # every sentence equally similar: only the terms can decide
        return np.ones((len(texts), 4), dtype=np.float32) / 2

    def count(t: str) -> int:
        return len(t.split())

    question = "Who built the lighthouse, Ada Marsh?"
    lexical = SentenceFocus(snap, encode, count, max_tokens=10, lexical_weight=0.3)
    [passage] = lexical.passages([0], np.ones(4, dtype=np.float32) / 2, question)
    assert "Ada Marsh" in passage and "quiet harbour" not in passage
    cosine_only = SentenceFocus(snap, encode, count, max_tokens=10, lexical_weight=0.0)
    [passage] = cosine_only.passages([0], np.ones(4, dtype=np.float32) / 2, question)
    assert "quiet harbour" in passage  # ties keep the chunk's first sentence
