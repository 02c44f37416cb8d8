"""An append's count changes added in the driver (``held_counts``) leave the count tables a Spark MERGE
leaves (``stage._merge_counts``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from lazygraph.graph.held_counts import add_concept_counts, add_pair_counts
from tests.graph.test_graph_in_driver import _stage_context, random_counts


def random_change(stats: pd.DataFrame, pairs: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Deltas as ``count_deltas`` makes them: existing keys raised, lowered to zero or below, and new
    keys with positive and (impossible but MERGE-handled) non-positive counts."""
    rng = np.random.default_rng(seed)
    touched = stats.sample(frac=0.3, random_state=seed)
    lowered = -touched["chunk_frequency"].to_numpy() * rng.integers(0, 2, len(touched))
    raised = rng.integers(1, 4, len(touched))
    step = np.where(lowered < 0, lowered, raised)
    concept_deltas = pd.DataFrame(
        {
            "concept_id": list(touched["concept_id"]) + [f"new{i}" for i in range(20)],
            "frequency": list(step) + list(rng.integers(-1, 4, 20)),
            "chunk_frequency": list(step) + list(rng.integers(-1, 3, 20)),
            "doc_frequency": list(np.sign(step)) + list(rng.integers(-1, 2, 20)),
            "name": [None] * len(touched) + [f"new name {i}" for i in range(20)],
            "kind": list(rng.choice(["entity", "phrase", None], len(touched))) + ["phrase"] * 20,
        }
    )
    some = pairs.sample(frac=0.3, random_state=seed + 1)
    pair_step = np.where(rng.random(len(some)) < 0.4, -some["cooccurrence"].to_numpy(), 1)
    new_pairs = pd.DataFrame(
        {"src": [f"new{i}" for i in range(15)], "dst": [f"new{i + 1}" for i in range(15)]}
    ).assign(cooccurrence=rng.integers(-1, 3, 15))
    pair_deltas = pd.concat(
        [some[["src", "dst"]].assign(cooccurrence=pair_step), new_pairs], ignore_index=True
    )
    # count_deltas leaves out rows that do not change
    return concept_deltas[concept_deltas["chunk_frequency"] != 0], pair_deltas[
        pair_deltas["cooccurrence"] != 0
    ]


def test_the_driver_adds_pair_counts_by_the_merge_rules() -> None:
    table = pa.table({"src": ["a", "a", "b", "c"], "dst": ["b", "c", "c", "d"], "cooccurrence": [2, 1, 5, 1]})
    change = pa.table(
        {"src": ["a", "a", "c", "x"], "dst": ["b", "c", "d", "y"], "cooccurrence": [-2, 3, -5, 0]}
    )
    rows = sorted(add_pair_counts(table, change).to_pylist(), key=lambda r: (r["src"], r["dst"]))
    # a-b reaches zero and c-d below it: deleted; a-c summed; b-c untouched; x-y not positive: not inserted
    assert rows == [{"src": "a", "dst": "c", "cooccurrence": 4}, {"src": "b", "dst": "c", "cooccurrence": 5}]


def test_the_driver_adds_concept_counts_keeping_names_and_entities() -> None:
    table = pa.table(
        {
            "concept_id": ["x", "y", "w"],
            "name": ["X", "Y", "W"],
            "kind": ["phrase", "phrase", "entity"],
            "frequency": [3, 2, 5],
            "chunk_frequency": [2, 1, 4],
            "doc_frequency": [1, 1, 2],
        }
    )
    change = pa.table(
        {
            "concept_id": ["x", "y", "z", "w"],
            "name": ["X renamed", None, "Z", None],
            "kind": ["entity", None, "entity", "phrase"],
            "frequency": [1, -2, 4, 1],
            "chunk_frequency": [1, -1, 2, 1],
            "doc_frequency": [0, -1, 1, 0],
        }
    )
    rows = {r["concept_id"]: r for r in add_concept_counts(table, change).to_pylist()}
    assert sorted(rows) == ["w", "x", "z"]  # y reached zero chunks
    assert rows["x"] == {
        "concept_id": "x",
        "name": "X",
        "kind": "entity",
        "frequency": 4,
        "chunk_frequency": 3,
        "doc_frequency": 1,
    }
    assert rows["w"]["kind"] == "entity"  # an entity stays one
    assert rows["z"]["name"] == "Z" and rows["z"]["chunk_frequency"] == 2


@pytest.mark.parametrize("seed", [5, 6])
def test_counts_added_in_the_driver_equal_spark_merges(spark, tmp_path, seed: int) -> None:
    from lazygraph.graph import stage
    from lazygraph.tables import CONCEPT_COUNTS, PAIR_COUNTS

    stats, pairs = random_counts(seed)
    concept_deltas, pair_deltas = random_change(stats, pairs, seed)
    written = {}
    for bound in (0, 100_000):
        ctx = _stage_context(spark, str(tmp_path / f"index-{bound}"), bound)
        ctx.store.overwrite(CONCEPT_COUNTS, spark.createDataFrame(stats))
        ctx.store.overwrite(PAIR_COUNTS, spark.createDataFrame(pairs))
        concepts = spark.createDataFrame(
            concept_deltas,
            schema="concept_id string, frequency long, "
            "chunk_frequency long, doc_frequency long, name string, kind string",
        )
        changed = spark.createDataFrame(pair_deltas, schema="src string, dst string, cooccurrence long")
        held = stage._add_counts_in_driver(ctx, concepts, changed)
        assert (held is None) == (bound == 0)
        if held is None:
            stage._merge_counts(ctx, concepts, changed)
        written[bound] = {
            name: ctx.store.load(name).toPandas().sort_values(keys, ignore_index=True)
            for name, keys in ((CONCEPT_COUNTS, ["concept_id"]), (PAIR_COUNTS, ["src", "dst"]))
        }
        if held is not None:  # what the driver holds is what it wrote
            for name, table in zip((CONCEPT_COUNTS, PAIR_COUNTS), held, strict=True):
                keys = list(written[bound][name].columns[: 1 if name == CONCEPT_COUNTS else 2])
                pd.testing.assert_frame_equal(
                    table.to_pandas().sort_values(keys, ignore_index=True),
                    written[bound][name],
                    check_dtype=False,
                )
    for name in (CONCEPT_COUNTS, PAIR_COUNTS):
        pd.testing.assert_frame_equal(written[100_000][name], written[0][name], check_dtype=False)
    # the change exercised every rule: rows deleted, summed and inserted
    after = written[0][PAIR_COUNTS]
    assert len(after) != len(pairs) and after["src"].str.startswith("new").any()
    assert (~stats["concept_id"].isin(written[0][CONCEPT_COUNTS]["concept_id"])).any()
