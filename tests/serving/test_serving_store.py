"""The serving store on tiny indexes written as Delta tables in the test (no Spark): what it holds is
what the in-memory snapshot of the same tables says, lookup by lookup, and a reader refuses a store
whose versions the index's manifest no longer names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from support.fakes import HashEmbedder, TinyIndex, two_level_tree, with_terms, write_manifest
from typer.testing import CliRunner

from lazygraph import tables
from lazygraph.errors import IndexNotFoundError, StoreOutOfDateError
from lazygraph.lexical import tokenize
from lazygraph.query.snapshot import UNASSIGNED_COMMUNITY, IndexSnapshot, build_snapshot
from lazygraph.serving import ServingStore, build_store, layout
from lazygraph.serving.cache import LRUCache
from lazygraph.serving.scores import RowScores
from lazygraph.settings import Settings, load_settings

TEXTS_EXTRA = ["whales sing in the deep ocean", "a lighthouse keeper logs the storm"]


def tiny_index() -> TinyIndex:
    """Two roots with two leaves each, three chunks a leaf, two chunks in no community, four concepts."""
    index, _ = two_level_tree(n_roots=2, children=2, chunks_per_leaf=3)
    index.texts = [f"chunk {i} about topic {i % 4} and item {i}" for i in range(len(index.texts))]
    index.texts += TEXTS_EXTRA
    index.concepts = {"topic zero": [0, 4, 8], "item one": [1], "topic two": [2, 6, 10], "item seven": [7]}
    return index


@pytest.fixture()
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture()
def settings() -> Settings:
    return load_settings()


@pytest.fixture()
def built(tmp_path: Path, embedder: HashEmbedder, settings: Settings) -> tuple[str, IndexSnapshot, dict]:
    index = tiny_index()
    uri = index.write_delta(tmp_path / "index", embedder, terms=True)
    meta = build_store(uri, settings, encode=embedder.encode)
    return uri, build_snapshot(uri, (), with_terms(index, embedder)), meta


# ---- what the store holds ---------------------------------------------------------------------------
def test_the_store_records_the_versions_it_was_built_from(built) -> None:
    uri, snapshot, meta = built
    assert meta["built"] and meta["tables"] == {name: 0 for name in layout.SOURCES}
    assert meta["store"] == layout.store_uri(uri, meta["tables"])
    assert meta["store"].startswith(f"{tables.normalise_index_uri(uri)}/{layout.STORE_DIR}/v-")
    assert meta["datasets"][layout.CHUNKS] == snapshot.n_chunks
    assert meta["datasets"][layout.COMMUNITIES] == snapshot.n_communities  # the synthetic one too
    assert meta["datasets"][layout.CONCEPTS] == snapshot.n_concepts
    assert meta["vector_indexes"] == {}  # below the row threshold: exact scans
    assert layout.read_meta(meta["store"])["tables"] == meta["tables"]


def test_chunks_by_id_are_the_chunks_table_rows_in_the_order_asked(built, settings) -> None:
    uri, snapshot, _ = built
    store = ServingStore.open(uri, settings)
    asked = ["c0013", "c0002", "no-such-chunk", "c0002"]
    found = store.chunks(asked)
    assert [c.chunk_id for c in found] == ["c0013", "c0002"]
    for chunk in found:
        i = snapshot.chunk_index()[chunk.chunk_id]
        assert chunk.text == snapshot.chunk_texts[i]
        assert chunk.title == snapshot.chunk_titles[i]
        assert chunk.doc_id == snapshot.chunk_doc_ids[i]
        assert chunk.n_tokens == snapshot.chunk_tokens[i]


def test_nearest_chunks_are_an_exact_search_over_the_snapshot(built, settings, embedder) -> None:
    uri, snapshot, _ = built
    store = ServingStore.open(uri, settings)
    for text in ["topic two item six", "whales in the ocean", "storm", "chunk 3"]:
        vector = embedder.encode([text])[0]
        sims = snapshot.similarities(vector)
        got = store.nearest_chunks(vector, 4)
        assert len(got) == 4
        expected = {snapshot.chunk_ids[i]: float(sims[i]) for i in range(snapshot.n_chunks)}
        for hit in got:
            assert hit.score == pytest.approx(expected[hit.id], abs=1e-5)
        # the k best scores (ids may differ only among equal scores)
        assert [h.score for h in got] == pytest.approx(sorted(sims, reverse=True)[:4], abs=1e-5)


def test_communities_of_chunks_and_chunks_of_communities_match_the_snapshot(built, settings) -> None:
    uri, snapshot, _ = built
    store = ServingStore.open(uri, settings)
    index: dict[tuple[int, str], list[str]] = {}
    for c in range(snapshot.n_communities):
        key = (int(snapshot.community_level[c]), str(snapshot.community_ids[c]))
        start, end = snapshot.community_chunks.indptr[c], snapshot.community_chunks.indptr[c + 1]
        index[key] = sorted(snapshot.chunk_ids[i] for i in snapshot.community_chunks.indices[start:end])
    stored = store.chunks_of([*index, (5, "nowhere")])
    assert {key: links.chunk_ids.to_pylist() for key, links in stored.items() if key in index} == index
    assert len(stored[(5, "nowhere")]) == 0
    for c in range(snapshot.n_communities):  # each link's weight, in the chunks' order
        key = (int(snapshot.community_level[c]), str(snapshot.community_ids[c]))
        start, end = snapshot.community_chunks.indptr[c], snapshot.community_chunks.indptr[c + 1]
        weight = dict(
            zip(
                (snapshot.chunk_ids[i] for i in snapshot.community_chunks.indices[start:end]),
                snapshot.community_chunks.data[start:end],
                strict=True,
            )
        )
        got = stored[key]
        assert got.weights.to_numpy() == pytest.approx([weight[i] for i in got.chunk_ids.to_pylist()])
    assert index[(0, UNASSIGNED_COMMUNITY)] == ["c0012", "c0013"]

    by_chunk = store.communities_of([snapshot.chunk_ids[i] for i in range(snapshot.n_chunks)])
    for chunk_id, links in by_chunk.items():
        assert {(m.level, m.community_id) for m in links} == {
            key for key, members in index.items() if chunk_id in members
        }


@pytest.mark.parametrize("sort_rows", [5_000_000, 5])
def test_community_links_are_grouped_by_chunk_and_by_community(tmp_path, embedder, sort_rows) -> None:
    """A chunk's links are contiguous in ``chunk_communities`` and a community's in ``community_chunks``
    (each lookup reads a range), whatever the buckets; both hold every link the snapshot has, once."""
    import lance

    index = tiny_index()
    uri = index.write_delta(tmp_path / "index", embedder)
    meta = build_store(uri, load_settings(serving={"sort_rows": sort_rows}))  # 5: many spilled buckets
    expected = index.snapshot(embedder).community_chunks.nnz
    for dataset, key in ((layout.CHUNK_COMMUNITIES, "chunk"), (layout.COMMUNITY_CHUNKS, "community")):
        links = lance.dataset(layout.dataset_uri(meta["store"], dataset)).to_table()
        triples = list(
            zip(
                links.column("chunk_id").to_pylist(),
                links.column("level").to_pylist(),
                links.column("community_id").to_pylist(),
                strict=True,
            )
        )
        keys = [t[0] if key == "chunk" else t[1:] for t in triples]
        runs = [k for i, k in enumerate(keys) if i == 0 or keys[i - 1] != k]
        assert len(runs) == len(set(keys)) > 4, dataset
        assert len(set(triples)) == len(triples) == expected, dataset


@pytest.mark.parametrize(("sort_rows", "batch_rows"), [(5_000_000, 65_536), (5, 65_536), (5_000_000, 3)])
def test_a_chunks_links_are_read_by_its_row_as_by_its_id(tmp_path, embedder, sort_rows, batch_rows) -> None:
    """Format 8: ``chunk_link_ranges`` names each chunk row's run of links, and reading the links by row
    gives the rows the B-tree on chunk_id gives (a store without the ranges), in the same order: with
    many spilled buckets, and with runs split across the batches the build reads."""
    index = tiny_index()
    uri = index.write_delta(tmp_path / "index", embedder)
    settings = load_settings(serving={"sort_rows": sort_rows, "write_batch_rows": batch_rows})
    meta = build_store(uri, settings)
    assert meta["format"] == layout.FORMAT >= 8
    assert meta["datasets"][layout.CHUNK_LINK_RANGES] == meta["datasets"][layout.CHUNKS]
    by_row = ServingStore.open(uri, settings)
    datasets = {k: v for k, v in meta["datasets"].items() if k != layout.CHUNK_LINK_RANGES}
    by_id = ServingStore(by_row.uri, {**by_row.meta, "datasets": datasets}, settings)
    every = [f"c{i:04d}" for i in range(len(index.texts))]
    for asked in (every, every[::-3], ["c0013", "nowhere", "c0001"], []):
        expected = by_id.chunk_links(asked)
        assert by_row.chunk_links(asked).equals(expected)
        assert expected.num_rows or not asked
    rows = by_row.chunk_rows(every[:5]).column("chunk_row").to_numpy()
    assert by_row.chunk_links(every[:5], rows).equals(by_id.chunk_links(every[:5]))
    assert by_row.communities_of(every) == by_id.communities_of(every)


def test_a_format_2_store_reads_a_communitys_chunks_from_the_links_by_chunk(built, settings) -> None:
    """A store written before ``community_chunks`` existed still opens and answers ``chunks_of``; a
    format older than that is refused with the command that rebuilds it."""
    import shutil

    uri, snapshot, meta = built
    keys = [
        (int(snapshot.community_level[c]), str(snapshot.community_ids[c]))
        for c in range(snapshot.n_communities)
    ]
    expected = ServingStore.open(uri, settings).chunks_of(keys)
    old = {**layout.read_meta(meta["store"]), "format": 2}
    layout.write_meta(meta["store"], old)
    shutil.rmtree(layout.dataset_uri(meta["store"], layout.COMMUNITY_CHUNKS))
    assert ServingStore.open(uri, settings).chunks_of(keys) == expected
    assert sum(len(v) for v in expected.values()) == snapshot.community_chunks.nnz
    layout.write_meta(meta["store"], {**old, "format": 1})
    with pytest.raises(StoreOutOfDateError, match="--force"):
        ServingStore.open(uri, settings)


def test_community_rows_keep_the_hierarchy(built, settings) -> None:
    uri, _, _ = built
    rows = ServingStore.open(uri, settings).communities([(1, "R1.0"), (0, "R0"), (0, "R1.0")])
    assert [(r.level, r.community_id, r.parent_id) for r in rows] == [(1, "R1.0", "R1"), (0, "R0", None)]


def test_nearest_concepts_and_their_communities_match_the_snapshot(built, settings, embedder) -> None:
    uri, snapshot, _ = built
    store = ServingStore.open(uri, settings)
    vectors = embedder.encode(snapshot.concept_names.tolist())
    query = embedder.encode(["topic two"])[0]
    got = store.nearest_concepts(query, 2)
    sims = vectors @ query
    assert [h.id for h in got][0] == snapshot.concept_ids[int(np.argmax(sims))]
    assert [h.score for h in got] == pytest.approx(sorted(sims, reverse=True)[:2], abs=1e-5)
    assert store.concept_names([got[0].id]) == {got[0].id: "topic two"}
    ids = snapshot.concept_ids.tolist()
    links = store.concept_communities(ids)
    for k, concept_id in enumerate(ids):
        expected = [
            (level, str(snapshot.community_ids[c]))
            for level, c in enumerate(snapshot.concept_community[:, k])
            if c >= 0
        ]
        assert links[concept_id] == expected


def test_bm25_top_k_comes_from_the_full_text_index(built, settings) -> None:
    uri, _, meta = built
    store = ServingStore.open(uri, settings)
    assert meta["full_text"] and store.has_full_text
    assert [h.id for h in store.bm25("whales ocean", 3)] == ["c0012"]
    assert store.bm25("   ", 3) == []


def test_without_an_encoder_concepts_are_stored_without_vectors(tmp_path, embedder, settings) -> None:
    uri = tiny_index().write_delta(tmp_path / "index", embedder)
    meta = build_store(uri, settings)
    assert meta["concept_vectors"] is False
    assert ServingStore.open(uri, settings).nearest_concepts(embedder.encode(["topic"])[0], 3) == []


# ---- versions ---------------------------------------------------------------------------------------------
def test_a_store_of_older_versions_is_refused_until_rebuilt(built, settings, embedder) -> None:
    from deltalake import DeltaTable, write_deltalake

    uri, _, meta = built
    root = Path(tables.local_path(tables.normalise_index_uri(uri)))
    extra = TinyIndex(texts=["a new chunk"]).arrow(embedder)[tables.CHUNKS]
    extra = extra.set_column(0, "chunk_id", pa.array(["new0"]))
    write_deltalake(str(root / tables.CHUNKS), extra, mode="append")
    versions = {name: 0 for name in layout.SOURCES} | {
        tables.CHUNKS: DeltaTable(str(root / "chunks")).version()
    }
    write_manifest(root, versions, run_id="append")

    with pytest.raises(StoreOutOfDateError, match="lazygraph store build --index"):
        ServingStore.open(uri, settings)
    rebuilt = build_store(uri, settings)
    assert rebuilt["built"] and rebuilt["store"] != meta["store"] and rebuilt["tables"][tables.CHUNKS] == 1
    assert ServingStore.open(uri, settings).chunks(["new0"])[0].text == "a new chunk"
    assert layout.read_meta(meta["store"]) is not None  # the old store is left for readers that hold it


def test_a_store_whose_metadata_names_other_versions_is_refused(built, settings) -> None:
    uri, _, meta = built
    layout.write_meta(meta["store"], {**layout.read_meta(meta["store"]), "tables": {"chunks": 7}})
    with pytest.raises(StoreOutOfDateError, match="was built from table versions"):
        ServingStore.open(uri, settings)


def test_tables_recreated_at_the_same_versions_make_the_store_stale(tmp_path, embedder, settings) -> None:
    import shutil

    uri = tiny_index().write_delta(tmp_path / "index", embedder, terms=True)
    first = build_store(uri, settings)
    for name in layout.SOURCES:
        shutil.rmtree(tmp_path / "index" / name)
    tiny_index().write_delta(tmp_path / "index", embedder, terms=True)  # the same versions, new table ids
    with pytest.raises(StoreOutOfDateError, match="re-created"):
        ServingStore.open(uri, settings)
    again = build_store(uri, settings)
    assert again["built"] and again["store"] == first["store"] and again["table_ids"] != first["table_ids"]
    ServingStore.open(uri, settings)


def test_an_unbuilt_store_and_a_missing_index_are_refused_with_what_to_do(
    tmp_path, embedder, settings
) -> None:
    uri = tiny_index().write_delta(tmp_path / "index", embedder)
    with pytest.raises(StoreOutOfDateError, match="no serving store.*lazygraph store build"):
        ServingStore.open(uri, settings)
    with pytest.raises(IndexNotFoundError, match="no lazygraph index"):
        build_store(str(tmp_path / "nothing"), settings)


def test_building_again_reuses_a_complete_store_unless_forced(built, settings) -> None:
    uri, _, meta = built
    again = build_store(uri, settings)
    assert not again["built"] and again["created_at"] == meta["created_at"]
    assert build_store(uri, settings, force=True)["built"]


# ---- vector index and caches ---------------------------------------------------------------------------
def test_an_ivf_pq_index_is_built_above_the_threshold(tmp_path) -> None:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(300, 16)).astype(np.float32)
    uri = TinyIndex(texts=[f"text {i}" for i in range(300)], embeddings=vectors).write_delta(tmp_path / "ix")
    settings = load_settings(
        serving={"vector_index_min_rows": 100, "ivf_partitions": 2, "nprobes": 2, "refine_factor": 30}
    )
    meta = build_store(uri, settings)
    assert meta["vector_indexes"] == {"chunk_vectors": {"type": "IVF_PQ", "partitions": 2, "sub_vectors": 2}}
    store = ServingStore.open(uri, settings)
    for i in (0, 17, 299):  # a stored vector's nearest chunk is its own (re-ranked exactly)
        assert store.nearest_chunks(vectors[i], 3)[0].id == f"c{i:04d}"


def test_lookups_are_served_from_bounded_lru_caches(built) -> None:
    uri, _, _ = built
    store = ServingStore.open(uri, load_settings(serving={"chunk_cache": 2}))
    store.chunks(["c0000", "c0001"])
    store.chunks(["c0001", "c0002"])
    stats = store.cache_stats()["chunks"]
    assert stats == {"size": 2, "hits": 1, "misses": 3}
    store.communities_of(["c0000"])
    store.communities_of(["c0000"])
    assert store.cache_stats()["chunk_links"]["hits"] == 1


def test_the_lru_cache_evicts_the_least_recently_used() -> None:
    cache: LRUCache[str, int] = LRUCache(2)
    cache.put_many({"a": 1, "b": 2})
    assert cache.split(["a"]) == ({"a": 1}, [])
    cache.put_many({"c": 3})  # b is the least recently used
    assert cache.split(["a", "b", "c"]) == ({"a": 1, "c": 3}, ["b"])
    off: LRUCache[str, int] = LRUCache(0)
    off.put_many({"a": 1})
    assert len(off) == 0


def test_the_lru_cache_bounds_its_entries_total_weight() -> None:
    cache: LRUCache[str, str] = LRUCache(10, weight=len, max_weight=5)
    cache.put_many({"a": "xx", "b": "yy"})
    cache.split(["a"])  # b is now the least recently used
    cache.put_many({"c": "zz"})  # 6 > 5: b goes
    assert cache.split(["a", "b", "c"]) == ({"a": "xx", "c": "zz"}, ["b"])
    assert cache.total_weight == 4
    cache.put_many({"a": "x"})  # replacing an entry replaces its weight
    assert cache.total_weight == 3
    cache.put_many({"huge": "x" * 6})  # heavier than the bound alone: not kept, nothing evicted
    assert cache.split(["huge", "a", "c"]) == ({"a": "x", "c": "zz"}, ["huge"])


def test_a_communitys_chunks_are_cached_up_to_a_number_of_chunks(built) -> None:
    """``community_cache_chunks`` bounds the chunks held over all cached communities, and one Lance
    session with the configured bounds serves every dataset of the store."""
    uri, snapshot, _ = built
    sizes = np.diff(snapshot.community_chunks.indptr)
    big = int(np.argmax(sizes))
    small = int(np.flatnonzero((sizes > 0) & (sizes < sizes[big]))[0])
    key = {c: (int(snapshot.community_level[c]), str(snapshot.community_ids[c])) for c in (big, small)}
    settings = load_settings(serving={"community_cache_chunks": int(sizes[small]), "lance_index_cache_mb": 3})
    assert sizes[big] > sizes[small] > 0
    store = ServingStore.open(uri, settings)
    for _ in range(2):
        store.chunks_of([key[big], key[small]])
    assert store.cache_stats()["community_links"] == {"size": 1, "hits": 1, "misses": 3}
    store.communities_of(["c0000"])
    sessions = {id(store._dataset(name).session()) for name in store._datasets}
    # a chunk's links are found by its row (format 8): chunks, then the link ranges, then the links
    assert set(store._datasets) == {"community_chunks", "chunks", "chunk_link_ranges", "chunk_communities"}
    assert store._session.index_cache_size_bytes() <= 3 * 2**20
    assert len(sessions) == 1 or all(
        store._dataset(name).session().is_same_as(store._session) for name in store._datasets
    )


# ---- the command line ------------------------------------------------------------------------------------
def test_store_build_and_show_on_the_command_line(tmp_path, embedder, monkeypatch) -> None:
    from lazygraph.cli import app

    monkeypatch.setenv("LAZYGRAPH_SERVING__CONCEPT_VECTORS", "false")  # no embedding model in a unit test
    uri = tiny_index().write_delta(tmp_path / "index", embedder)
    runner = CliRunner()
    shown = runner.invoke(app, ["store", "show", "--index", uri])
    assert shown.exit_code != 0 and isinstance(shown.exception, StoreOutOfDateError)
    built = runner.invoke(app, ["store", "build", "--index", uri], terminal_width=200)
    assert built.exit_code == 0, built.output
    assert '"built": true' in built.stdout
    shown = runner.invoke(app, ["store", "show", "--index", uri], terminal_width=200)
    assert shown.exit_code == 0 and '"chunks": 14' in shown.stdout


@pytest.mark.parametrize("sort_rows", [5_000_000, 7])
def test_bm25_postings_are_grouped_by_term_and_score_as_the_snapshot(tmp_path, embedder, sort_rows) -> None:
    import lance

    index = tiny_index()
    uri = index.write_delta(tmp_path / "index", embedder, terms=True)
    settings = load_settings(serving={"sort_rows": sort_rows})  # 7: many spilled buckets
    meta = build_store(uri, settings)
    postings = lance.dataset(layout.dataset_uri(meta["store"], layout.CHUNK_TERMS)).to_table()
    terms = postings.column("term").to_pylist()
    assert len(terms) == with_terms(index, embedder)[tables.CHUNK_TERMS].num_rows
    # each term's rows are contiguous: a term never reappears once another has started
    runs = [t for i, t in enumerate(terms) if i == 0 or terms[i - 1] != t]
    assert len(runs) == len(set(terms))
    snapshot = build_snapshot(uri, (), with_terms(index, embedder))
    store = ServingStore.open(uri, settings)
    lexical = settings.lexical
    found = 0
    for text in ("topic item", "chunk 3 about topic 1", "no such words"):
        expected = snapshot.lexical_scores(text, lexical)
        found += len(expected)
        got = store.lexical_scores(tokenize(text), lexical.k1, lexical.b)
        named = {str(snapshot.chunk_ids[c]): v for c, v in expected.items()}
        assert set(got) == set(named)
        assert all(got[c] == pytest.approx(named[c], rel=1e-5) for c in named)
    assert found > 10, "the questions' terms are in the index"

    # Within a term, highest impact first; the directory says where each term starts and how many.
    impact = postings.column("impact").to_numpy()
    for term in set(terms):
        at = [i for i, t in enumerate(terms) if t == term]
        assert list(impact[at]) == sorted(impact[at], reverse=True)
    directory = lance.dataset(layout.dataset_uri(meta["store"], layout.TERMS)).to_table().to_pylist()
    assert {row["term"]: (row["first_row"], row["df"]) for row in directory} == {
        t: (terms.index(t), terms.count(t)) for t in set(terms)
    }

    # Format 6: a posting names its chunk by its row in the chunks dataset too. Scores summed by row
    # are those summed by id (format 5), in the same order, and name a chunk only when asked.
    chunks = lance.dataset(layout.dataset_uri(meta["store"], layout.CHUNKS)).to_table(
        columns=["chunk_id", "chunk_row"]
    )
    assert chunks.column("chunk_row").to_pylist() == list(range(chunks.num_rows))
    id_of_row = chunks.column("chunk_id").to_pylist()
    rows = postings.column("chunk_row").to_pylist()
    assert [id_of_row[r] for r in rows] == postings.column("chunk_id").to_pylist()
    query = tokenize("chunk 3 about topic 1")
    by_row = store.lexical_scores(query, lexical.k1, lexical.b)
    layout.write_meta(meta["store"], {**layout.read_meta(meta["store"]), "format": 5})
    by_id = ServingStore.open(uri, settings).lexical_scores(query, lexical.k1, lexical.b)
    assert isinstance(by_row, RowScores) and not isinstance(by_id, RowScores)
    assert list(by_row) == list(by_id) and dict(by_row) == pytest.approx(dict(by_id))
    unscored = next(c for c in id_of_row if c not in by_id)
    asked = [list(by_id)[2], unscored, "no such chunk", list(by_id)[0]]
    at = by_row.positions(asked)
    assert list(at) == list(by_id.positions(asked)) and at[1] == at[2] == -1
    assert by_row.ids_at(at[[0, 3]]) == [asked[0], asked[3]]
    assert by_row.with_scores(by_row.scores * 2)[asked[0]] == pytest.approx(2 * by_id[asked[0]])

    # A store before format 4 (no directory) reads every posting through the B-tree and scores alike.
    import shutil

    layout.write_meta(meta["store"], {**layout.read_meta(meta["store"]), "format": 3})
    shutil.rmtree(layout.dataset_uri(meta["store"], layout.TERMS))
    old = ServingStore.open(uri, settings)
    text = "chunk 3 about topic 1"
    expected = {str(snapshot.chunk_ids[c]): v for c, v in snapshot.lexical_scores(text, lexical).items()}
    got = old.lexical_scores(tokenize(text), lexical.k1, lexical.b)
    assert set(got) == set(expected) and all(
        got[c] == pytest.approx(v, rel=1e-5) for c, v in expected.items()
    )


def test_bm25_reads_a_common_terms_postings_to_the_depth_best_first(tmp_path, embedder) -> None:
    """``serving.postings_depth``: a term with more postings is read to that depth, highest impact
    first; the chunks it reaches score exactly as the snapshot scores them (the idf from the term's
    whole document frequency), the rest without that term. Other k1 and b than the store was ordered by
    read every posting."""
    index = tiny_index()
    uri = index.write_delta(tmp_path / "index", embedder, terms=True)
    depth = 2
    settings = load_settings(serving={"postings_depth": depth})
    build_store(uri, settings)
    snapshot = build_snapshot(uri, (), with_terms(index, embedder))
    store = ServingStore.open(uri, settings)
    lexical = settings.lexical
    common = [
        t for t in ("topic", "chunk", "item", "about") if len(snapshot.lexical_scores(t, lexical)) > depth
    ]
    assert common, "the tiny index has terms in more chunks than the depth"
    for term in common:
        exact = {str(snapshot.chunk_ids[c]): v for c, v in snapshot.lexical_scores(term, lexical).items()}
        got = store.lexical_scores([term], lexical.k1, lexical.b)
        assert len(got) == depth
        # one term: its impact order is its BM25 order, so the depth keeps its best-scored chunks
        assert sorted(got.values(), reverse=True) == pytest.approx(
            sorted(exact.values(), reverse=True)[:depth]
        )
        assert all(got[c] == pytest.approx(exact[c], rel=1e-5) for c in got)
    other = store.lexical_scores([common[0]], lexical.k1 + 0.5, lexical.b)
    assert len(other) == len(snapshot.lexical_scores(common[0], lexical))


def test_the_best_chunks_of_a_depth_limited_read_are_scored_exactly(tmp_path, embedder) -> None:
    """``serving.bm25_rescore``: after a read one posting deep, the chunks it reached are scored again
    from their own rows (``chunk_term_counts``, written only when rescoring is on) and equal the
    snapshot's exact scores; without the rescoring some of them score lower (they miss a term they
    were not reached by)."""
    index = tiny_index()
    # "alpha" is in every chunk and weighs most in chunk 5; "zebra" is in chunk 0 alone. Read one
    # posting deep, chunk 0 is reached by "zebra" only and misses its "alpha".
    index.texts = [f"alpha marble{i} harbour{i} lantern{i}" for i in range(len(index.texts))]
    index.texts[0] = "zebra alpha river"
    index.texts[5] = "alpha alpha alpha"
    uri = index.write_delta(tmp_path / "index", embedder, terms=True)
    build_store(uri, load_settings(serving={"postings_depth": 1, "bm25_rescore": 100}))
    snapshot = build_snapshot(uri, (), with_terms(index, embedder))
    text = "zebra alpha"
    lexical = load_settings().lexical
    exact = {str(snapshot.chunk_ids[c]): v for c, v in snapshot.lexical_scores(text, lexical).items()}
    rescored = ServingStore.open(uri, load_settings(serving={"postings_depth": 1, "bm25_rescore": 100}))
    got = rescored.lexical_scores(tokenize(text), lexical.k1, lexical.b)
    assert len(got) < len(exact)  # the depth left some chunks out
    assert all(got[c] == pytest.approx(exact[c], rel=1e-5) for c in got)
    partial = ServingStore.open(uri, load_settings(serving={"postings_depth": 1, "bm25_rescore": 0}))
    plain = partial.lexical_scores(tokenize(text), lexical.k1, lexical.b)
    assert set(plain) == set(got)
    assert any(plain[c] < exact[c] - 1e-6 for c in plain)
    assert (
        layout.CHUNK_TERM_COUNTS
        not in build_store(str(tmp_path / "index"), Settings(), force=True)["datasets"]
    )
