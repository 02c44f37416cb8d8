"""``query.index_source: auto``: the serving store for a method it serves on an index of at least
``serving.store_above_chunks`` chunks whose store opens, else the snapshot, with one console line when
a large index falls back; ``snapshot`` and ``store`` keep their strict meanings. On a 40-chunk index
written as Delta tables with its store, the threshold lowered to cross it."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from support.fakes import FakeLLM, HashEmbedder, TinyIndex, fake_roles, write_manifest

from lazygraph import api, manifest
from lazygraph.query import engine as engine_module
from lazygraph.query import source as source_module
from lazygraph.query.engine import QueryEngine, check_index_source, choose_index_source
from lazygraph.serving import ServingStore, build_store, layout
from lazygraph.settings import Settings, load_settings

QUESTION = "Which fishers mend their nets at the harbour?"
N_CHUNKS = 40


@pytest.fixture()
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture()
def index(tmp_path: Path, embedder: HashEmbedder) -> str:
    topics = ["harbour", "lighthouse", "tide", "storm", "fishers", "nets"]
    texts = [
        f"Note {i}: the {topics[i % 6]} and the {topics[(i + 2) % 6]} of the coast." for i in range(N_CHUNKS)
    ]
    tiny = TinyIndex(texts=texts, doc_ids=[f"doc{i // 4}" for i in range(N_CHUNKS)])
    uri = tiny.write_delta(tmp_path / "index", embedder)
    build_store(uri, load_settings(), encode=embedder.encode)
    return uri


def settings_for(source: str = "auto", above: int = 10) -> Settings:
    return load_settings(query={"index_source": source}, serving={"store_above_chunks": above})


def recording_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=80), out


def no_snapshot(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("the snapshot was loaded")


def no_store(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("the serving store was opened")


def open_engine(settings: Settings, uri: str, embedder: HashEmbedder, method: str = "vector") -> QueryEngine:
    roles = fake_roles(FakeLLM())
    return QueryEngine.open(settings, uri, Console(quiet=True), roles=roles, embedder=embedder, method=method)


def record_chunk_count(uri: str) -> None:
    """A later run's manifest row with the same versions and the chunk count the pipeline records."""
    _, versions = manifest.complete_versions(uri)
    write_manifest(Path(uri), versions, run_id="run2", counts={"chunks": N_CHUNKS})


def remove_store(uri: str) -> None:
    _, versions = manifest.complete_versions(uri)
    shutil.rmtree(layout.store_uri(uri, layout.source_versions(versions)).removeprefix("file://"))


# ---- auto ------------------------------------------------------------------------------------------
def test_auto_is_the_default_and_reads_the_snapshot_below_the_threshold(index, embedder, monkeypatch) -> None:
    assert load_settings().query.index_source == "auto"
    assert load_settings().serving.store_above_chunks == 1_000_000
    monkeypatch.setattr(ServingStore, "open", no_store)
    engine = open_engine(settings_for(above=N_CHUNKS + 1), index, embedder)
    assert engine.has_snapshot
    assert engine.answer(QUESTION, method="vector").index_source == "snapshot"


def test_auto_reads_the_store_from_the_threshold_for_the_vector_method(index, embedder, monkeypatch) -> None:
    monkeypatch.setattr(engine_module, "load_snapshot", no_snapshot)
    console, out = recording_console()
    assert choose_index_source(settings_for(above=N_CHUNKS), index, "vector", console=console) == "store"
    engine = open_engine(settings_for(above=N_CHUNKS), index, embedder)
    assert not engine.has_snapshot
    result = engine.answer(QUESTION, method="vector")
    assert result.index_source == "store" and result.to_json()["index_source"] == "store"
    assert result.context_chunk_ids and out.getvalue() == ""


def test_a_vector_preset_counts_as_the_vector_method(index) -> None:
    assert choose_index_source(settings_for(), index, "lazy", "SS_8K", Console(quiet=True)) == "store"


def test_auto_falls_back_to_the_snapshot_for_a_method_the_store_cannot_serve(index, monkeypatch) -> None:
    from lazygraph.query import search
    from lazygraph.query.search.vector import VectorSearch

    class InMemoryOnly(VectorSearch):
        serves_from_store = False

    monkeypatch.setitem(search.SEARCHES, "in-memory", InMemoryOnly)
    console, out = recording_console()
    assert choose_index_source(settings_for(), index, "in-memory", console=console) == "snapshot"
    lines = out.getvalue().strip().splitlines()
    assert len(lines) == 1 and "the in-memory method needs the snapshot" in lines[0]
    assert "--method vector" in lines[0]
    check_index_source(settings_for(), "in-memory")  # auto refuses nothing


def test_auto_reads_lazy_from_the_store_unless_the_store_predates_it(index) -> None:
    console, out = recording_console()
    assert choose_index_source(settings_for(), index, "lazy", console=console) == "store"
    assert out.getvalue() == ""
    _, versions = manifest.complete_versions(index)
    store = layout.store_uri(index, layout.source_versions(versions))
    layout.write_meta(store, layout.read_meta(store) | {"format": 6})  # written before format 7
    assert choose_index_source(settings_for(), index, "vector", console=console) == "store"
    assert choose_index_source(settings_for(), index, "lazy", console=console) == "snapshot"
    lines = out.getvalue().strip().splitlines()
    assert len(lines) == 1 and "before it held what the lazy method reads" in lines[0]
    assert "lazygraph store build" in lines[0] and "--force" in lines[0]


def test_auto_falls_back_to_the_snapshot_when_the_store_is_missing(index, embedder) -> None:
    record_chunk_count(index)  # the count now comes from the manifest, the store being gone
    remove_store(index)
    console, out = recording_console()
    assert choose_index_source(settings_for(), index, "vector", console=console) == "snapshot"
    lines = out.getvalue().strip().splitlines()
    assert len(lines) == 1 and "reading the snapshot" in lines[0] and "lazygraph store build" in lines[0]
    engine = open_engine(settings_for(), index, embedder)
    assert engine.answer(QUESTION, method="vector").index_source == "snapshot"


def test_the_chunk_count_is_read_from_the_manifest_before_the_store(index, monkeypatch) -> None:
    record_chunk_count(index)
    monkeypatch.setattr(layout, "read_meta", no_store)
    run = manifest.last_complete_run(index)
    assert source_module.indexed_chunks(index, run, load_settings()) == N_CHUNKS


def test_a_missing_store_below_the_threshold_says_nothing(index) -> None:
    remove_store(index)
    console, out = recording_console()
    assert (
        choose_index_source(settings_for(above=N_CHUNKS + 1), index, "vector", console=console) == "snapshot"
    )
    assert out.getvalue() == ""


def test_the_api_answers_lazy_on_the_engine_of_the_store(index, embedder, monkeypatch) -> None:
    import lazygraph.embed

    monkeypatch.setattr(lazygraph.embed, "get_embedder", lambda cfg: embedder)
    monkeypatch.setattr(engine_module, "make_roles", lambda settings, role: fake_roles(FakeLLM()))
    monkeypatch.setattr(engine_module, "load_snapshot", no_snapshot)
    opened = api.open_index(index, settings=settings_for(), console=Console(quiet=True))
    assert opened.query(QUESTION, method="vector").to_json()["index_source"] == "store"
    engine = opened.engine("vector")
    assert not engine.has_snapshot
    assert opened.engine("lazy") is engine  # the store serves the lazy method too: no second engine
    assert opened.query(QUESTION, method="lazy").to_json()["index_source"] == "store"


# ---- strict sources --------------------------------------------------------------------------------
def test_snapshot_never_opens_the_store_even_above_the_threshold(index, embedder, monkeypatch) -> None:
    monkeypatch.setattr(ServingStore, "open", no_store)
    engine = open_engine(settings_for("snapshot", above=0), index, embedder)
    assert engine.answer(QUESTION, method="vector").index_source == "snapshot"


def test_store_reads_the_store_below_the_threshold_for_every_method(index, embedder, monkeypatch) -> None:
    monkeypatch.setattr(engine_module, "load_snapshot", no_snapshot)
    settings = settings_for("store", above=N_CHUNKS + 1)
    engine = open_engine(settings, index, embedder)
    for method in ("vector", "hybrid", "lazy"):
        check_index_source(settings, method)
        assert engine.answer(QUESTION, method=method).index_source == "store"


# ---- the batch driver --------------------------------------------------------------------------------
def test_the_batch_driver_chooses_once_and_reports_the_source(index, embedder, tmp_path, monkeypatch) -> None:
    from test_query_store_reader import InProcessPool, batch_in_process_without_snapshot

    from lazygraph.serve import batch

    batch_in_process_without_snapshot(monkeypatch, embedder)
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"query_id": "q0", "question": QUESTION}) + "\n")

    report = batch.run_batch(settings_for(), index, queries, str(tmp_path / "out"), method="vector")
    assert report["answered"] == 1 and report["errors"] == 0
    assert report["index_source"] == "store" and InProcessPool.snapshots == [None]
