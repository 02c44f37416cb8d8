"""The serving store as part of publishing (no Spark): every run that writes a manifest row builds the
store of its versions under its writer lease, a failed build leaves the run published, `lazygraph
store build` takes the lease too, and a store is complete only once ``store.json`` is written, whole."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from rich.console import Console
from support.fakes import HashEmbedder, append_chunk_run, tiny_serving_index

from lazygraph import api, manifest, pipeline, tables
from lazygraph.errors import IndexStateError, StoreOutOfDateError
from lazygraph.serving import ServingStore, build_store, layout
from lazygraph.serving import publish as publish_module
from lazygraph.serving.publish import BUILT, FAILED, REUSED, SKIPPED, build_after_publish
from lazygraph.settings import Settings, load_settings
from lazygraph.tables.lease import IndexBusyError, WriterLease


@pytest.fixture()
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    # No embedding model in a unit test: concepts are stored without vectors unless a test encodes them.
    return load_settings(home=tmp_path / "home", serving={"concept_vectors": False})


@pytest.fixture()
def index(tmp_path: Path, embedder: HashEmbedder) -> str:
    return tiny_serving_index(tmp_path, embedder)


def _console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=80, force_terminal=False), buffer


# ---- publishing -----------------------------------------------------------------------------------------
def test_a_published_run_gets_its_store_then_reuses_it(index, settings) -> None:
    console, _ = _console()
    first = build_after_publish(settings, index, console)
    assert first["status"] == BUILT and first["seconds"] >= 0
    store = ServingStore.open(index, settings)
    assert store.uri == first["store"] and store.meta["run_id"] == "run"
    again = build_after_publish(settings, index, console)  # a rerun: the same versions
    assert again == {**again, "status": REUSED, "store": first["store"]}


def test_concept_names_are_embedded_with_the_encoder_given(index, settings, embedder) -> None:
    serving = settings.serving.model_copy(update={"concept_vectors": True})
    on = settings.model_copy(update={"serving": serving})
    report = build_after_publish(on, index, _console()[0], encode=embedder.encode)
    assert report["status"] == BUILT
    assert ServingStore.open(index, on).meta["concept_vectors"] is True


def test_the_next_run_reports_the_concept_vectors_it_took_from_the_last_store(
    index, settings, embedder
) -> None:
    on = settings.model_copy(
        update={"serving": settings.serving.model_copy(update={"concept_vectors": True})}
    )
    names: list[str] = []

    def encode(texts: list[str]):
        names.extend(texts)
        return embedder.encode(texts)

    encode.key = "hash-embedder"  # type: ignore[attr-defined]
    assert build_after_publish(on, index, _console()[0], encode=encode)["concept_vectors_reused"] == 0
    assert sorted(names) == ["harbour", "tide"]
    append_chunk_run(index, embedder, "append-1")  # a new version, the same concepts
    report = build_after_publish(on, index, _console()[0], encode=encode)
    assert report["status"] == BUILT and report["concept_vectors_reused"] == 2
    assert sorted(names) == ["harbour", "tide"]  # nothing encoded again


def test_the_setting_off_skips_the_store(index, tmp_path) -> None:
    off = load_settings(home=tmp_path / "home", serving={"build_on_index": False})
    assert build_after_publish(off, index, _console()[0])["status"] == SKIPPED
    assert layout.list_stores(index, off) == []


def test_a_failed_build_is_reported_in_one_yellow_line(index, settings, monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise OSError("the disk is full\nsecond line")

    monkeypatch.setattr(publish_module, "build_store", broken)
    console, out = _console()
    report = build_after_publish(settings, index, console)
    assert report == {"status": FAILED, "message": "OSError: the disk is full"}
    printed = out.getvalue()
    assert printed.count("\n") == 1 and "serving store not built" in printed
    assert f"lazygraph store build --index {tables.normalise_index_uri(index)}" in printed


def test_a_run_that_lost_its_lease_leaves_the_store_unfinished(index, settings) -> None:
    class LostLease:
        def check(self) -> None:
            raise IndexStateError("its writer lease was taken by another run")

    report = build_after_publish(settings, index, _console()[0], lease=LostLease())
    assert report["status"] == FAILED and "writer lease" in report["message"]
    with pytest.raises(StoreOutOfDateError):
        ServingStore.open(index, settings)


class _FakeLog:
    """What ``pipeline._publish`` uses of a run's log."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.timings: dict[str, float] = {}

    def stage(self, name: str):
        from contextlib import contextmanager

        @contextmanager
        def timed():
            yield {}
            self.timings[name] = 0.0

        return timed()


class _FakeRun:
    def __init__(self, index: str, settings: Settings, console: Console) -> None:
        self.index_uri, self.settings, self.lease = tables.normalise_index_uri(index), settings, None
        self.log = _FakeLog(console)
        self.console = console


def test_a_failed_store_build_leaves_the_index_run_published(index, settings, monkeypatch, embedder) -> None:
    def record_run(ctx, mode, new, rejected, update):  # the manifest row, as the pipeline writes it
        append_chunk_run(ctx.index_uri, embedder, "append-1")
        return {"run_id": "append-1", "mode": mode}

    def broken(*args, **kwargs):
        raise RuntimeError("lance could not write")

    monkeypatch.setattr(pipeline, "record_run", record_run)
    monkeypatch.setattr(publish_module, "build_store", broken)
    console, out = _console()
    report = pipeline._publish(_FakeRun(index, settings, console), "append", {}, {}, None)
    assert report["serving_store"]["status"] == FAILED
    assert manifest.last_complete_run(index, settings)["run_id"] == "append-1"
    assert "serving store not built" in out.getvalue()


def test_store_build_takes_the_writer_lease(index, settings) -> None:
    busy = settings.model_copy(update={"writer": settings.writer.model_copy(update={"wait_s": 0})})
    holder = WriterLease(index, "an-index-run", busy, command="lazygraph index --append")
    assert holder.try_acquire() is None
    try:
        with pytest.raises(IndexBusyError, match="an-index-run"):
            api.build_store(index, settings=busy, console=_console()[0])
    finally:
        holder.release()
    assert api.build_store(index, settings=busy, console=_console()[0])["built"]


# ---- the metadata file ------------------------------------------------------------------------------------
def test_store_json_replaces_the_old_one_whole_and_leaves_no_temporary_file(tmp_path, monkeypatch) -> None:
    store = str(tmp_path / "serving_store" / "v-test")
    layout.write_meta(store, {"format": 1, "n": 1})
    assert layout.read_meta(store) == {"format": 1, "n": 1}

    def crash(*args, **kwargs):
        raise OSError("killed before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="killed"):
        layout.write_meta(store, {"format": 1, "n": 2})
    assert layout.read_meta(store) == {"format": 1, "n": 1}  # the old one, whole
    assert sorted(p.name for p in Path(store).iterdir()) == [layout.META]


def test_a_build_that_stops_midway_leaves_a_store_no_reader_opens(index, settings, monkeypatch) -> None:
    from lazygraph.serving import writer

    def concepts(self):
        raise OSError("killed while writing the concepts")

    monkeypatch.setattr(writer._Writer, "concepts", concepts)
    with pytest.raises(OSError):
        build_store(index, settings)
    (store,) = layout.list_stores(index, settings)
    assert Path(tables.local_path(store), "chunks.lance").exists() and layout.read_meta(store) is None
    with pytest.raises(StoreOutOfDateError, match="not finished: an index run may be building it"):
        ServingStore.open(index, settings)
    monkeypatch.undo()
    assert build_after_publish(settings, index, _console()[0])["status"] == BUILT  # started over
    assert json.loads(Path(tables.local_path(store), layout.META).read_text())["run_id"] == "run"
