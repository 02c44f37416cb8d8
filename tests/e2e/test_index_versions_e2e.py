"""A query never sees a half-written append, and a later append of other documents never publishes it:
the real pipeline, interrupted after its first writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable
from rich.console import Console
from support.corpus import DOCS, write_jsonl

from lazygraph import pipeline, tables
from lazygraph.manifest import complete_versions
from lazygraph.query.snapshot import clear_cache, load_snapshot
from lazygraph.settings import load_settings
from lazygraph.stats import index_stats

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def settings():
    return load_settings(
        spark={"master": "local[2]", "shuffle_partitions": 2, "driver_memory": "2g"},
        chunking={"chunk_tokens": 32, "overlap_tokens": 4},
    )


def _chunk_ids(index: Path) -> set[str]:
    clear_cache()  # read the tables again: the cache would hide a wrong version
    return set(load_snapshot(str(index)).chunk_ids.tolist())


def test_an_interrupted_append_is_invisible_and_never_published_by_a_later_append(
    tmp_path: Path, settings, monkeypatch
) -> None:
    """The run after the interrupted one appends *other* documents: the dead run's chunks, mentions and
    embeddings are undone, not published with it."""
    console = Console(quiet=True)
    index = tmp_path / "index"
    build = pipeline.build_index(
        settings, str(write_jsonl(tmp_path / "a.jsonl", DOCS[:4])), str(index), False, console
    )
    first = _chunk_ids(index)
    assert len(first) == build["counts"]["chunks"]
    crashed = write_jsonl(tmp_path / "b.jsonl", DOCS[7:9])

    def crash(*args, **kwargs):  # after chunks, mentions and embeddings are merged, before the graph
        raise RuntimeError("killed")

    monkeypatch.setattr(pipeline, "_rebuild_graph", crash)
    with pytest.raises(RuntimeError, match="killed"):
        pipeline.build_index(settings, str(crashed), str(index), True, console)
    _, recorded = complete_versions(str(index))
    chunks_table = DeltaTable(str(index / tables.CHUNKS))
    assert chunks_table.version() > recorded[tables.CHUNKS]  # the append did write chunks...
    assert chunks_table.to_pyarrow_dataset().count_rows() > len(first)
    assert _chunk_ids(index) == first  # ...which readers do not see
    assert index_stats(settings, str(index))["rows"][tables.CHUNKS] == len(first)

    monkeypatch.undo()
    other = write_jsonl(tmp_path / "c.jsonl", DOCS[9:11])
    appended = pipeline.build_index(settings, str(other), str(index), True, console)
    assert appended["mode"] == "append" and appended["new"]["documents"] == 2
    later = _chunk_ids(index)
    assert first < later and len(later) == appended["counts"]["chunks"]
    expected = {d for d, _, _ in DOCS[:4] + DOCS[9:11]}
    snapshot = load_snapshot(str(index))
    assert set(snapshot.chunk_doc_ids.tolist()) == expected, "no chunk of the killed run is published"
    _, recorded = complete_versions(str(index))
    for name in (tables.CHUNKS, tables.CHUNK_EMBEDDINGS, tables.CHUNK_TERMS, tables.DOCUMENTS):
        pinned = DeltaTable(str(index / name), version=recorded[name]).to_pyarrow_table()
        ids = set(pinned["doc_id"].to_pylist()) if "doc_id" in pinned.column_names else None
        if ids is None:
            ids = {
                doc
                for chunk, doc in zip(
                    snapshot.chunk_ids.tolist(), snapshot.chunk_doc_ids.tolist(), strict=True
                )
                if chunk in set(pinned["chunk_id"].to_pylist())
            }
            assert len(set(pinned["chunk_id"].to_pylist())) == len(later), f"orphan rows in {name}"
        assert ids == expected, name
    mentions = DeltaTable(str(index / tables.MENTIONS), version=recorded[tables.MENTIONS]).to_pyarrow_table()
    assert set(mentions["chunk_id"].to_pylist()) <= later, "no mention of a chunk the index does not hold"
