"""Concepts and edges derived in the driver (``graph_frames``) equal Spark's (``graph_from_counts``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lazygraph.graph.cooccurrence import graph_frames, graph_from_counts, npmi, npmi_array
from lazygraph.settings import GraphSettings


def random_counts(seed: int, concepts: int = 300, pairs: int = 2_000) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Count tables with skewed frequencies, some concepts too rare or too general, and pairs whose
    ends include concepts that are not candidates."""
    rng = np.random.default_rng(seed)
    ids = [f"c{i:04d}" for i in range(concepts)]
    # Log-uniform from 1 to 400 chunks: rare concepts, general ones, and pairs of frequent concepts
    # that co-occur less often than chance (negative NPMI).
    chunk_frequency = np.exp(rng.uniform(0, np.log(400), concepts)).astype(np.int64)
    stats = pd.DataFrame(
        {
            "concept_id": ids,
            "name": [f"name {i}" for i in range(concepts)],
            "kind": rng.choice(["entity", "phrase"], concepts),
            "frequency": chunk_frequency + rng.integers(0, 3, concepts),
            "chunk_frequency": chunk_frequency,
            "doc_frequency": np.maximum(1, chunk_frequency // 2),
        }
    )
    a = rng.integers(0, concepts, pairs)
    b = rng.integers(0, concepts, pairs)
    keep = a < b
    frame = pd.DataFrame({"src": np.array(ids)[a[keep]], "dst": np.array(ids)[b[keep]]}).drop_duplicates()
    low = np.minimum(chunk_frequency[a[keep]], chunk_frequency[b[keep]])[: len(frame)]
    frame["cooccurrence"] = np.maximum(1, (low * rng.random(len(frame))).astype(np.int64))
    return stats, frame.reset_index(drop=True)


def test_npmi_array_is_npmi_elementwise() -> None:
    cases = [(5, 5, 5, 5), (3, 3, 3, 10), (25, 50, 50, 100), (1, 50, 50, 100), (4, 10, 8, 200)]
    for c, fa, fb, n in cases:
        assert npmi_array(np.array([c]), np.array([fa]), np.array([fb]), n)[0] == pytest.approx(
            npmi(c, fa, fb, n), abs=1e-12
        )


def test_a_percentile_cut_is_left_to_spark() -> None:
    stats, pairs = random_counts(0, 20, 50)
    with pytest.raises(ValueError, match="percentile"):
        graph_frames(stats, pairs, 100, GraphSettings(edge_weight_percentile=10))


@pytest.mark.parametrize(
    ("seed", "cfg"),
    [
        (1, GraphSettings()),
        (2, GraphSettings(min_degree=2, min_edge_weight=0.1)),
        (3, GraphSettings(min_degree=0, min_concept_frequency=1, max_document_frequency=0.02)),
    ],
)
def test_the_driver_derives_the_graph_spark_derives(spark, seed: int, cfg: GraphSettings) -> None:
    stats, pairs = random_counts(seed)
    n_chunks = 5_000
    concepts, edges = graph_frames(stats, pairs, n_chunks, cfg)
    expected = graph_from_counts(spark.createDataFrame(stats), spark.createDataFrame(pairs), n_chunks, cfg)
    want_concepts = expected.concepts.toPandas()
    want_edges = expected.edges.toPandas()
    expected.unpersist()

    def by_key(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
        return frame.sort_values(keys, ignore_index=True)

    got_c, want_c = by_key(concepts, ["concept_id"]), by_key(want_concepts, ["concept_id"])
    assert list(got_c.columns) == list(want_c.columns)
    pd.testing.assert_frame_equal(got_c, want_c, check_dtype=False)
    got_e, want_e = by_key(edges, ["src", "dst"]), by_key(want_edges, ["src", "dst"])
    assert list(got_e.columns) == list(want_e.columns)
    pd.testing.assert_frame_equal(got_e, want_e, check_dtype=False, rtol=1e-12, atol=1e-12)
    # The cases exercise every rule: pruned and kept concepts, pruned and kept edges.
    assert got_c["kept"].any() and not got_c["kept"].all()
    assert got_e["kept"].any() and not got_e["kept"].all()
    assert len(got_e) < len(pairs)


def _stage_context(spark, index_uri: str, driver_max_pairs: int):
    from rich.console import Console

    from lazygraph.run_context import RunContext, RunLog
    from lazygraph.settings import load_settings
    from lazygraph.tables.store import IndexStore

    settings = load_settings(graph={"driver_max_pairs": driver_max_pairs})
    store = IndexStore(spark, index_uri)
    return RunContext(spark, settings, store, RunLog(Console(quiet=True)), input_path="")


@pytest.mark.parametrize("driver_max_pairs", [0, 10_000])
def test_the_graph_stage_writes_the_same_tables_by_either_path(
    spark, tmp_path, monkeypatch, driver_max_pairs: int
) -> None:
    """The count tables as a run leaves them, derived in the driver (pair rows within the bound) or by
    Spark (bound 0): both write the same concepts and edges, and the bound decides the path."""
    from lazygraph.graph import stage
    from lazygraph.tables import CONCEPT_COUNTS, CONCEPTS, EDGES, PAIR_COUNTS

    stats, pairs = random_counts(4)
    ctx = _stage_context(spark, str(tmp_path / "index"), driver_max_pairs)
    ctx.store.overwrite(CONCEPT_COUNTS, spark.createDataFrame(stats))
    ctx.store.overwrite(PAIR_COUNTS, spark.createDataFrame(pairs))
    by_spark = stage.graph_from_counts
    used = []
    monkeypatch.setattr(stage, "graph_from_counts", lambda *a: used.append("spark") or by_spark(*a))
    graph, counts = stage._derive_graph(ctx, 5_000)
    ctx.store.overwrite(CONCEPTS, graph.concepts)
    ctx.store.overwrite(EDGES, graph.edges)
    graph.unpersist()
    assert used == ([] if driver_max_pairs else ["spark"])

    concepts, edges = graph_frames(stats, pairs, 5_000, GraphSettings())
    written = {name: ctx.store.load(name).toPandas() for name in (CONCEPTS, EDGES)}
    assert sorted(written[CONCEPTS]["concept_id"]) == sorted(concepts["concept_id"])
    kept = written[CONCEPTS].set_index("concept_id")["kept"].sort_index()
    assert kept.equals(concepts.set_index("concept_id")["kept"].sort_index())
    weights = written[EDGES].set_index(["src", "dst"])["weight"].sort_index()
    assert np.allclose(weights, edges.set_index(["src", "dst"])["weight"].sort_index(), rtol=0, atol=1e-12)
    assert counts == {
        "concepts_kept": int(kept.sum()),
        "concepts_pruned": int((~kept).sum()),
        "edges_kept": int(written[EDGES]["kept"].sum()),
        "edges_pruned": int((~written[EDGES]["kept"]).sum()),
    }
