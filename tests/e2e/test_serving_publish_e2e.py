"""Every index run builds the serving store of the versions it publishes (the real pipeline: Spark,
Delta Lake, spaCy, MiniLM, Lance): after a create, an append of other documents and a delete, the store
``ServingStore.open`` finds is the one of the manifest's last run and holds the chunks table's rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from support.corpus import DOCS, write_jsonl

from lazygraph import manifest, pipeline, tables
from lazygraph.demo_data import sample_corpus_path
from lazygraph.serving import ServingStore, layout
from lazygraph.tables.read import read_table

pytestmark = pytest.mark.e2e

CONSOLE = Console(stderr=True)
DELETED = "s02"


def _lance_rows(store: ServingStore, name: str) -> int:
    import lance

    return lance.dataset(layout.dataset_uri(store.uri, name)).count_rows()


def _check_store(index: str, settings, report: dict) -> ServingStore:
    """The run built (or reused) the store of exactly the versions it published, with every chunk."""
    assert report["serving_store"]["status"] in ("built", "reused"), report["serving_store"]
    run, recorded = manifest.complete_versions(index, settings)
    assert run["run_id"] == report["run_id"]
    store = ServingStore.open(index, settings)
    assert store.meta["tables"] == layout.source_versions(recorded)
    expected = layout.store_uri(index, layout.source_versions(recorded))
    assert store.uri == report["serving_store"]["store"] == expected
    chunks = manifest.open_complete(index, [tables.CHUNKS], recorded, settings)[tables.CHUNKS]
    n_chunks = read_table(chunks, settings).num_rows
    assert store.meta["datasets"][layout.CHUNKS] == _lance_rows(store, layout.CHUNKS) == n_chunks
    return store


def test_create_append_and_delete_each_publish_their_serving_store(settings, tmp_path: Path) -> None:
    index = str(tmp_path / "index")
    created = pipeline.build_index(settings, str(sample_corpus_path()), index, False, CONSOLE)
    assert created["serving_store"]["status"] == "built"
    first = _check_store(index, settings, created)
    store_s, run_s = created["serving_store"]["seconds"], created["total_seconds"]
    print(f"sample corpus: store build {store_s:.1f} s after an index run of {run_s:.1f} s")

    others = write_jsonl(tmp_path / "others.jsonl", DOCS[:4])
    appended = pipeline.build_index(settings, str(others), index, True, CONSOLE)
    assert appended["serving_store"]["status"] == "built"
    second = _check_store(index, settings, appended)
    assert second.uri != first.uri
    assert {c.doc_id for c in second.chunks(_chunk_ids(index, settings))} >= {d[0] for d in DOCS[:4]}

    ids = tmp_path / "delete.txt"
    ids.write_text(f"{DELETED}\n")
    deleted = pipeline.delete_documents(settings, str(ids), index, CONSOLE)
    assert deleted["serving_store"]["status"] == "built"
    third = _check_store(index, settings, deleted)
    assert DELETED not in {c.doc_id for c in third.chunks(_chunk_ids(index, settings))}
    assert layout.read_meta(first.uri, settings) is not None  # older stores stay until `maintain`


def _chunk_ids(index: str, settings) -> list[str]:
    _, recorded = manifest.complete_versions(index, settings)
    chunks = manifest.open_complete(index, [tables.CHUNKS], recorded, settings)[tables.CHUNKS]
    return read_table(chunks, settings).column("chunk_id").to_pylist()
