"""The local community update's pure logic: Louvain's local moves restricted to the affected concepts,
which level-0 communities must be split again, and the drift of one update."""

from __future__ import annotations

import itertools

import pytest

from lazygraph.communities.incremental import (
    NEW_LABEL,
    LocalGraph,
    changed_weight_share,
    communities_to_redo,
    local_moves,
)


def two_cliques(extra_edges: list[tuple[str, str, float]]) -> LocalGraph:
    """Cliques a0..a3 (community A) and b0..b3 (community B) joined by one weak edge, plus extras."""
    edges = [(f"{c}{i}", f"{c}{j}", 1.0) for c in "ab" for i, j in itertools.combinations(range(4), 2)]
    edges += [("a0", "b0", 0.1), *extra_edges]
    degree: dict[str, float] = {}
    for src, dst, weight in edges:
        degree[src] = degree.get(src, 0.0) + weight
        degree[dst] = degree.get(dst, 0.0) + weight
    label: dict[str, str | None] = {node: node[0].upper() for node in degree}
    for src, dst, _ in extra_edges:
        for node in (src, dst):
            if node.startswith("n"):
                label[node] = None
    affected = sorted({n for e in extra_edges for n in e[:2]})
    return LocalGraph(degree, label, edges, affected, sum(w for *_, w in edges))


def test_a_new_concept_joins_the_community_it_is_tied_to_and_the_rest_stays() -> None:
    graph = two_cliques([("n1", "b1", 1.0), ("n1", "b2", 1.0), ("n1", "a3", 0.2)])
    result = local_moves(graph)
    assert result.label["n1"] == "B"
    assert all(result.label[f"a{i}"] == "A" and result.label[f"b{i}"] == "B" for i in range(4))
    assert communities_to_redo(result.label, graph.label, set(graph.affected)) == {"A", "B"}


def test_an_affected_concept_moves_when_its_ties_change() -> None:
    # a3 now has strong ties to every member of B: moving there gains more than staying in A.
    graph = two_cliques([("a3", f"b{i}", 3.0) for i in range(4)])
    graph.affected = ["a3"]
    result = local_moves(graph)
    assert result.label["a3"] == "B" and result.moved == {"a3"}
    assert communities_to_redo(result.label, graph.label, {"a3"}) == {"A", "B"}


def test_untouched_communities_are_not_redone() -> None:
    graph = two_cliques([])
    graph.label["c0"], graph.degree["c0"] = "C", 0.0
    result = local_moves(graph)
    assert result.moved == set()
    assert communities_to_redo(result.label, graph.label, set()) == set()


def test_drift_share() -> None:
    assert changed_weight_share(2.0, 8.0) == pytest.approx(0.25)
    assert changed_weight_share(0.0, 0.0) == 0.0
    assert changed_weight_share(1.0, 0.0) == 1.0


def test_only_a_large_community_table_is_merged() -> None:
    from lazygraph.communities.stage import merges_table
    from lazygraph.settings import CommunitySettings

    cfg = CommunitySettings(merge_min_rows=1000)
    assert [merges_table(rows, cfg) for rows in (0, 999, 1000, 10**9)] == [False, False, True, True]
    assert merges_table(0, CommunitySettings(merge_min_rows=0))  # 0: every table MERGEd


# ---- the same moves as Spark jobs (a graph too large for the driver) -------------------------------
def _distributed(spark, graph: LocalGraph) -> dict[str, str]:
    """Run ``distributed_local_moves`` on ``graph``; labels back as the names ``local_moves`` uses."""
    from lazygraph.communities.incremental import distributed_local_moves
    from lazygraph.communities.propagation import PropagationParams

    names = sorted(graph.degree)
    node_of = {name: i + 1 for i, name in enumerate(names)}
    community_of = {label: 1000 + i for i, label in enumerate(sorted({v for v in graph.label.values() if v}))}
    label_name = {value: key for key, value in community_of.items()}
    m2 = 2.0 * graph.total_weight
    nodes = spark.createDataFrame(
        [
            (
                node_of[n],
                community_of[graph.label[n]] if graph.label[n] else node_of[n],
                graph.degree[n],
                m2,
                n in graph.affected,
            )
            for n in names
        ],
        "node long, label long, k double, m2 double, movable boolean",
    )
    edges = spark.createDataFrame(
        [(node_of[a], node_of[b], w) for a, b, w in graph.edges]
        + [(node_of[b], node_of[a], w) for a, b, w in graph.edges],
        "src long, dst long, w double",
    )
    moved, _ = distributed_local_moves(nodes, edges, PropagationParams(seed=7))
    name_of = {v: k for k, v in node_of.items()}
    return {
        name_of[row.node]: label_name.get(row.label, NEW_LABEL + name_of.get(row.label, "?"))
        for row in moved.collect()
    }


@pytest.mark.e2e
def test_distributed_moves_match_the_driver_moves_on_the_same_cases(spark) -> None:
    joining = two_cliques([("n1", "b1", 1.0), ("n1", "b2", 1.0), ("n1", "a3", 0.2)])
    moving = two_cliques([("a3", f"b{i}", 3.0) for i in range(4)])
    moving.affected = ["a3"]
    untouched = two_cliques([])
    for graph in (joining, moving, untouched):
        assert _distributed(spark, graph) == local_moves(graph).label
    # Only affected concepts move: with none affected, not even a badly placed one does.
    stuck = two_cliques([("a3", f"b{i}", 3.0) for i in range(4)])
    stuck.affected = []
    assert _distributed(spark, stuck)["a3"] == "A"


@pytest.mark.e2e
def test_redone_communities_split_in_the_driver_match_the_spark_split(spark, settings) -> None:
    """``Resplit`` (a graph held in the driver) must find the levels ``_split_again``'s Spark tasks find,
    label for label, on the same redone communities; communities not redone get no rows."""
    import random
    from types import SimpleNamespace

    import pandas as pd

    from lazygraph.communities.stage import HeldGraph, Resplit, _split_again

    rng = random.Random(3)
    # Three level-0 communities of 40 concepts, each two dense halves, weakly tied to the others.
    names = [f"c{i:03d}" for i in range(120)]
    edges = {}
    for i, j in itertools.combinations(range(120), 2):
        same_half, same_block = i // 20 == j // 20, i // 40 == j // 40
        chance = 0.5 if same_half else 0.08 if same_block else 0.004
        if rng.random() < chance:
            edges[(names[i], names[j])] = round(rng.uniform(0.05, 1.0), 4)
    rows = [(s, d, w, 3, True) for (s, d), w in edges.items()]
    frame = spark.createDataFrame(
        rows, "src string, dst string, weight double, cooccurrence long, kept boolean"
    )
    ctx = SimpleNamespace(settings=settings, spark=spark)
    weights = pd.DataFrame(
        [(s, d, max(w, settings.communities.min_edge_weight)) for (s, d), w in edges.items()],
        columns=["src", "dst", "weight"],
    )
    level0 = pd.DataFrame({"concept_id": names, "label0": [f"L{i // 40}" for i in range(120)]})
    redo = level0[level0["label0"].isin(["L0", "L2"])]
    node_ids = spark.createDataFrame(level0[["concept_id"]]).selectExpr(
        "concept_id", "xxhash64(concept_id) AS node"
    )
    held = HeldGraph(weights=weights, nodes=node_ids.toPandas().assign(old=None), affected=[])
    driver = Resplit(held, redo.reset_index(drop=True)).levels(ctx, 2)
    spark_side = _split_again(ctx, SimpleNamespace(edges=frame), spark.createDataFrame(redo), 2)

    def found(df) -> set[tuple[str, int, str]]:
        return {(r["concept_id"], r["level"], r["label"]) for r in df.collect()}

    assert found(driver) == found(spark_side)
    assert {c for c, *_ in found(driver)} == set(redo["concept_id"])
    assert len({label for _, level, label in found(driver) if level == 1}) >= 4, "each block splits in two"
    # Redone communities that lost every member (a delete) leave nothing to split.
    assert Resplit(held, redo.iloc[0:0]).levels(ctx, 2).count() == 0
