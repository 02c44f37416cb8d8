"""`lazygraph maintain`: compacts small files, removes the files no live run pins (and those of writes never
published), keeps every file a live run's versions read, and leaves queries on a pinned run working."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake
from rich.console import Console
from support.fakes import FakeLLM, HashEmbedder, TinyIndex, fake_roles, write_manifest

from lazygraph import manifest, tables
from lazygraph.query.engine import QueryEngine
from lazygraph.query.snapshot import build_snapshot, clear_cache, load_snapshot
from lazygraph.settings import load_settings
from lazygraph.tables.maintain import maintain_index
from lazygraph.tables.read import read_table

TEXTS = [
    f"chunk {i} about the tide and the harbour REL" if i % 3 == 0 else f"chunk {i} of bread"
    for i in range(12)
]
READ = (tables.CHUNKS, tables.CHUNK_EMBEDDINGS, tables.EDGES, tables.CONCEPTS, tables.COMMUNITIES)


def _index(root: Path) -> TinyIndex:
    index = TinyIndex(texts=TEXTS, concepts={"tide": [0, 3], "harbour": [3, 6], "bread": [1, 2]})
    index.edges = [("tide", "harbour")]
    index.communities = {"c0": (0, None)}
    index.memberships = [(i, 0, "c0") for i in range(len(TEXTS))]
    index.write_delta(root)  # run "run": every table at version 0
    return index


def _versions(root: Path) -> dict[str, int]:
    return {name: DeltaTable(str(root / name)).version() for name in READ if (root / name).exists()}


def _snapshot_rows(root: Path, versions: dict[str, int]) -> dict[str, list[str]]:
    opened = manifest.open_complete(str(root), READ, versions)
    return {
        name: sorted(json.dumps(row, sort_keys=True, default=str) for row in read_table(t).to_pylist())
        for name, t in opened.items()
    }


@pytest.fixture()
def index_with_history(tmp_path: Path) -> tuple[Path, dict[str, dict[str, int]]]:
    """Three complete runs (the later two rewrite edges and hold the chunks in three small files), a
    write no run published, and a file no commit references."""
    root = tmp_path / "index"
    index = _index(root)
    arrow = index.arrow()
    runs = {"run": _versions(root)}
    chunks = arrow[tables.CHUNKS]
    write_deltalake(str(root / tables.CHUNKS), chunks.slice(0, 4), mode="overwrite")  # the same rows,
    write_deltalake(str(root / tables.CHUNKS), chunks.slice(4, 4), mode="append")  # in three small files
    write_deltalake(str(root / tables.CHUNKS), chunks.slice(8), mode="append")
    for run in ("run-2", "run-3"):
        write_deltalake(str(root / tables.EDGES), arrow[tables.EDGES], mode="overwrite")
        runs[run] = _versions(root)
        write_manifest(root, runs[run], run_id=run)
        time.sleep(0.01)
    write_deltalake(str(root / tables.EDGES), arrow[tables.EDGES].slice(0, 0), mode="overwrite")  # killed run
    orphan = root / tables.CHUNKS / "part-99999-orphan.snappy.parquet"
    orphan.write_bytes(b"left by a killed task")
    old = time.time() - 7200
    for path in root.rglob("*.parquet"):
        os.utime(path, (old, old))
    return root, runs


def _settings(tmp_path: Path, **maintenance):
    return load_settings(home=tmp_path, maintenance={"keep_runs": 2, "keep_hours": 0, **maintenance})


def test_maintain_keeps_what_live_runs_read_and_removes_the_rest(index_with_history, tmp_path) -> None:
    root, runs = index_with_history
    settings = _settings(tmp_path, min_file_age_hours=1)
    before = {run: _snapshot_rows(root, versions) for run, versions in runs.items() if run != "run"}
    edges_files = len(list((root / tables.EDGES).glob("*.parquet")))
    chunk_files_before = len(DeltaTable(str(root / tables.CHUNKS)).file_uris())

    dry = maintain_index(settings, str(root), Console(quiet=True), dry_run=True)
    assert dry["removed_files"] > 0 and len(list((root / tables.EDGES).glob("*.parquet"))) == edges_files

    report = maintain_index(settings, str(root), Console(quiet=True))
    assert report["undone"] == [tables.EDGES], "the unpublished write is undone"
    assert tables.CHUNKS in report["compacted"]
    assert len(DeltaTable(str(root / tables.CHUNKS)).file_uris()) < chunk_files_before
    assert not (root / tables.CHUNKS / "part-99999-orphan.snappy.parquet").exists()
    assert report["removed_files"] >= 3
    # The live runs (run-3, and run-2 as the second newest before maintain's own) read exactly as before.
    for run in ("run-2", "run-3"):
        assert _snapshot_rows(root, runs[run]) == before[run], run
    # The first run is not live: the edges it alone referenced are gone.
    with pytest.raises(Exception):  # noqa: B017 - deltalake or pyarrow, whichever notices first
        read_table(DeltaTable(str(root / tables.EDGES), version=runs["run"][tables.EDGES]))
    # Maintain published the compacted files under the same index version.
    last = manifest.last_complete_run(str(root))
    assert last["mode"] == "maintain"
    runs_by_id = {row["run_id"]: row for row in _manifest_rows(root)}
    assert manifest.index_version(last) == manifest.index_version(runs_by_id["run-3"])


def _manifest_rows(root: Path) -> list[dict]:
    return DeltaTable(str(root / tables.MANIFEST)).to_pyarrow_table().to_pylist()


def test_a_query_on_the_pinned_version_still_works_after_maintain(index_with_history, tmp_path) -> None:
    root, runs = index_with_history
    settings = _settings(tmp_path, min_file_age_hours=0)
    maintain_index(settings, str(root), Console(quiet=True))
    # A batch that pinned run-3 before maintain opens its tables now.
    pinned = runs["run-3"]
    names = (*READ, tables.MENTIONS, tables.CONCEPT_COMMUNITIES, tables.CHUNK_COMMUNITIES)
    opened = manifest.open_complete(str(root), names, {**pinned, **_versions_of(root, names, pinned)})
    arrow = {name: read_table(t) for name, t in opened.items()}
    snapshot = build_snapshot(str(root), tuple(sorted(pinned.items())), arrow)
    llm = FakeLLM()
    engine = QueryEngine(settings, snapshot, roles=fake_roles(llm), embedder=HashEmbedder())
    result = engine.answer("Where does the tide reach the harbour?", budget=4)
    assert result.answer and llm.relevance_batches
    clear_cache()
    assert set(load_snapshot(str(root)).chunk_ids.tolist()) == set(snapshot.chunk_ids.tolist())


def _versions_of(root: Path, names: tuple[str, ...], pinned: dict[str, int]) -> dict[str, int]:
    """Versions of the tables the fixture never rewrote (written once, by the first run)."""
    return {name: 0 for name in names if name not in pinned}


def test_maintain_waits_for_no_one_and_refuses_a_held_index(index_with_history, tmp_path) -> None:
    from lazygraph.tables.lease import IndexBusyError, WriterLease

    root, _ = index_with_history
    holder = WriterLease(str(root), "run-writing", _settings(tmp_path))
    holder.acquire(0)
    try:
        with pytest.raises(IndexBusyError, match="run-writing"):
            maintain_index(_settings(tmp_path), str(root), Console(quiet=True))
    finally:
        holder.release()
