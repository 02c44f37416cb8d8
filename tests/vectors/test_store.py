"""Builds beside the Delta tables: written by the index job's step (Spark), found for the recorded
embeddings version, loaded into the snapshot by chunk id, and used only above the threshold."""

from __future__ import annotations

import numpy as np
import pytest
from rich.console import Console
from support.fakes import HashEmbedder, TinyIndex

from lazygraph import tables
from lazygraph.query.snapshot import clear_cache, load_snapshot
from lazygraph.run_context import RunContext, RunLog
from lazygraph.settings import load_settings
from lazygraph.tables.store import IndexStore
from lazygraph.vectors import store
from lazygraph.vectors.job import refresh_vector_index


@pytest.fixture
def tiny(tmp_path):
    texts = [f"topic {i % 4} words {i} and more {i * 7}" for i in range(40)]
    index = TinyIndex(texts=texts)
    index.communities = {"A": (0, None), "B": (0, None)}
    index.memberships = [(i, 0, "A" if i % 2 else "B") for i in range(40)]
    uri = index.write_delta(tmp_path / "index", HashEmbedder())
    vectors = HashEmbedder().encode([f"Title {i}\n{t}" for i, t in enumerate(texts)])
    clear_cache()
    yield index, uri, vectors
    clear_cache()


def _settings(threshold: int):
    return load_settings(vectors={"ann_min_chunks": threshold, "nlist": 4, "nprobe": 4, "candidates": 10})


def _embeddings_version(uri: str) -> int:
    return tables.open_delta(tables.table_uri(uri, tables.CHUNK_EMBEDDINGS)).version()


def _build(spark, uri: str) -> str:
    """The index job's step on this index, as `lazygraph index` runs it; the build's URI."""
    settings = _settings(0)
    ctx = RunContext(spark, settings, IndexStore(spark, uri), RunLog(Console(quiet=True)), input_path="")
    assert refresh_vector_index(ctx) == {"vectors": 40, "encoded": 40}
    return store.build_uri(uri, _embeddings_version(uri))


def test_snapshot_loads_the_build_of_its_embeddings_version_by_chunk_id(tiny, spark) -> None:
    index, uri, vectors = tiny
    settings = _settings(0)
    build = _build(spark, uri)  # codes written by Spark partitions: loading must map ids, not rows
    meta = store.read_meta(build)
    assert meta["vectors"] == 40 and meta["embeddings_version"] == _embeddings_version(uri)
    snap = load_snapshot(uri, settings)
    assert snap.vector_index is not None and snap.vector_index.ntotal == 40
    assert snap.embeddings.size == 0  # the matrix is not held
    found, _ = snap.vector_index.search(vectors[13], 3)
    assert found[0] == 13
    assert int(np.argmax(snap.similarities(vectors[13]))) == 13


def test_below_the_threshold_or_without_a_build_search_is_exact(tiny, spark) -> None:
    index, uri, vectors = tiny
    exact = load_snapshot(uri, _settings(0))  # no build written yet
    assert exact.vector_index is None and exact.embeddings.shape == (40, vectors.shape[1])
    _build(spark, uri)
    clear_cache()
    assert load_snapshot(uri, _settings(41)).vector_index is None  # 40 chunks < 41
    assert load_snapshot(uri, _settings(40)).vector_index is not None


def test_a_build_without_its_meta_is_unfinished_and_ignored(tiny, spark) -> None:
    index, uri, vectors = tiny
    version = _embeddings_version(uri)
    build = _build(spark, uri)
    fs, path = store.arrow_fs(f"{build}/{store.META}")
    fs.delete_file(path)
    assert store.usable_build(uri, version, _settings(0).vectors) is None
    assert store.usable_build(uri, version + 1, _settings(0).vectors) is None
    assert load_snapshot(uri, _settings(0)).vector_index is None
    assert [b.rsplit("/", 1)[1] for b in store.list_builds(uri)] == [f"embeddings-v{version:06d}"]


def test_codes_of_the_wrong_width_are_refused() -> None:
    import pyarrow as pa

    with pytest.raises(Exception, match="rebuild it"):
        store.fixed_width_binary(pa.array([b"abc", b"ab"], pa.binary()), 3)
    assert store.fixed_width_binary(pa.array([b"abc", b"xyz"], pa.binary()), 3).shape == (2, 3)
