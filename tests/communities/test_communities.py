"""Hierarchical communities on small graphs built here, with the real local Spark session."""

from __future__ import annotations

import itertools
import random
from collections import defaultdict

import pandas as pd
import pytest
from pyspark.sql import functions as F

from lazygraph.communities import (
    chunk_communities,
    community_edge_weights,
    detect_communities,
    leiden_modularity,
    local_modularity,
    modularity,
)
from lazygraph.communities.synthetic import concept_id, planted_partition
from lazygraph.settings import Settings


def _concepts(names: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "concept_id": [concept_id(n) for n in names],
            "name": names,
            "frequency": [len(names) - i for i in range(len(names))],
        }
    )


def _edges(pairs: list[tuple[str, str, float]]) -> pd.DataFrame:
    rows = []
    for a, b, w in pairs:
        x, y = sorted((concept_id(a), concept_id(b)))
        rows.append((x, y, w, 3))
    return pd.DataFrame(rows, columns=["src", "dst", "weight", "cooccurrence"])


def _cliques_star_path() -> tuple[pd.DataFrame, pd.DataFrame, list[list[str]]]:
    """Four 6-cliques in a ring of weak links, a star, a path, and two isolated concepts."""
    cliques = [[f"c{g}_{i}" for i in range(6)] for g in range(4)]
    pairs = [(a, b, 0.8) for clique in cliques for a, b in itertools.combinations(clique, 2)]
    pairs += [(cliques[g][0], cliques[(g + 1) % 4][1], -0.05) for g in range(4)]
    star = [f"star_{i}" for i in range(7)]
    pairs += [(star[0], leaf, 0.5) for leaf in star[1:]]
    path = [f"path_{i}" for i in range(12)]
    pairs += [(a, b, 0.6) for a, b in itertools.pairwise(path)]
    names = [n for clique in cliques for n in clique] + star + path + ["alone_a", "alone_b"]
    return _concepts(names), _edges(pairs), cliques


def _assignments(tables) -> dict[int, dict[str, str]]:
    by_level: dict[int, dict[str, str]] = defaultdict(dict)
    for row in tables.concept_communities.collect():
        assert row.concept_id not in by_level[row.level], "a concept in two communities of one level"
        by_level[row.level][row.concept_id] = row.community_id
    return by_level


def _check_hierarchy(tables, concept_ids: set[str]) -> dict[int, dict[str, str]]:
    """Every concept once per level; parents valid; sizes match memberships."""
    by_level = _assignments(tables)
    communities = {row.community_id: row for row in tables.communities.collect()}
    assert sorted(by_level) == list(range(len(by_level)))
    for level, assignment in by_level.items():
        assert set(assignment) == concept_ids
        members: dict[str, int] = defaultdict(int)
        for community in assignment.values():
            members[community] += 1
        for community, size in members.items():
            row = communities[community]
            assert row.level == level and row.size == size
            assert 1 <= len(row.top_concepts) <= 10
            if level == 0:
                assert row.parent_id is None
            else:
                parent = communities[row.parent_id]
                assert parent.level == level - 1
    for level in range(1, len(by_level)):
        for concept, community in by_level[level].items():
            assert communities[community].parent_id == by_level[level - 1][concept]
    return by_level


def _mentions(cliques: list[list[str]]) -> list[tuple[str, str, int]]:
    """Chunk k1: three concepts of clique 0 and one of clique 1; k2: an isolated and an unknown concept."""
    mentions = [("k1", concept_id(n), 2) for n in cliques[0][:3]] + [("k1", concept_id(cliques[1][0]), 2)]
    return mentions + [("k2", concept_id("alone_a"), 1), ("k2", concept_id("unknown"), 5)]


def _with(settings: Settings, **changes) -> Settings:
    return settings.model_copy(update={"communities": settings.communities.model_copy(update=changes)})


@pytest.fixture(scope="module")
def small_graph(spark, settings: Settings):
    """The graph, and its communities computed once for the tests that only read them."""
    concepts, edges, cliques = _cliques_star_path()
    mentions_df = spark.createDataFrame(_mentions(cliques), "chunk_id string, concept_id string, count int")
    concepts_df, edges_df = spark.createDataFrame(concepts), spark.createDataFrame(edges)
    # A 45-concept graph needs few iterations; fewer passes keep the test quick on two cores.
    quick = _with(settings, label_propagation_iterations=6, coarsening_passes=2)
    tables = detect_communities(spark, quick, concepts_df, edges_df, mentions_df=mentions_df)
    return tables, concepts, cliques, mentions_df


@pytest.mark.e2e
def test_planted_cliques_star_path_and_isolated(small_graph) -> None:
    tables, concepts, cliques, _ = small_graph
    by_level = _check_hierarchy(tables, set(concepts.concept_id))
    top = by_level[0]
    clique_labels = [{top[concept_id(n)] for n in clique} for clique in cliques]
    assert all(len(labels) == 1 for labels in clique_labels), "a planted clique was split"
    assert len(set.union(*clique_labels)) == 4, "two planted cliques were merged"
    assert top[concept_id("alone_a")] != top[concept_id("alone_b")]
    for level in by_level.values():
        sizes = pd.Series(list(level.values())).value_counts()
        assert sizes[level[concept_id("alone_a")]] == 1
    path_communities = {top[concept_id(f"path_{i}")] for i in range(12)}
    assert path_communities.isdisjoint(set.union(*clique_labels))
    assert tables.stats["levels"] == len(by_level)


@pytest.mark.e2e
def test_top_concepts_are_ordered_by_frequency(small_graph) -> None:
    tables, concepts, _, _ = small_graph
    frequency = dict(zip(concepts.name, concepts.frequency, strict=True))
    for row in tables.communities.collect():
        counts = [frequency[name] for name in row.top_concepts]
        assert counts == sorted(counts, reverse=True)


def _nested_groups() -> tuple[pd.DataFrame, pd.DataFrame]:
    """3 groups of 3 dense 9-concept subgroups: loose across subgroups, looser across groups."""
    names = [f"g{g}_s{s}_{i}" for g in range(3) for s in range(3) for i in range(9)]
    draw = random.Random(5)
    pairs = []
    for a, b in itertools.combinations(names, 2):
        ga, sa, _ = a.split("_")
        gb, sb, _ = b.split("_")
        h = draw.randrange(100)
        if (ga, sa) == (gb, sb) and h < 80:
            pairs.append((a, b, 0.7))
        elif ga == gb and sa != sb and h < 6:
            pairs.append((a, b, 0.3))
        elif ga != gb and h < 1:
            pairs.append((a, b, 0.1))
    return _concepts(names), _edges(pairs)


@pytest.mark.e2e
def test_leaves_respect_the_maximum_size(spark, settings: Settings) -> None:
    concepts, edges = _nested_groups()
    tight = _with(settings, max_community_size=12, min_split_size=4, coarsening_passes=2)
    tables = detect_communities(spark, tight, spark.createDataFrame(concepts), spark.createDataFrame(edges))
    by_level = _check_hierarchy(tables, set(concepts.concept_id))
    leaf = max(by_level)
    assert leaf >= 1
    leaf_sizes = pd.Series(list(by_level[leaf].values())).value_counts()
    assert leaf_sizes.max() <= 12


@pytest.mark.e2e
def test_a_community_too_large_for_one_task_is_cut_before_it_is_refined(spark, settings: Settings) -> None:
    from lazygraph.communities.hierarchy import _directed_edges, refine_below, task_units

    concepts, edges = _nested_groups()
    tight = _with(settings, max_community_size=12, min_split_size=4, coarsening_passes=2)
    ids = spark.createDataFrame(concepts).select("concept_id", F.xxhash64("concept_id").alias("node"))
    weights = community_edge_weights(spark.createDataFrame(edges), tight.communities)
    directed = _directed_edges(ids, weights, broadcast=True)
    # The whole graph as one level-0 community, as label propagation can leave a giant component.
    top = ids.select("node", F.lit(0).cast("long").alias("label"))

    _, whole = task_units(top, directed, tight, broadcast=True)
    assert whole == len(concepts)
    limited = _with(tight, split_above_nodes=30)
    units, largest = task_units(top, directed, limited, broadcast=True)
    assert 0 < largest <= 30
    unit_of = {row.node: row.label for row in units.collect()}
    assert len(unit_of) == len(concepts)

    refined = refine_below(top, directed, limited, levels=2, broadcast=True).collect()
    level_of = defaultdict(dict)
    for row in refined:
        level_of[row.level][row.node] = row.label
    assert sorted(level_of) == [1, 2]
    # Every node once per level; each level-1 community inside one piece, each level-2 one inside
    # one level-1 community.
    for level, parent in ((1, unit_of), (2, level_of[1])):
        assert set(level_of[level]) == set(unit_of)
        parents: dict[int, set] = defaultdict(set)
        for node, label in level_of[level].items():
            parents[label].add(parent[node])
        assert all(len(p) == 1 for p in parents.values())
    assert pd.Series(list(level_of[2].values())).value_counts().max() <= 12


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("single_task_max_nodes", "single_task_max_edges"),
    [(0, 0), (100_000, 0), (100_000, 2_000_000)],
    ids=["distributed", "louvain-finish", "whole-graph-louvain"],
)
def test_modularity_close_to_leiden_on_a_planted_partition(
    spark, settings: Settings, single_task_max_nodes: int, single_task_max_edges: int
) -> None:
    graph = planted_partition(1500, 15, mean_degree=10, mixing=0.3, seed=3)
    concepts_df = spark.createDataFrame(graph.concepts)
    edges_df = spark.createDataFrame(graph.edges)
    tuned = _with(
        settings, single_task_max_nodes=single_task_max_nodes, single_task_max_edges=single_task_max_edges
    )
    tables = detect_communities(spark, tuned, concepts_df, edges_df)
    # Propagation runs unless the whole graph fits one task; Louvain finishes unless all is distributed.
    propagated = tables.stats["iterations_per_level"][0]
    assert bool(propagated) == (single_task_max_edges == 0)
    assert tables.stats["level0_finished_by_louvain"] == (single_task_max_nodes > 0)
    weights = community_edge_weights(edges_df, settings.communities)
    level0 = tables.concept_communities.filter(F.col("level") == 0)
    ours = modularity(spark, weights, level0)
    local_weights = weights.toPandas()
    assignment = {row.concept_id: row.community_id for row in level0.collect()}
    assert ours == pytest.approx(local_modularity(local_weights, assignment), abs=1e-9)
    leiden = leiden_modularity(local_weights)
    assert leiden > 0.3
    assert ours >= (0.9 if propagated else 0.97) * leiden


def test_modularity_of_known_partitions(spark) -> None:
    # Two triangles joined by one edge: the textbook partition has Q = 5/14.
    edges = _edges(
        [
            ("a", "b", 1),
            ("b", "c", 1),
            ("a", "c", 1),
            ("d", "e", 1),
            ("e", "f", 1),
            ("d", "f", 1),
            ("c", "d", 1),
        ]
    )
    two = {concept_id(n): "left" if n in "abc" else "right" for n in "abcdef"}
    one = {concept_id(n): "all" for n in "abcdef"}
    edges_df = spark.createDataFrame(edges)
    for assignment, expected in ((two, 5 / 14), (one, 0.0)):
        rows = list(assignment.items())
        assignment_df = spark.createDataFrame(rows, "concept_id string, community_id string")
        assert modularity(spark, edges_df, assignment_df) == pytest.approx(expected)


def test_edgeless_graph_gives_singletons(spark, settings: Settings) -> None:
    concepts = _concepts(["x", "y", "z"])
    edges_df = spark.createDataFrame([], "src string, dst string, weight double, cooccurrence long")
    tables = detect_communities(spark, settings, spark.createDataFrame(concepts), edges_df)
    by_level = _check_hierarchy(tables, set(concepts.concept_id))
    assert list(by_level) == [0]
    assert len(set(by_level[0].values())) == 3


@pytest.mark.e2e
def test_chunk_weights_sum_to_one_per_level(small_graph) -> None:
    tables, _, _, mentions_df = small_graph
    links = chunk_communities(mentions_df, tables.concept_communities).toPandas()
    assert set(links.chunk_id) == {"k1", "k2"}
    totals = links.groupby(["chunk_id", "level"]).weight.sum()
    assert totals.to_numpy() == pytest.approx(1.0)
    top = links[(links.chunk_id == "k1") & (links.level == 0)].sort_values("weight")
    assert top.weight.tolist() == pytest.approx([0.25, 0.75])
    n_chunks = {r.community_id: r.n_chunks for r in tables.communities.collect()}
    k2_community = links[(links.chunk_id == "k2") & (links.level == 0)].community_id.item()
    assert n_chunks[k2_community] == 1


def _shuffle_ids(spark) -> set[int]:
    """The shuffles whose files are on this Spark session's local disk."""
    import glob

    dirs = (
        spark.sparkContext._jvm.org.apache.spark.SparkEnv.get().blockManager().diskBlockManager().localDirs()
    )
    files = [f for d in dirs for f in glob.glob(f"{d.getPath()}/**/shuffle_*.data", recursive=True)]
    return {int(f.rsplit("shuffle_", 1)[1].split("_")[0]) for f in files}


def test_an_iteration_leaves_no_shuffle_files_of_the_one_before_on_disk(spark, monkeypatch) -> None:
    """Each iteration's labels are checkpointed and cut from their lineage, so the files its shuffles
    wrote are removed once the next iteration stands (a 1M-chunk graph shuffles gigabytes each)."""
    import time

    from lazygraph.communities import propagation

    monkeypatch.setattr(propagation, "RELEASE_AFTER_SECONDS", 0.0)
    rng = random.Random(3)
    pairs = {(rng.randrange(400), rng.randrange(400)) for _ in range(3_000)}
    rows = [(a, b, 1.0) for a, b in pairs if a != b] + [(b, a, 1.0) for a, b in pairs if a != b]
    edges = propagation.materialize(spark.createDataFrame(rows, "src long, dst long, w double"))
    nodes = edges.select(F.col("src").alias("node")).distinct().withColumn("part", F.lit(0))
    graph = propagation.materialize(propagation.with_degrees(nodes, edges))
    params = propagation.PropagationParams(broadcast=False)
    before = _shuffle_ids(spark)
    first = propagation.materialize(
        propagation.propagate_once(graph.withColumn("label", F.col("node")), edges, 0, params)
    ).drop("moved")
    written_by_first = _shuffle_ids(spark) - before
    assert written_by_first  # the iteration shuffled the edges
    labelled, _ = propagation.label_propagation_pass(first, edges, params, propagation.PropagationStats())
    del first  # only the pass's own iterations stand now
    deadline = time.monotonic() + 30
    while written_by_first & _shuffle_ids(spark) and time.monotonic() < deadline:
        propagation.release_unreferenced(spark)
        time.sleep(0.5)
    assert not written_by_first & _shuffle_ids(spark)
    assert labelled.count() == graph.count()
