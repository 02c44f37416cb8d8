"""Readers pin the table versions of the last complete run (Delta tables written with deltalake, no Spark)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from support.fakes import TinyIndex, write_manifest

from lazygraph import tables
from lazygraph.errors import IndexNotFoundError, IndexStateError
from lazygraph.query.snapshot import clear_cache, load_snapshot
from lazygraph.settings import load_settings
from lazygraph.stats import index_stats


def _index(n: int) -> TinyIndex:
    index = TinyIndex(texts=[f"chunk {i} about tides" for i in range(n)])
    index.communities = {"all": (0, None)}
    index.memberships = [(i, 0, "all") for i in range(n)]
    index.concepts = {"tide": list(range(n)), "moon": [0]}
    index.edges = [("tide", "moon")]  # typed tables for `lazygraph stats`
    return index


def _versions(root: Path) -> dict[str, int]:
    return {p.name: DeltaTable(str(p)).version() for p in root.iterdir() if p.name != tables.MANIFEST}


def test_no_index_and_an_unfinished_first_build_are_told_apart(tmp_path: Path, hash_embedder) -> None:
    clear_cache()
    with pytest.raises(IndexNotFoundError, match="no lazygraph index at .*lazygraph index --input"):
        load_snapshot(str(tmp_path / "nothing"))
    root = tmp_path / "half"
    for name, table in _index(3).arrow(hash_embedder).items():  # tables, but no manifest row
        write_deltalake(str(root / name), table)
    for check in (load_snapshot, lambda uri: index_stats(load_settings(home=tmp_path), uri)):
        with pytest.raises(IndexStateError, match="first build never completed; run `lazygraph index"):
            check(str(root))
    write_manifest(root, _versions(root), status="running")  # a row that is not "complete" counts for nothing
    with pytest.raises(IndexStateError, match="first build never completed"):
        load_snapshot(str(root))


def test_readers_see_the_last_complete_run_not_the_latest_writes(tmp_path: Path, hash_embedder) -> None:
    clear_cache()
    root = tmp_path / "idx"
    first = _index(3)
    uri = first.write_delta(root, hash_embedder)
    settings = load_settings(home=tmp_path)
    # A later run writes more chunks and their vectors, then dies before its manifest row.
    grown = _index(5).arrow(hash_embedder)
    for name in (tables.CHUNKS, tables.CHUNK_EMBEDDINGS):
        write_deltalake(str(root / name), grown[name].slice(3), mode="append")
    assert DeltaTable(str(root / tables.CHUNKS)).to_pyarrow_dataset().count_rows() == 5
    snap = load_snapshot(uri)
    assert snap.n_chunks == 3 and list(snap.chunk_ids) == [first.chunk_id(i) for i in range(3)]
    assert index_stats(settings, uri)["rows"][tables.CHUNKS] == 3
    # Once a run completes and records the new versions, readers move to them.
    write_manifest(root, _versions(root), run_id="second")
    later = load_snapshot(uri)
    assert later is not snap and later.n_chunks == 5
    assert dict(later.versions)[tables.CHUNKS] == 1
    stats = index_stats(settings, uri)
    assert stats["rows"][tables.CHUNKS] == 5 and stats["last_run"]["run_id"] == "second"
    assert stats["rows"][tables.MANIFEST] == 2


def test_a_recorded_version_that_is_gone_is_a_clear_error(tmp_path: Path, hash_embedder) -> None:
    clear_cache()
    root = tmp_path / "idx"
    uri = _index(2).write_delta(root, hash_embedder)
    write_manifest(root, {**_versions(root), tables.CHUNKS: 7}, run_id="later")
    with pytest.raises(IndexStateError, match="chunks .* can no longer be read at version 7"):
        load_snapshot(uri)


def test_pinned_tables_keep_their_schema(tmp_path: Path, hash_embedder) -> None:
    clear_cache()
    root = tmp_path / "idx"
    uri = _index(2).write_delta(root, hash_embedder)
    # An overwrite after the complete run (e.g. the communities stage of a killed append) is not seen.
    write_deltalake(
        str(root / tables.COMMUNITIES),
        pa.table({"community_id": ["x"], "level": pa.array([0], pa.int32())}),
        mode="overwrite",
        schema_mode="overwrite",
    )
    assert list(load_snapshot(uri).community_ids) == ["all"]
