"""Hierarchical concept communities: level 0 over the whole graph, deeper levels inside parents.

Level 0 is the modularity partition of the whole pruned concept graph, computed by distributed
label propagation (``propagation``). Each next level re-partitions every community of at least
``min_split_size`` concepts using only the edges inside it (Louvain, one level-0 community per task:
``refine``; a community above ``split_above_nodes`` is first cut by distributed propagation inside it,
``task_units``), so each child community lies inside exactly one parent, and the leaves are held to
``max_community_size``. Communities too small to split, or that do not split, are carried down as
their own single child. Levels stop at ``max_levels`` or when a level would change nothing.
Isolated concepts are singleton communities.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lazygraph.communities.propagation import PropagationParams, PropagationStats, materialize, partition
from lazygraph.communities.refine import REFINED_SCHEMA, RefineParams, refine_group
from lazygraph.errors import IndexStateError
from lazygraph.tables import COMMUNITIES, CONCEPT_COMMUNITIES
from lazygraph.tables.schemas import spark_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from rich.console import Console

    from lazygraph.settings import CommunitySettings, Settings

TOP_CONCEPTS = 10
# Rounds of cutting a community larger than split_above_nodes, each at twice the resolution before.
SPLIT_ROUNDS = 4

log = logging.getLogger(__name__)


@dataclass
class CommunityTables:
    communities: DataFrame
    concept_communities: DataFrame
    # levels, communities per level, seconds and propagation iterations per level
    stats: dict[str, Any] = field(default_factory=dict)
    # (node, label): what each refining task held (level-0 communities, giant ones cut into pieces),
    # node being the concept id's xxhash64; None without levels below 0. For measuring the stage.
    task_units: DataFrame | None = None


def community_edge_weights(edges_df: DataFrame, settings: CommunitySettings) -> DataFrame:
    """The positive weights communities are built on: (src, dst, weight), each undirected edge once.

    NPMI rewards specific associations over merely frequent ones, but it can be zero or negative
    for a kept edge; clipping it at a small positive floor keeps such edges as weak ties instead of
    letting them repel (modularity needs non-negative weights).
    """
    if settings.edge_weight == "npmi":
        weight = F.greatest(F.col("weight").cast("double"), F.lit(settings.min_edge_weight))
    else:
        weight = F.col("cooccurrence").cast("double")
    return edges_df.filter(F.col("src") != F.col("dst")).select("src", "dst", weight.alias("weight"))


def _params(settings: Settings, passes: int, n_nodes: int, whole_graph: bool = False) -> PropagationParams:
    """``whole_graph``: the level-0 partition of the whole graph, which may go to one task whole when
    small enough; a giant community being cut never does (that cut exists to keep it out of one task)."""
    cfg = settings.communities
    return PropagationParams(
        resolution=cfg.resolution,
        max_iterations=cfg.label_propagation_iterations,
        max_passes=passes,
        tolerance=cfg.convergence_tolerance,
        seed=cfg.seed,
        broadcast=n_nodes <= cfg.broadcast_max_nodes,
        single_task_max_nodes=cfg.single_task_max_nodes,
        single_task_max_edges=cfg.single_task_max_edges if whole_graph else 0,
    )


def _canonical(assignment: DataFrame) -> DataFrame:
    """Name each community by its smallest member, so labels are unique across parents."""
    smallest = assignment.groupBy("label").agg(F.min("node").alias("canonical"))
    return assignment.join(smallest, "label").select("node", F.col("canonical").alias("label"))


def _small(df: DataFrame, broadcast: bool) -> DataFrame:
    return F.broadcast(df) if broadcast else df


def _directed_edges(ids: DataFrame, weights: DataFrame, broadcast: bool) -> DataFrame:
    """Undirected string-id edges -> both directions on 64-bit ids, partitioned by source."""
    src_ids = _small(ids.select(F.col("concept_id").alias("src"), F.col("node").alias("s")), broadcast)
    dst_ids = _small(ids.select(F.col("concept_id").alias("dst"), F.col("node").alias("d")), broadcast)
    undirected = weights.join(src_ids, "src").join(dst_ids, "dst")
    undirected = undirected.select("s", "d", F.col("weight").alias("w"))
    both = undirected.select(F.col("s").alias("src"), F.col("d").alias("dst"), "w").unionByName(
        undirected.select(F.col("d").alias("src"), F.col("s").alias("dst"), "w")
    )
    return materialize(both.repartition("src"))


def _refined_levels(
    top: DataFrame, n_top: int, edges: DataFrame, settings: Settings, broadcast: bool
) -> tuple[list[DataFrame], list[int], DataFrame, int]:
    """Levels 1.. below ``top`` (node, label): Louvain inside each level-0 community, or each piece of
    one too large for a task (see ``refine`` and ``task_units``).

    Returns one (node, label) frame per level and its community count, without trailing levels
    that change nothing, the refining tasks' units and the most concepts one of them received.
    """
    cfg = settings.communities
    units, largest = task_units(top, edges, settings, broadcast)
    refined = _refine_units(units, edges, settings, cfg.max_levels - 1, broadcast)
    counts = {
        row["level"]: row["n"]
        for row in refined.groupBy("level").agg(F.countDistinct("label").alias("n")).collect()
    }
    per_level = [n_top] + [counts.get(level, 0) for level in range(1, cfg.max_levels)]
    # Trailing levels identical to the one above them add nothing to the tree.
    keep = len(per_level)
    while keep > 1 and per_level[keep - 1] == per_level[keep - 2]:
        keep -= 1
    frames = [refined.filter(F.col("level") == level).select("node", "label") for level in range(1, keep)]
    return frames, per_level[1:keep], units, largest


def refine_below(
    top: DataFrame, edges: DataFrame, settings: Settings, levels: int, broadcast: bool
) -> DataFrame:
    """(node, level, label) for levels 1..``levels`` under ``top`` (node, label), every node at every
    level: Louvain inside each community of ``top``, one task per community, or per piece of a
    community larger than ``split_above_nodes`` (``task_units``), so every child lies inside its
    parent and no task holds a giant community."""
    units, _ = task_units(top, edges, settings, broadcast)
    return _refine_units(units, edges, settings, levels, broadcast)


def task_units(
    top: DataFrame, edges: DataFrame, settings: Settings, broadcast: bool
) -> tuple[DataFrame, int]:
    """``top`` (node, label) with every community of more than ``split_above_nodes`` members cut into
    pieces (node, label): distributed label propagation inside the community, on its own edges only,
    and again at twice the resolution on a piece that is still too large. Each piece lies inside its
    community, so the levels refined from the pieces nest in ``top`` as they would from the whole.
    Also returns the size of the largest unit. Communities within the limit cost one aggregation."""
    cfg = settings.communities
    units = top.select("node", "label")
    resolution = cfg.resolution
    for _ in range(SPLIT_ROUNDS):
        sizes = units.groupBy("label").agg(F.count("*").alias("size"))
        largest = int(sizes.agg(F.max("size")).first()[0] or 0)
        if largest <= cfg.split_above_nodes:
            return units, largest
        oversized = materialize(sizes.filter(F.col("size") > cfg.split_above_nodes).select("label"))
        inside = units.join(F.broadcast(oversized), "label", "left_semi")
        nodes = materialize(inside.select("node", F.col("label").alias("part")))
        params = replace(_params(settings, cfg.coarsening_passes, nodes.count()), resolution=resolution)
        pieces = _canonical(partition(nodes, _edges_inside(nodes, edges, broadcast), params))
        kept = units.join(F.broadcast(oversized), "label", "left_anti")
        units = materialize(kept.unionByName(pieces.select("node", "label")))
        resolution *= 2
    log.warning(
        "communities: a community is still larger than communities.split_above_nodes (%d) after %d "
        "rounds of splitting; it is refined in one task",
        cfg.split_above_nodes,
        SPLIT_ROUNDS,
    )
    sizes = units.groupBy("label").agg(F.count("*").alias("size"))
    return units, int(sizes.agg(F.max("size")).first()[0] or 0)


def _edges_inside(nodes: DataFrame, edges: DataFrame, broadcast: bool) -> DataFrame:
    """The directed edges (src, dst, w) with both ends in the same part of ``nodes`` (node, part)."""
    src_part = _small(nodes.select(F.col("node").alias("src"), "part"), broadcast)
    dst_part = _small(nodes.select(F.col("node").alias("dst"), F.col("part").alias("dst_part")), broadcast)
    inside = edges.join(src_part, "src").join(dst_part, "dst").filter(F.col("part") == F.col("dst_part"))
    return materialize(inside.select("src", "dst", "w").repartition("src"))


def _refine_units(
    top: DataFrame, edges: DataFrame, settings: Settings, levels: int, broadcast: bool
) -> DataFrame:
    """(node, level, label) for levels 1..``levels``: Louvain inside each label of ``top``, one per task."""
    cfg = settings.communities
    params = RefineParams(
        levels=levels,
        min_split_size=cfg.min_split_size,
        max_community_size=cfg.max_community_size,
        resolution=cfg.resolution,
        seed=cfg.seed,
    )
    part_of = top.select("node", F.col("label").alias("part"))
    node_rows = part_of.select(
        "part",
        F.col("node").alias("src"),
        F.col("node").alias("dst"),
        F.lit(None).cast("double").alias("w"),
    )
    dst_part = part_of.select(F.col("node").alias("dst"), F.col("part").alias("dst_part"))
    inner = (
        edges.filter(F.col("src") < F.col("dst"))
        .join(_small(part_of.withColumnRenamed("node", "src"), broadcast), "src")
        .join(_small(dst_part, broadcast), "dst")
        .filter(F.col("part") == F.col("dst_part"))
        .select("part", "src", "dst", "w")
    )
    return materialize(
        node_rows.unionByName(inner)
        .groupBy("part")
        .applyInPandas(lambda group: refine_group(group, params), schema=REFINED_SCHEMA)
    )


def _community_ids(levels: DataFrame) -> DataFrame:
    """(concept_id, level, label, ...) -> adds community_id: a hash of the level and smallest member."""
    anchors = levels.groupBy("level", "label").agg(F.min("concept_id").alias("anchor"))
    community_id = F.substring(F.sha2(F.concat_ws(":", F.col("level").cast("string"), "anchor"), 256), 1, 16)
    return levels.join(anchors.withColumn("community_id", community_id).drop("anchor"), ["level", "label"])


def _communities_table(members: DataFrame, mentions_df: DataFrame | None) -> DataFrame:
    """members(concept_id, name, frequency, level, community_id) -> the communities table."""
    by_frequency = F.struct((-F.col("frequency")).alias("f"), F.col("name").alias("n"))
    ranked = F.sort_array(F.collect_list(by_frequency))
    summary = members.groupBy("community_id", "level").agg(
        F.count("*").alias("size"),
        F.slice(F.transform(ranked, lambda item: item["n"]), 1, TOP_CONCEPTS).alias("top_concepts"),
    )
    child = members.select("concept_id", "level", "community_id")
    parent = child.select(
        "concept_id", (F.col("level") + 1).alias("level"), F.col("community_id").alias("parent_id")
    )
    parents = (
        child.join(parent, ["concept_id", "level"])
        .groupBy("community_id")
        .agg(F.first("parent_id").alias("parent_id"))
    )
    table = summary.join(parents, "community_id", "left")
    if mentions_df is not None:
        chunks = (
            mentions_df.select("chunk_id", "concept_id")
            .join(child, "concept_id")
            .groupBy("community_id")
            .agg(F.countDistinct("chunk_id").alias("n_chunks"))
        )
        table = table.join(chunks, "community_id", "left").fillna(0, subset=["n_chunks"])
    else:
        table = table.withColumn("n_chunks", F.lit(0))
    return table.select(
        "community_id",
        F.col("level").cast("int").alias("level"),
        "parent_id",
        F.col("size").cast("long").alias("size"),
        F.col("n_chunks").cast("long").alias("n_chunks"),
        "top_concepts",
    )


def _empty(spark: SparkSession) -> CommunityTables:
    return CommunityTables(
        communities=spark.createDataFrame([], spark_schema(COMMUNITIES)),
        concept_communities=spark.createDataFrame([], spark_schema(CONCEPT_COMMUNITIES)),
        stats={"levels": 0, "communities_per_level": [], "seconds_per_level": []},
    )


def detect_communities(
    spark: SparkSession,
    settings: Settings,
    concepts_df: DataFrame,
    edges_df: DataFrame,
    mentions_df: DataFrame | None = None,
    console: Console | None = None,
) -> CommunityTables:
    """Hierarchical communities of the kept concept graph.

    concepts_df: kept concepts (concept_id, name, frequency); edges_df: kept edges (src, dst, weight,
    cooccurrence), each undirected pair once; mentions_df (optional: chunk_id, concept_id) fills
    ``n_chunks``, which is 0 without it. Returns the communities and concept_communities tables.
    """
    cfg = settings.communities
    largest_task, units = 0, None
    concepts = materialize(
        concepts_df.select("concept_id", "name", "frequency").withColumn("node", F.xxhash64("concept_id"))
    )
    n_nodes = concepts.count()
    if n_nodes == 0:
        return _empty(spark)
    if concepts.select("node").distinct().count() != n_nodes:
        raise IndexStateError(
            "concept ids are duplicated (or collide in their 64-bit hash) in the concepts table; "
            "rebuild the index with `lazygraph index` so that each concept appears once"
        )
    ids = concepts.select("concept_id", "node")
    edges = _directed_edges(ids, community_edge_weights(edges_df, cfg), n_nodes <= cfg.broadcast_max_nodes)

    started = time.perf_counter()
    level_stats = [PropagationStats()]
    nodes = ids.select("node", F.lit(0).cast("long").alias("part"))
    top_params = _params(settings, cfg.coarsening_passes, n_nodes, whole_graph=True)
    top = _canonical(partition(nodes, edges, top_params, level_stats[0]))
    levels = [materialize(top)]
    counts = [levels[0].select("label").distinct().count()]
    seconds = [time.perf_counter() - started]
    _progress(console, 0, counts[0], seconds[0])
    if cfg.max_levels > 1:
        started = time.perf_counter()
        deeper, deeper_counts, units, largest_task = _refined_levels(
            levels[0], counts[0], edges, settings, n_nodes <= cfg.broadcast_max_nodes
        )
        levels += deeper
        counts += deeper_counts
        seconds.append(time.perf_counter() - started)
        if console is not None and deeper:
            listed = ", ".join(f"{count:,}" for count in deeper_counts)
            console.print(f"communities: levels 1-{len(deeper)}: {listed} communities ({seconds[-1]:.1f} s)")

    stacked = levels[0].withColumn("level", F.lit(0))
    for number, level in enumerate(levels[1:], start=1):
        stacked = stacked.unionByName(level.withColumn("level", F.lit(number)))
    members = materialize(_community_ids(stacked.join(concepts, "node")))
    concept_communities = members.select(
        "concept_id", F.col("level").cast("int").alias("level"), "community_id"
    )
    communities = materialize(_communities_table(members, mentions_df))
    stats = {
        "levels": len(levels),
        "communities_per_level": counts,
        # [level 0, all deeper levels together]: the deeper levels are computed in one job.
        "seconds_per_level": [round(s, 3) for s in seconds],
        # Label-propagation iterations of each coarsening pass at level 0 (deeper levels use Louvain).
        "iterations_per_level": [s.iterations for s in level_stats],
        "level0_finished_by_louvain": level_stats[0].finished_by_louvain,
        # The most concepts one task refined (bounded by communities.split_above_nodes).
        "largest_task_nodes": largest_task,
    }
    return CommunityTables(
        communities=communities, concept_communities=concept_communities, stats=stats, task_units=units
    )


def _progress(console: Console | None, level: int, count: int, seconds: float) -> None:
    if console is not None:
        console.print(f"communities: level {level}: {count:,} communities ({seconds:.1f} s)")
