"""Which serving stores an index keeps: `lazygraph maintain` removes those no live run names (complete or
not), honours --dry-run, and builds the store of the current versions when it is missing."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from support.fakes import HashEmbedder, append_chunk_run, tiny_serving_index

from lazygraph import tables
from lazygraph.serving import ServingStore, build_store, layout
from lazygraph.serving.publish import BUILT
from lazygraph.serving.retention import pinned_stores, remove_unpinned_stores
from lazygraph.settings import Settings, load_settings
from lazygraph.tables.maintain import complete_runs, maintain_index


@pytest.fixture()
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    return load_settings(home=tmp_path / "home", serving={"concept_vectors": False})


@pytest.fixture()
def index(tmp_path: Path, embedder: HashEmbedder) -> str:
    return tiny_serving_index(tmp_path, embedder)


def _console() -> Console:
    return Console(file=io.StringIO(), width=80, force_terminal=False)


# ---- retention ------------------------------------------------------------------------------------------
def test_unpinned_stores_are_removed_and_a_dry_run_removes_nothing(index, settings, embedder) -> None:
    old = build_store(index, settings)["store"]
    append_chunk_run(index, embedder, "append-1")
    current = build_store(index, settings)["store"]
    unfinished = layout.store_uri(index, {"chunks": 99})
    Path(tables.local_path(unfinished), "chunks.lance").mkdir(parents=True)  # a build that was killed
    runs = complete_runs(tables.normalise_index_uri(index), settings)
    newest = runs[:1]
    assert pinned_stores(index, newest) == {current}

    assert sorted(remove_unpinned_stores(index, newest, settings, dry_run=True)) == sorted([old, unfinished])
    assert sorted(layout.list_stores(index, settings)) == sorted([old, current, unfinished])
    assert remove_unpinned_stores(index, runs, settings) == [unfinished]  # both runs live: both stores kept
    assert remove_unpinned_stores(index, newest, settings) == [old]
    assert layout.list_stores(index, settings) == [current]
    ServingStore.open(index, settings)


def test_maintain_rebuilds_a_missing_store_and_removes_unpinned_ones(index, tmp_path, embedder) -> None:
    settings = load_settings(
        home=tmp_path / "home",
        serving={"concept_vectors": False},
        maintenance={"keep_runs": 1, "keep_hours": 0},
    )
    old = build_store(index, settings)["store"]
    append_chunk_run(index, embedder, "append-1")  # published, its store never built
    console = _console()

    dry = maintain_index(settings, index, console, dry_run=True)
    assert dry["serving_stores_removed"] == [old] and dry["serving_store"] is None
    assert layout.list_stores(index, settings) == [old]

    report = maintain_index(settings, index, console)
    assert report["serving_store"]["status"] == BUILT
    assert report["serving_stores_removed"] == [old]
    assert layout.list_stores(index, settings) == [ServingStore.open(index, settings).uri]
