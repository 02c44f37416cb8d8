"""Deleting and appending documents with the real pipeline (Spark, Delta Lake, spaCy, MiniLM).

Nothing derived from a deleted document survives and the graph equals a fresh build without it; bad
requests change nothing; an append MERGEs count changes into the count tables, and the result equals
a fresh build of the final corpus. The tests share one index and run in order: build, refuse bad
deletes, delete, query, append, delete again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from rich.console import Console
from support.corpus import DOCS, write_jsonl
from support.fakes import FakeLLM

from lazygraph import pipeline, tables
from lazygraph.errors import IndexNotFoundError, InputError
from lazygraph.manifest import complete_versions
from lazygraph.query.snapshot import clear_cache, load_snapshot
from lazygraph.settings import load_settings
from lazygraph.stats import index_stats

pytestmark = pytest.mark.e2e

DELETED = ("mozart", "salzburg")
CONSOLE = Console(quiet=True)


@pytest.fixture(scope="module")
def settings():
    return load_settings(
        spark={"master": "local[2]", "shuffle_partitions": 2, "driver_memory": "2g"},
        chunking={"chunk_tokens": 32, "overlap_tokens": 4},
    )


def rows(index: Path, name: str) -> list[dict]:
    return DeltaTable(str(index / name)).to_pyarrow_table().to_pylist()


def graph_rows(index: Path) -> dict[str, dict]:
    """The graph and count tables keyed by their keys, weights rounded (sums in another order). A
    concept's kind is left out: once seen as a named entity it stays one until the index is rebuilt."""

    def keyed(name: str, keys: tuple[str, ...]) -> dict:
        found = {}
        for row in rows(index, name):
            row.pop("kind", None)
            if "weight" in row:
                row["weight"] = round(row["weight"], 9)
            found[tuple(row[k] for k in keys)] = row
        return found

    return {
        tables.CONCEPTS: keyed(tables.CONCEPTS, ("concept_id",)),
        tables.EDGES: keyed(tables.EDGES, ("src", "dst")),
        tables.CONCEPT_COUNTS: keyed(tables.CONCEPT_COUNTS, ("concept_id",)),
        tables.PAIR_COUNTS: keyed(tables.PAIR_COUNTS, ("src", "dst")),
    }


def ids_file(tmp_path: Path, ids: list[str], name: str = "ids.txt") -> Path:
    path = tmp_path / name
    path.write_text("".join(f"{i}\n" for i in ids))
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory, settings) -> dict[str, Path]:
    """One index of every document, and a fresh build of the documents that stay."""
    root = tmp_path_factory.mktemp("delete")
    full, fresh = root / "full", root / "fresh"
    pipeline.build_index(settings, str(write_jsonl(root / "all.jsonl", DOCS)), str(full), False, CONSOLE)
    kept = [d for d in DOCS if d[0] not in DELETED]
    pipeline.build_index(settings, str(write_jsonl(root / "kept.jsonl", kept)), str(fresh), False, CONSOLE)
    return {"root": root, "full": full, "fresh": fresh}


def test_bad_requests_leave_the_index_as_it_was(built, settings, tmp_path: Path) -> None:
    index = built["full"]
    before = complete_versions(str(index))[1]
    with pytest.raises(InputError, match="does not exist"):
        pipeline.delete_documents(settings, str(tmp_path / "nope.txt"), str(index), CONSOLE)
    with pytest.raises(InputError, match="holds no document id"):
        pipeline.delete_documents(settings, str(ids_file(tmp_path, ["", "  "])), str(index), CONSOLE)
    with pytest.raises(InputError, match="1 of 2 document ids are not in the index.*'pluto'"):
        pipeline.delete_documents(settings, str(ids_file(tmp_path, ["mars", "pluto"])), str(index), CONSOLE)
    with pytest.raises(IndexNotFoundError):
        pipeline.delete_documents(
            settings, str(ids_file(tmp_path, ["mars"])), str(tmp_path / "none"), CONSOLE
        )
    assert complete_versions(str(index))[1] == before
    assert DeltaTable(str(index / tables.CHUNKS)).version() == before[tables.CHUNKS]


def test_delete_removes_everything_derived_and_equals_a_fresh_build(built, settings, monkeypatch) -> None:
    index, fresh = built["full"], built["fresh"]
    doomed = {c["chunk_id"] for c in rows(index, tables.CHUNKS) if c["doc_id"] in DELETED}
    assert doomed
    request = ids_file(built["root"], [*DELETED, DELETED[0]], "doomed.txt")  # a repeated id is harmless
    before = complete_versions(str(index))[1]

    def killed(*args, **kwargs):  # after the chunk rows are gone, before the graph
        raise RuntimeError("killed")

    monkeypatch.setattr(pipeline, "_rebuild_graph", killed)
    with pytest.raises(RuntimeError, match="killed"):
        pipeline.delete_documents(settings, str(request), str(index), CONSOLE)
    assert complete_versions(str(index))[1] == before  # readers stay on the complete version...
    clear_cache()
    assert doomed <= set(load_snapshot(str(index)).chunk_ids.tolist())
    monkeypatch.undo()

    report = pipeline.delete_documents(settings, str(request), str(index), CONSOLE)  # ...until it finishes
    assert report["mode"] == "delete"
    assert report["new"] == {"documents_deleted": 2, "chunks_deleted": len(doomed)}
    for name in (tables.CHUNKS, tables.MENTIONS, tables.CHUNK_EMBEDDINGS, tables.CHUNK_TERMS):
        assert not doomed & {r["chunk_id"] for r in rows(index, name)}, name
    assert not doomed & {r["chunk_id"] for r in rows(index, tables.CHUNK_COMMUNITIES)}
    assert not set(DELETED) & {d["doc_id"] for d in rows(index, tables.DOCUMENTS)}
    assert graph_rows(index) == graph_rows(fresh)
    assert (
        report["counts"][tables.CHUNKS] == DeltaTable(str(fresh / tables.CHUNKS)).to_pyarrow_table().num_rows
    )


def test_a_deleted_document_never_reaches_a_context_or_a_citation(built, settings) -> None:
    from lazygraph.embed import get_embedder
    from lazygraph.llm.factory import LLMRoles
    from lazygraph.query.engine import QueryEngine

    index = built["full"]
    assert not set(DELETED) & {d["doc_id"] for d in rows(index, tables.DOCUMENTS)}  # after the delete
    clear_cache()
    llm = FakeLLM(is_relevant=lambda question, passage: True)
    engine = QueryEngine.open(
        settings,
        str(index),
        CONSOLE,
        roles=LLMRoles(relevance=llm, synthesis=llm),
        embedder=get_embedder(settings.embedding),
    )
    kept_chunks = {c["chunk_id"] for c in rows(index, tables.CHUNKS)}
    for method in ("lazy", "vector"):
        result = engine.answer(
            "Where did Mozart write operas, and where was he born?", method=method, budget=8
        )
        record = result.to_json()
        assert record["context_chunk_ids"] and set(record["context_chunk_ids"]) <= kept_chunks
        assert not {s["doc_id"] for s in result.sources} & set(DELETED)
        text = json.dumps(record)
        assert "birthplace of Mozart" not in text and "operas and piano concertos" not in text


CHANGED_MOON = (
    "moon",
    "Moon",
    "The Moon orbits Earth. Apollo astronauts brought Moon rocks back to NASA in Houston.",
)


def test_an_append_merges_counts_and_equals_a_fresh_build(built, settings, monkeypatch) -> None:
    from lazygraph.graph import stage

    index, root = built["full"], built["root"]
    final = [CHANGED_MOON if d[0] == "moon" else d for d in DOCS]
    fresh = root / "fresh-final"
    pipeline.build_index(settings, str(write_jsonl(root / "final.jsonl", final)), str(fresh), False, CONSOLE)

    def recount(*args, **kwargs):
        raise AssertionError("an append to a complete index must not recount every mention")

    monkeypatch.setattr(stage, "_recount", recount)
    back = [d for d in final if d[0] in (*DELETED, "moon")]  # two new documents, one changed
    # A drift threshold no change reaches: the communities are updated locally.
    local = settings.model_copy(
        update={
            "communities": settings.communities.model_copy(
                update={"redetect_drift": 100.0, "merge_min_rows": 0}  # MERGE even these small tables
            )
        }
    )
    report = pipeline.build_index(
        local, str(write_jsonl(root / "back.jsonl", back)), str(index), True, CONSOLE
    )
    assert report["mode"] == "append" and report["new"]["documents"] == 3
    assert graph_rows(index) == graph_rows(fresh)
    assert report["communities"]["update"] == "local" and report["communities"]["drift"] > 0
    stats = index_stats(settings, str(index))
    assert stats["communities_update"] == report["communities"]
    assert stats["communities"]["parent_links_ok"]
    assert stats["communities"]["every_kept_concept_in_one_community_per_level"]
    chunk_links = {r["chunk_id"] for r in rows(index, tables.CHUNK_COMMUNITIES)}
    assert chunk_links <= {c["chunk_id"] for c in rows(index, tables.CHUNKS)}
    assert {c["chunk_id"] for c in rows(index, tables.CHUNKS) if c["doc_id"] in DELETED} & chunk_links
    # The community tables were MERGEd, not rewritten, and hold exactly what the update computed: the
    # chunk links are those of the mentions and the concepts' communities as they are now.
    for name in (tables.COMMUNITIES, tables.CONCEPT_COMMUNITIES, tables.CHUNK_COMMUNITIES):
        assert DeltaTable(str(index / name)).history(1)[0]["operation"] == "MERGE", name
    assert link_keys(rows(index, tables.CHUNK_COMMUNITIES)) == expected_links(index)


def link_keys(links: list[dict]) -> dict[tuple[str, int, str], float]:
    return {(r["chunk_id"], r["level"], r["community_id"]): round(r["weight"], 9) for r in links}


def expected_links(index: Path) -> dict[tuple[str, int, str], float]:
    """(chunk, level, community) -> weight, recomputed from the mentions and concept communities."""
    community = {
        (r["concept_id"], r["level"]): r["community_id"] for r in rows(index, tables.CONCEPT_COMMUNITIES)
    }
    levels = sorted({level for _, level in community})
    counts: dict[tuple[str, int, str], float] = {}
    for m in rows(index, tables.MENTIONS):
        for level in levels:
            if (m["concept_id"], level) in community:
                key = (m["chunk_id"], level, community[(m["concept_id"], level)])
                counts[key] = counts.get(key, 0.0) + m["count"]
    totals: dict[tuple[str, int], float] = {}
    for (chunk, level, _), n in counts.items():
        totals[(chunk, level)] = totals.get((chunk, level), 0.0) + n
    return {key: round(n / totals[key[:2]], 9) for key, n in counts.items()}


def test_an_incremental_delete_equals_a_recount(built, settings, spark_session, monkeypatch) -> None:
    from lazygraph.graph import stage
    from lazygraph.graph.cooccurrence import concept_statistics, pair_counts

    index = built["full"]
    monkeypatch.setattr(stage, "_recount", lambda *a, **k: pytest.fail("a delete must not recount"))
    pipeline.delete_documents(
        settings, str(ids_file(built["root"], ["mars"], "mars.txt")), str(index), CONSOLE
    )
    load = lambda name: spark_session.read.format("delta").load(str(index / name))  # noqa: E731
    names = load(tables.CONCEPT_COUNTS).select("concept_id", "name", "kind")
    recounted = {
        r["concept_id"]: r.asDict()
        for r in concept_statistics(load(tables.MENTIONS), load(tables.CHUNKS), names).collect()
    }
    assert {k: {**v, "kind": None} for k, v in recounted.items()} == {
        c["concept_id"]: {**c, "kind": None} for c in rows(index, tables.CONCEPT_COUNTS)
    }
    pairs = {
        (r["src"], r["dst"]): r["cooccurrence"]
        for r in pair_counts(load(tables.MENTIONS), settings.concepts).collect()
    }
    assert pairs == {(p["src"], p["dst"]): p["cooccurrence"] for p in rows(index, tables.PAIR_COUNTS)}
    assert "mars" not in {c["doc_id"] for c in rows(index, tables.CHUNKS)}


def test_an_append_to_a_graph_too_large_for_the_driver_moves_communities_in_spark(
    built, settings, monkeypatch
) -> None:
    from lazygraph.communities import incremental, stage

    index = built["root"] / "distributed"
    kept = [d for d in DOCS if d[0] not in DELETED]
    pipeline.build_index(
        settings, str(write_jsonl(index.with_suffix(".jsonl"), kept)), str(index), False, CONSOLE
    )
    # Every graph counts as too large for the driver: the moves must run as Spark jobs.
    distributed = settings.model_copy(
        update={
            "communities": settings.communities.model_copy(
                update={"redetect_drift": 100.0, "single_task_max_nodes": 0}
            )
        }
    )
    monkeypatch.setattr(stage, "_held_graph", lambda *a: pytest.fail("the graph was collected to the driver"))
    monkeypatch.setattr(incremental, "local_moves", lambda *a: pytest.fail("the moves ran in the driver"))
    back = [d for d in DOCS if d[0] in DELETED]
    report = pipeline.build_index(
        distributed,
        str(write_jsonl(built["root"] / "back-distributed.jsonl", back)),
        str(index),
        True,
        CONSOLE,
    )
    assert report["mode"] == "append" and report["communities"]["update"] == "local"
    assert report["communities"]["affected"] > 0 and report["communities"]["redone"] > 0
    stats = index_stats(settings, str(index))
    assert stats["communities"]["parent_links_ok"]
    assert stats["communities"]["every_kept_concept_in_one_community_per_level"]
    kept_concepts = {c["concept_id"] for c in rows(index, tables.CONCEPTS) if c["kept"]}
    level0 = {r["concept_id"] for r in rows(index, tables.CONCEPT_COMMUNITIES) if r["level"] == 0}
    assert level0 == kept_concepts


@pytest.fixture(scope="module")
def spark_session(settings):
    from lazygraph.runtime.spark import get_spark

    return get_spark(settings)
