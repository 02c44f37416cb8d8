"""End-to-end indexing with real Spark, Delta Lake, spaCy and MiniLM on a dozen small documents.

One index is built, re-run (nothing new), appended to (new and changed documents) and inspected;
bad inputs are checked along the way.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from support.corpus import DOCS, write_jsonl

from lazygraph import tables
from lazygraph.errors import IndexStateError, InputError
from lazygraph.settings import load_settings

pytestmark = pytest.mark.e2e

BAD_LINES = [
    json.dumps({"doc_id": "empty", "title": "Empty", "text": "   "}).encode(),
    json.dumps({"doc_id": "apollo", "title": "Again", "text": "A duplicate of an earlier id."}).encode(),
    b"{this is not json",
    json.dumps({"title": "no id", "text": "No identifier here."}).encode(),
    b'{"doc_id": "latin1", "title": "Bad", "text": "caf\xe9 au lait"}',
]


@pytest.fixture(scope="module")
def settings():
    return load_settings(
        spark={"master": "local[2]", "shuffle_partitions": 2, "driver_memory": "2g"},
        chunking={"chunk_tokens": 32, "overlap_tokens": 4},
    )


@pytest.fixture(scope="module")
def spark(settings):
    from lazygraph.runtime.spark import get_spark

    return get_spark(settings)


def delta_rows(index: Path, name: str) -> list[dict]:
    from deltalake import DeltaTable

    return DeltaTable(str(index / name)).to_pyarrow_table().to_pylist()


def data_versions(index: Path) -> dict[str, int]:
    from lazygraph.tables.store import table_facts

    facts = {
        n: table_facts(tables.table_uri(str(index), n)) for n in tables.ALL_TABLES if n != tables.MANIFEST
    }
    return {n: f[0] for n, f in facts.items() if f}


def test_build_rerun_append(tmp_path: Path, settings, spark) -> None:
    from lazygraph.pipeline import build_index
    from lazygraph.stats import index_stats

    console = Console(stderr=True)
    index = tmp_path / "index"
    corpus = write_jsonl(tmp_path / "corpus.jsonl", DOCS, BAD_LINES)

    first = build_index(settings, str(corpus), str(index), append=False, console=console)
    assert first["mode"] == "create"
    counts = first["counts"]
    assert counts["documents"] == 12
    assert counts["chunks"] >= 12
    assert counts["chunk_embeddings"] == counts["chunks"]
    assert counts["mentions"] > 0 and counts["concepts"] > 0 and counts["edges"] > 0
    assert first["rejected_by_reason"] == {
        "empty_text": 1,
        "duplicate_id": 1,
        "malformed_json": 1,
        "missing_field": 1,
        "invalid_utf8": 1,
    }
    apollo = [d for d in delta_rows(index, "documents") if d["doc_id"] == "apollo"]
    assert apollo[0]["title"] == "Apollo program"  # the first record of a duplicated id wins
    names = {c["name"] for c in delta_rows(index, "concepts")}
    assert {"neil armstrong", "nasa", "mozart", "vienna"} <= names
    concepts = delta_rows(index, "concepts")
    assert len({c["concept_id"] for c in concepts}) == len(concepts)
    edges = delta_rows(index, "edges")
    assert all(e["src"] < e["dst"] and -1.0 <= e["weight"] <= 1.0 for e in edges)
    kept_ids = {c["concept_id"] for c in concepts if c["kept"]}
    assert all(e["src"] in kept_ids and e["dst"] in kept_ids for e in edges if e["kept"])

    versions = data_versions(index)
    again = build_index(settings, str(corpus), str(index), append=False, console=console)
    assert again["mode"] == "rerun"
    assert again["counts"] == counts
    assert data_versions(index) == versions  # no table was written

    changed = [("moon", "Moon", "The Moon orbits Earth. Apollo astronauts brought Moon rocks back to NASA.")]
    new = [
        ("jupiter", "Jupiter", "Jupiter is the largest planet. NASA sent the Juno probe to Jupiter."),
        ("haydn", "Joseph Haydn", "Joseph Haydn was an Austrian composer who taught Beethoven in Vienna."),
    ]
    extra = write_jsonl(tmp_path / "more.jsonl", changed + new)
    with pytest.raises(IndexStateError, match="--append"):
        build_index(settings, str(extra), str(index), append=False, console=console)
    old_moon_chunks = {c["chunk_id"] for c in delta_rows(index, "chunks") if c["doc_id"] == "moon"}
    # Another concept extractor would mix two kinds of concepts in one index: refused, nothing written.
    other = settings.model_copy(deep=True)
    other.concepts.noun_phrases = "parser" if settings.concepts.noun_phrases == "pos_rules" else "pos_rules"
    with pytest.raises(IndexStateError, match="concepts.noun_phrases"):
        build_index(other, str(extra), str(index), append=True, console=console)
    assert data_versions(index) == versions

    appended = build_index(settings, str(extra), str(index), append=True, console=console)
    assert appended["mode"] == "append"
    assert appended["new"]["documents"] == 3
    assert appended["counts"]["documents"] == 14
    chunks = delta_rows(index, "chunks")
    chunk_ids = {c["chunk_id"] for c in chunks}
    assert not old_moon_chunks & chunk_ids  # the changed document's chunks were replaced
    assert len(chunk_ids) == len(chunks)
    assert {m["chunk_id"] for m in delta_rows(index, "mentions")} <= chunk_ids
    assert {e["chunk_id"] for e in delta_rows(index, "chunk_embeddings")} == chunk_ids
    moon = [d for d in delta_rows(index, "documents") if d["doc_id"] == "moon"]
    assert len(moon) == 1 and moon[0]["text"].startswith("The Moon orbits")
    frequencies = {c["name"]: c["frequency"] for c in delta_rows(index, "concepts")}
    assert frequencies.get("jupiter", 0) >= 2

    report = index_stats(settings, str(index))
    assert report["rows"]["manifest"] == 3
    assert report["rows"]["documents"] == 14
    assert report["communities"]["parent_links_ok"]
    assert [r["mode"] for r in delta_rows(index, "manifest")].count("append") == 1


def test_unusable_input_leaves_no_index(tmp_path: Path, settings, spark) -> None:
    from lazygraph.pipeline import build_index

    bad = write_jsonl(tmp_path / "bad.jsonl", [], BAD_LINES[:1] + BAD_LINES[2:4])
    index = tmp_path / "never"
    with pytest.raises(InputError, match="no usable document"):
        build_index(settings, str(bad), str(index), append=False, console=Console(stderr=True))
    assert not index.exists()
    with pytest.raises(InputError, match="does not exist"):
        build_index(settings, str(tmp_path / "missing.jsonl"), str(index), append=False, console=Console())


def test_folder_input_rejects_binary_and_undecodable_files(tmp_path: Path, settings, spark) -> None:
    from lazygraph.ingest.readers import read_input

    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("Mozart lived in Vienna.")
    (folder / "sub" / "b.md").write_text("# Notes\nBeethoven moved to Vienna.")
    (folder / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (folder / "latin1.txt").write_bytes(b"caf\xe9")
    (folder / "big.txt").write_text("x " * 600)
    small = settings.model_copy(
        update={"chunking": settings.chunking.model_copy(update={"max_document_bytes": 500})}
    )
    result = read_input(spark, small, str(folder), "run-1")
    docs = {r["doc_id"]: r["title"] for r in result.documents.collect()}
    assert docs == {"a.txt": "a", "sub/b.md": "b"}
    assert result.rejected_by_reason == {"not_text_file": 1, "invalid_utf8": 1, "too_large": 1}
    result.unpersist()


def test_pairs_per_chunk_are_capped(settings, spark) -> None:
    from lazygraph.graph.cooccurrence import concept_statistics, graph_from_counts, pair_counts

    # One dense chunk with 6 concepts (15 possible pairs) and a second chunk repeating them.
    mentions = spark.createDataFrame(
        [(chunk, f"c{i}", 6 - i) for chunk in ("k1", "k2") for i in range(6)],
        "chunk_id string, concept_id string, count int",
    )
    chunks = spark.createDataFrame(
        [("k1", "d1"), ("k2", "d2"), ("k3", "d3")], "chunk_id string, doc_id string"
    )
    names = spark.createDataFrame(
        [(f"c{i}", f"concept {i}", "phrase") for i in range(6)], "concept_id string, name string, kind string"
    )
    concept_cfg = settings.concepts.model_copy(update={"max_concepts_per_chunk": 5, "max_pairs_per_chunk": 4})
    # as the index job does: the count tables from the mentions, then the graph from the counts
    stats, pairs = concept_statistics(mentions, chunks, names), pair_counts(mentions, concept_cfg)
    graph = graph_from_counts(stats, pairs, 3, settings.graph)
    edges = graph.edges.collect()
    # at most 4 pairs per chunk, the same 4 in both chunks (best-ranked concepts first)
    assert len(edges) == 4
    assert all(e["cooccurrence"] == 2 for e in edges)
    assert {(e["src"], e["dst"]) for e in edges} == {("c0", "c1"), ("c0", "c2"), ("c0", "c3"), ("c1", "c2")}
    concepts = {c["concept_id"]: c for c in graph.concepts.collect()}
    assert not concepts["c5"]["kept"] and concepts["c5"]["degree"] == 0
    assert concepts["c0"]["degree"] == 3
    graph.unpersist()
