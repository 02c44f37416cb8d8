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


def test_a_graph_held_in_the_driver_gives_the_change_share_and_held_graph_spark_gives(
    spark, tmp_path
) -> None:
    """The communities stage reads a graph the graph stage derived in the driver from its held frames
    (``GraphTables.held``): the drift's change share, the weights, the nodes with their old level-0
    labels and the affected concepts must equal what its Spark jobs find on the same tables."""
    import numpy as np
    import pandas as pd
    from rich.console import Console

    from lazygraph.communities import stage
    from lazygraph.graph.cooccurrence import GraphTables, graph_frames
    from lazygraph.run_context import RunContext, RunLog
    from lazygraph.settings import GraphSettings, load_settings
    from lazygraph.tables import CONCEPT_COMMUNITIES, CONCEPTS, EDGES, schemas
    from lazygraph.tables.store import IndexStore

    rng = np.random.default_rng(7)
    n = 160
    ids = [f"c{i:03d}" for i in range(n)]
    chunk_frequency = rng.integers(2, 40, n)
    stats = pd.DataFrame(
        {
            "concept_id": ids,
            "name": ids,
            "kind": "phrase",
            "frequency": chunk_frequency + 1,
            "chunk_frequency": chunk_frequency,
            "doc_frequency": chunk_frequency,
        }
    )
    a, b = rng.integers(0, n, 1_500), rng.integers(0, n, 1_500)
    pairs = pd.DataFrame({"src": np.array(ids)[np.minimum(a, b)], "dst": np.array(ids)[np.maximum(a, b)]})
    pairs = pairs[pairs["src"] != pairs["dst"]].drop_duplicates(ignore_index=True)
    low = np.minimum(chunk_frequency[[int(s[1:]) for s in pairs["src"]]], 30)
    pairs["cooccurrence"] = np.maximum(1, (low * rng.random(len(pairs))).astype(np.int64))
    cfg = GraphSettings(min_degree=2, min_edge_weight=0.05)
    settings = load_settings(graph=cfg.model_dump())
    ctx = RunContext(spark, settings, IndexStore(spark, str(tmp_path)), RunLog(Console(quiet=True)), "")

    def spark_frame(name: str, frame: pd.DataFrame):
        return spark.createDataFrame(frame, schema=schemas.spark_schema(name))

    # This run: some pair counts grown, some new pairs, a few concepts more frequent.
    old_concepts, old_edges = graph_frames(stats, pairs, 600, cfg)
    changed = pairs.sample(120, random_state=1).assign(cooccurrence=lambda f: f["cooccurrence"] * 0 + 3)
    fresh = pd.DataFrame({"src": ids[:20], "dst": ids[140:160], "cooccurrence": 4})
    new_pairs = pd.concat([pairs, fresh]).groupby(["src", "dst"], as_index=False)["cooccurrence"].sum()
    new_pairs = new_pairs.merge(changed, on=["src", "dst"], how="left", suffixes=("", "_d"))
    new_pairs["cooccurrence"] += new_pairs.pop("cooccurrence_d").fillna(0).astype(np.int64)
    new_stats = stats.assign(chunk_frequency=stats["chunk_frequency"] + (np.arange(n) % 9 == 0) * 6)
    concepts, edges = graph_frames(new_stats, new_pairs, 620, cfg)
    delta = pd.concat([changed, fresh], ignore_index=True)

    # The last run's tables: its graph and a level-0 label for its kept concepts but three that stay
    # kept and no changed pair touches (affected only because they have no community yet).
    ctx.store.overwrite(CONCEPTS, spark_frame(CONCEPTS, old_concepts))
    ctx.store.overwrite(EDGES, spark_frame(EDGES, old_edges))
    kept_old = old_concepts.loc[old_concepts["kept"], "concept_id"]
    quiet = set(kept_old) & set(concepts.loc[concepts["kept"], "concept_id"])
    quiet = sorted(quiet - set(delta["src"]) - set(delta["dst"]))[:3]
    assert len(quiet) == 3
    labelled = kept_old[~kept_old.isin(quiet)]
    old_cc = pd.DataFrame(
        {"concept_id": labelled, "level": 0, "community_id": [f"L{i % 7}" for i in range(len(labelled))]}
    )
    ctx.store.overwrite(CONCEPT_COMMUNITIES, spark_frame(CONCEPT_COMMUNITIES, old_cc))
    versions = {name: 0 for name in (CONCEPTS, EDGES, CONCEPT_COMMUNITIES)}

    def graph(held: bool) -> GraphTables:
        return GraphTables(
            spark_frame(CONCEPTS, concepts),
            spark_frame(EDGES, edges),
            changed_pairs=spark.createDataFrame(delta),
            held=(concepts, edges) if held else None,
        )

    assert stage._change_share(ctx, graph(True), versions) == pytest.approx(
        stage._change_share(ctx, graph(False), versions), rel=1e-12
    )
    held, collected = (
        stage._held_graph(ctx, graph(True), versions),
        stage._held_graph(ctx, graph(False), versions),
    )
    assert held.affected == collected.affected and set(quiet) <= set(held.affected)

    def by_pair(weights: pd.DataFrame) -> pd.Series:
        return weights.set_index(["src", "dst"])["weight"].sort_index()

    assert by_pair(held.weights).equals(by_pair(collected.weights))
    nodes = [
        frame.assign(old=frame["old"].astype(object).where(frame["old"].notna(), None))
        for frame in (held.nodes, collected.nodes)
    ]
    assert nodes[0].to_dict("records") == nodes[1].to_dict("records")
    assert nodes[0]["old"].isna().sum() >= 3  # the unlabelled kept concepts are among them
