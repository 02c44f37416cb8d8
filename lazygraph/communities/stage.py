"""The communities stage of an index run: the hierarchy over the kept graph, and chunk links.

A full detection (``rebuild_communities``) replaces the three community tables, each in one Delta
transaction. After a run whose graph counts were MERGEd, ``update_communities`` updates the hierarchy
locally instead (``incremental``) unless the drift since the last full detection passes
``communities.redetect_drift``; the tables are then MERGEd with the updated hierarchy, so that
communities the update did not reach keep their rows and files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lazygraph import tables
from lazygraph.communities import incremental
from lazygraph.communities.chunks import chunk_communities
from lazygraph.communities.hierarchy import (
    _communities_table,
    _community_ids,
    _directed_edges,
    community_edge_weights,
    detect_communities,
    refine_below,
)
from lazygraph.communities.propagation import PropagationParams, materialize, with_degrees
from lazygraph.communities.refine import RefineParams, refine_group
from lazygraph.graph.cooccurrence import GraphTables
from lazygraph.manifest import run_versions
from lazygraph.run_context import RunContext
from lazygraph.settings import CommunitySettings
from lazygraph.tables import CHUNK_COMMUNITIES, COMMUNITIES, CONCEPT_COMMUNITIES, EDGES
from lazygraph.tables.store import table_facts

COMMUNITY_TABLES = (COMMUNITIES, CONCEPT_COMMUNITIES, CHUNK_COMMUNITIES)


def rebuild_communities(ctx: RunContext, graph: GraphTables) -> dict[str, int]:
    """Detect and write the communities; returns the number of communities per level."""
    concepts = graph.concepts.filter("kept")
    edges = graph.edges.filter("kept")
    result = detect_communities(
        ctx.spark,
        ctx.settings,
        concepts.select("concept_id", "name", "frequency"),
        edges.select("src", "dst", "weight", "cooccurrence"),
        mentions_df=graph.mentions.select("chunk_id", "concept_id"),
        console=ctx.console,
    )
    _write(ctx, graph, result.communities, result.concept_communities)
    per_level = result.stats.get("communities_per_level", [])
    return {f"level_{i}": n for i, n in enumerate(per_level)}


def update_communities(
    ctx: RunContext, graph: GraphTables, last_run: dict[str, Any] | None
) -> tuple[dict[str, int], dict[str, Any]]:
    """Update the hierarchy locally when the run MERGEd its counts and the drift allows, else detect it
    afresh; returns the stage's counts and the update's record (``incremental.summary``)."""
    threshold = ctx.settings.communities.redetect_drift
    drift_before = previous_drift(ctx, last_run) if graph.changed_pairs is not None else None
    if drift_before is None:
        return rebuild_communities(ctx, graph), incremental.summary("full", 0.0, threshold)
    versions = run_versions(last_run, ctx.index_uri)
    share = _change_share(ctx, graph, versions)
    drift = drift_before + share
    if drift > threshold:
        counts = rebuild_communities(ctx, graph)
        return counts, incremental.summary("full", 0.0, threshold, drift_before_full=round(drift, 6))
    counts = _update_locally(ctx, graph, versions)
    return counts, incremental.summary("local", drift, threshold, change_share=round(share, 6), **counts)


def previous_drift(ctx: RunContext, last_run: dict[str, Any] | None) -> float | None:
    """The drift since the last full detection, or None when the hierarchy cannot be updated locally
    (no earlier run, or community tables written since the last complete run)."""
    if last_run is None:
        return None
    recorded = run_versions(last_run, ctx.index_uri)
    # Edges are not checked: this run has rewritten them already, and the old ones are read as recorded.
    for name in COMMUNITY_TABLES:
        table = tables.open_delta(ctx.store.uri(name), settings=ctx.settings)
        if table is None or ctx.baseline.get(name, recorded.get(name)) != table.version():
            return None
    record = json.loads(last_run["counts_json"] or "{}").get("communities") or {}
    return float(record.get("drift", 0.0))


def _pinned(ctx: RunContext, name: str, versions: dict[str, int]) -> Any:
    return (
        ctx.spark.read.format("delta").option("versionAsOf", versions[name]).load(ctx.store.spark_uri(name))
    )


def _weights(edges: Any, ctx: RunContext) -> Any:
    """src, dst, weight: the kept edges with the weights communities are built on."""
    kept = edges.filter("kept").select("src", "dst", "weight", "cooccurrence")
    return community_edge_weights(kept, ctx.settings.communities)


def _change_share(ctx: RunContext, graph: GraphTables, versions: dict[str, int]) -> float:
    """This run's drift: community weight moved on the pairs whose counts changed, over the total."""
    from pyspark.sql import functions as F

    if graph.held is not None:
        return _change_share_held(ctx, graph, versions)
    old = _weights(_pinned(ctx, EDGES, versions), ctx).withColumnRenamed("weight", "old")
    new = _weights(graph.edges, ctx).withColumnRenamed("weight", "new")
    changed = graph.changed_pairs.select("src", "dst").join(old, ["src", "dst"], "left")
    changed = changed.join(new, ["src", "dst"], "left").fillna(0.0, subset=["old", "new"])
    moved = changed.agg(F.sum(F.abs(F.col("new") - F.col("old")))).first()[0] or 0.0
    total = new.agg(F.sum("new")).first()[0] or 0.0
    return incremental.changed_weight_share(float(moved), float(total))


def _change_share_held(ctx: RunContext, graph: GraphTables, versions: dict[str, int]) -> float:
    """``_change_share`` for a graph derived in the driver: the same sums over its held edges and the
    old edges read by deltalake, without the Spark joins and aggregations."""
    cfg = ctx.settings.communities
    old = held_weights(_pinned_rows(ctx, EDGES, versions, EDGE_COLUMNS), cfg).rename(
        columns={"weight": "old"}
    )
    new = held_weights(graph.held[1], cfg).rename(columns={"weight": "new"})
    changed = _changed_pairs(graph).merge(old, on=["src", "dst"], how="left")
    changed = changed.merge(new, on=["src", "dst"], how="left").fillna({"old": 0.0, "new": 0.0})
    moved = float(np.abs(changed["new"].to_numpy() - changed["old"].to_numpy()).sum())
    return incremental.changed_weight_share(moved, float(new["new"].sum()))


EDGE_COLUMNS = ["src", "dst", "cooccurrence", "weight", "kept"]


def held_weights(edges: pd.DataFrame, cfg: CommunitySettings) -> pd.DataFrame:
    """``hierarchy.community_edge_weights`` on a pandas frame of edges: src, dst, weight of the kept
    edges, each undirected pair once, with the same floor on NPMI."""
    chosen = edges["kept"].to_numpy(dtype=bool) & (edges["src"] != edges["dst"]).to_numpy()
    kept = edges[chosen]
    if cfg.edge_weight == "npmi":
        weight = np.maximum(kept["weight"].to_numpy(dtype=np.float64), cfg.min_edge_weight)
    else:
        weight = kept["cooccurrence"].to_numpy(dtype=np.float64)
    return pd.DataFrame({"src": kept["src"].to_numpy(), "dst": kept["dst"].to_numpy(), "weight": weight})


def _pinned_rows(ctx: RunContext, name: str, versions: dict[str, int], columns: list[str]) -> pd.DataFrame:
    """``columns`` of table ``name`` at the version the last complete run left, read by deltalake."""
    table = tables.open_delta(ctx.store.uri(name), version=versions[name], settings=ctx.settings)
    return tables.arrow_dataset(table, ctx.settings).to_table(columns=columns).to_pandas()


def _changed_pairs(graph: GraphTables) -> pd.DataFrame:
    """src, dst of the pairs this run's MERGE changed (no more rows than the change itself), collected
    once for the drift and the held graph."""
    if graph.held_changes is None:
        graph.held_changes = graph.changed_pairs.select("src", "dst").toPandas()
    return graph.held_changes


def _affected(ctx: RunContext, graph: GraphTables, old_level0: Any, versions: dict[str, int]) -> Any:
    """concept_id of the kept concepts the run touched: ends of changed pairs, and concepts that
    joined the pruned graph; plus the old members that left it (to free their communities)."""
    from pyspark.sql import functions as F

    ends = graph.changed_pairs.select(F.col("src").alias("concept_id")).unionByName(
        graph.changed_pairs.select(F.col("dst").alias("concept_id"))
    )
    kept_now = graph.concepts.filter("kept").select("concept_id")
    kept_before = _pinned(ctx, tables.CONCEPTS, versions).filter("kept").select("concept_id")
    flipped = kept_now.join(kept_before, "concept_id", "left_anti").unionByName(
        kept_before.join(kept_now, "concept_id", "left_anti")
    )
    joined = kept_now.join(old_level0, "concept_id", "left_anti")
    return ends.unionByName(flipped).unionByName(joined).distinct()


@dataclass
class HeldGraph:
    """A graph small enough for the driver (at most ``communities.single_task_max_nodes`` kept concepts),
    read once for the whole local update: the kept weighted edges (src, dst, weight, each undirected
    pair once), every kept concept with its 64-bit node id and old level-0 label, and the affected ones."""

    weights: pd.DataFrame
    nodes: pd.DataFrame  # concept_id, node, old
    affected: list[str]

    def local_graph(self) -> incremental.LocalGraph:
        """What the level-0 local moves need (``incremental.LocalGraph``)."""
        ends = pd.concat(
            [
                self.weights[["src", "weight"]].rename(columns={"src": "concept_id"}),
                self.weights[["dst", "weight"]].rename(columns={"dst": "concept_id"}),
            ]
        )
        degree = ends.groupby("concept_id")["weight"].sum()
        touched = set(self.affected)
        near = self.weights[self.weights["src"].isin(touched) | self.weights["dst"].isin(touched)]
        concepts = self.nodes["concept_id"].tolist()
        old = self.nodes["old"].astype(object).where(self.nodes["old"].notna(), None).tolist()
        return incremental.LocalGraph(
            degree={c: float(degree.get(c, 0.0)) for c in concepts},
            label=dict(zip(concepts, old, strict=True)),
            edges=list(zip(near["src"], near["dst"], near["weight"].astype(float), strict=True)),
            affected=list(self.affected),
            total_weight=float(self.weights["weight"].sum()),
        )


def _held_graph(ctx: RunContext, graph: GraphTables, versions: dict[str, int]) -> HeldGraph:
    """Read the kept graph into the driver in three jobs (only for a graph of at most
    ``communities.single_task_max_nodes`` kept concepts: ``_level0_moves``); for a graph derived in
    the driver, from its held frames and one job naming the nodes."""
    from pyspark.sql import functions as F

    if graph.held is not None:
        return _held_graph_from_frames(ctx, graph, versions)
    old_level0 = _old_level0(ctx, versions)
    nodes = (
        graph.concepts.filter("kept")
        .select("concept_id", F.xxhash64("concept_id").alias("node"))
        .join(old_level0, "concept_id", "left")
    )
    affected = _affected(ctx, graph, old_level0, versions)
    return HeldGraph(
        weights=_weights(graph.edges, ctx).toPandas(),
        nodes=nodes.toPandas().sort_values("concept_id", ignore_index=True),
        affected=sorted(affected.toPandas()["concept_id"]),
    )


def _held_graph_from_frames(ctx: RunContext, graph: GraphTables, versions: dict[str, int]) -> HeldGraph:
    """``_held_graph`` from the frames the graph stage held: the same weights, nodes and affected
    concepts (``_affected``'s three kinds), the old tables read by deltalake."""
    from pyspark.sql import functions as F

    concepts, edges = graph.held
    old_cc = _pinned_rows(ctx, CONCEPT_COMMUNITIES, versions, ["concept_id", "level", "community_id"])
    old_level0 = old_cc.loc[old_cc["level"] == 0, ["concept_id", "community_id"]]
    old_level0 = old_level0.rename(columns={"community_id": "old"})
    # Node ids are Spark's xxhash64 of the concept id, as every other path names them.
    named = graph.concepts.filter("kept").select("concept_id", F.xxhash64("concept_id").alias("node"))
    nodes = named.toPandas().merge(old_level0, on="concept_id", how="left")
    old_concepts = _pinned_rows(ctx, tables.CONCEPTS, versions, ["concept_id", "kept"])
    kept_now = set(concepts.loc[concepts["kept"].to_numpy(dtype=bool), "concept_id"])
    kept_before = set(old_concepts.loc[old_concepts["kept"].to_numpy(dtype=bool), "concept_id"])
    changed = _changed_pairs(graph)
    affected = set(changed["src"]) | set(changed["dst"]) | (kept_now ^ kept_before)
    affected |= kept_now - set(old_level0["concept_id"])
    return HeldGraph(
        weights=held_weights(edges, ctx.settings.communities),
        nodes=nodes.sort_values("concept_id", ignore_index=True),
        affected=sorted(affected),
    )


def _old_level0(ctx: RunContext, versions: dict[str, int]) -> Any:
    """concept_id, old: each concept's level-0 community as the last run left it."""
    from pyspark.sql import functions as F

    old_cc = _pinned(ctx, CONCEPT_COMMUNITIES, versions)
    return old_cc.filter(F.col("level") == 0).select("concept_id", F.col("community_id").alias("old"))


def _level0_moves(
    ctx: RunContext, graph: GraphTables, versions: dict[str, int]
) -> tuple[Any, dict[str, int], Resplit | None]:
    """(concept_id, label0, redo) of every kept concept after the local moves, the moves' counts, and
    for a graph moved in the driver what the driver needs to split the redone communities again.

    A graph of at most ``single_task_max_nodes`` kept concepts is moved in the driver, node by node
    (``incremental.local_moves``): a few seconds less per append than Spark jobs. A larger one is moved
    by Spark jobs (``_level0_moves_distributed``), so the driver's memory does not grow with the corpus.
    """
    n_kept = (
        int(graph.held[0]["kept"].sum()) if graph.held is not None else graph.concepts.filter("kept").count()
    )
    if n_kept > ctx.settings.communities.single_task_max_nodes:
        level0, counts = _level0_moves_distributed(ctx, graph, versions, n_kept)
        return level0, counts, None
    held = _held_graph(ctx, graph, versions)
    local = held.local_graph()
    moves = incremental.local_moves(local, ctx.settings.communities.resolution)
    redo = incremental.communities_to_redo(moves.label, local.label, set(local.affected))
    labels = pd.DataFrame({"concept_id": list(moves.label), "label0": list(moves.label.values())})
    labels["redo"] = labels["label0"].isin(redo)
    level0 = ctx.spark.createDataFrame(labels, "concept_id string, label0 string, redo boolean")
    counts = {"moved": len(moves.moved), "affected": len(local.affected), "redone": len(redo)}
    return level0, counts, Resplit(held, labels[labels["redo"]])


def _level0_moves_distributed(
    ctx: RunContext, graph: GraphTables, versions: dict[str, int], n_kept: int
) -> tuple[Any, dict[str, int]]:
    """``_level0_moves`` as Spark jobs (``incremental.distributed_local_moves``); nothing collected.

    Labels are 64-bit: an old community's is the hash of its id, a new concept's its own node id. The
    level-0 communities redone are those holding an affected concept after the moves, those a moved
    concept left or joined, and those a concept that left the pruned graph belonged to."""
    from pyspark.sql import functions as F

    cfg = ctx.settings.communities
    broadcast = n_kept <= cfg.broadcast_max_nodes
    old_level0 = _old_level0(ctx, versions)
    kept = graph.concepts.filter("kept").select("concept_id", F.xxhash64("concept_id").alias("node"))
    edges = _directed_edges(kept, _weights(graph.edges, ctx), broadcast)
    affected = materialize(_affected(ctx, graph, old_level0, versions))
    start = (
        kept.join(old_level0, "concept_id", "left")
        .join(affected.withColumn("movable", F.lit(True)), "concept_id", "left")
        .select(
            "concept_id",
            "node",
            F.coalesce(F.xxhash64("old"), F.col("node")).alias("label"),
            F.coalesce("movable", F.lit(False)).alias("movable"),
            F.lit(0).cast("long").alias("part"),
        )
    )
    start = materialize(with_degrees(start, edges))
    params = PropagationParams(resolution=cfg.resolution, seed=cfg.seed, broadcast=broadcast)
    moved_nodes, _ = incremental.distributed_local_moves(
        start.withColumn("start", F.col("label")), edges, params, cfg.label_propagation_iterations
    )
    moved_nodes = materialize(moved_nodes)
    moved = moved_nodes.filter(F.col("label") != F.col("start"))
    left = old_level0.join(kept, "concept_id", "left_anti").select(F.xxhash64("old").alias("label"))
    redo = materialize(
        moved_nodes.filter("movable")
        .select("label")
        .unionByName(moved.select("label"))
        .unionByName(moved.select(F.col("start").alias("label")))
        .unionByName(left)
        .distinct()
    )
    level0 = moved_nodes.join(redo.withColumn("redo", F.lit(True)), "label", "left").select(
        "concept_id",
        F.col("label").cast("string").alias("label0"),
        F.coalesce("redo", F.lit(False)).alias("redo"),
    )
    counts = {"moved": moved.count(), "affected": affected.count(), "redone": redo.count()}
    return materialize(level0), counts


def _update_locally(ctx: RunContext, graph: GraphTables, versions: dict[str, int]) -> dict[str, int]:
    """Level 0 by local moves, the subtrees of changed level-0 communities split again, the rest kept."""
    from pyspark.sql import functions as F

    level0, move_counts, resplit = _level0_moves(ctx, graph, versions)
    old_cc = _pinned(ctx, CONCEPT_COMMUNITIES, versions)
    n_levels = (old_cc.agg(F.max("level")).first()[0] or 0) + 1
    stacked = level0.select(
        "concept_id", F.lit(0).alias("level"), F.concat(F.lit("0:"), "label0").alias("label")
    )
    kept_below = (
        old_cc.filter(F.col("level") > 0)
        .join(level0.filter(~F.col("redo")).select("concept_id"), "concept_id", "left_semi")
        .select("concept_id", "level", F.concat(F.lit("o:"), "community_id").alias("label"))
    )
    stacked = stacked.unionByName(kept_below)
    if n_levels > 1 and move_counts["redone"]:
        below = resplit.levels(ctx, n_levels - 1) if resplit is not None else None
        if below is None:
            below = _split_again(ctx, graph, level0.filter("redo"), n_levels - 1)
        stacked = stacked.unionByName(below)
    concepts = graph.concepts.filter("kept").select("concept_id", "name", "frequency")
    members = materialize(_community_ids(stacked.join(concepts, "concept_id")))
    concept_communities = members.select(
        "concept_id", F.col("level").cast("int").alias("level"), "community_id"
    )
    communities = materialize(_communities_table(members, graph.mentions.select("chunk_id", "concept_id")))
    _write(ctx, graph, communities, concept_communities, merge=True)
    per_level = {
        row["level"]: row["n"]
        for row in communities.groupBy("level").count().withColumnRenamed("count", "n").collect()
    }
    counts = {f"level_{level}": per_level[level] for level in sorted(per_level)}
    counts.update(move_counts)
    return counts


@dataclass
class Resplit:
    """The redone level-0 communities of a graph held in the driver, split again there: the same
    per-community Louvain (``refine.refine_group``) on the same rows a Spark task would receive, so the
    levels are the ones ``_split_again`` finds, without its Spark jobs."""

    held: HeldGraph
    redo: pd.DataFrame  # concept_id, label0 of the concepts whose level-0 community is redone

    def levels(self, ctx: RunContext, levels: int) -> Any | None:
        """(concept_id, level, label) of levels 1..``levels``; None when a redone community is larger
        than ``communities.split_above_nodes`` (it must be cut by distributed propagation first)."""
        cfg = ctx.settings.communities
        schema = "concept_id string, level int, label string"
        members = self.redo.merge(self.held.nodes[["concept_id", "node"]], on="concept_id")
        if members.empty:  # every redone community lost all its members (a delete)
            return ctx.spark.createDataFrame([], schema)
        if members.groupby("label0").size().max() > cfg.split_above_nodes:
            return None
        members["part"] = members.groupby("label0")["node"].transform("min")
        rows = _group_rows(members, self.held.weights)
        params = RefineParams(levels, cfg.min_split_size, cfg.max_community_size, cfg.resolution, cfg.seed)
        parts = [refine_group(group, params) for _, group in rows.groupby("part", sort=True)]
        refined = pd.concat(parts, ignore_index=True).merge(members[["node", "concept_id"]], on="node")
        out = pd.DataFrame(
            {
                "concept_id": refined["concept_id"],
                "level": refined["level"].astype("int32"),
                "label": "r:" + refined["label"].astype(str),
            }
        )
        return ctx.spark.createDataFrame(out, schema)


def _group_rows(members: pd.DataFrame, weights: pd.DataFrame) -> pd.DataFrame:
    """GROUP_SCHEMA rows of each redone community: one row per member, one per edge inside it (its
    ends' node ids in increasing order, as ``hierarchy._refine_units`` sends them)."""
    node_rows = pd.DataFrame(
        {"part": members["part"], "src": members["node"], "dst": members["node"], "w": float("nan")}
    )
    # Inner merges: a missing end would turn the 64-bit ids into floats and round them.
    part_of = members[["concept_id", "node", "part"]]
    ends = weights.merge(part_of.rename(columns={"concept_id": "src"}), on="src").merge(
        part_of.rename(columns={"concept_id": "dst"}), on="dst", suffixes=("", "_dst")
    )
    ends = ends[ends["part"] == ends["part_dst"]]
    edge_rows = pd.DataFrame(
        {
            "part": ends["part"].to_numpy(dtype=np.int64),
            "src": np.minimum(ends["node"], ends["node_dst"]).to_numpy(dtype=np.int64),
            "dst": np.maximum(ends["node"], ends["node_dst"]).to_numpy(dtype=np.int64),
            "w": ends["weight"].to_numpy(dtype=np.float64),
        }
    )
    return pd.concat([node_rows, edge_rows], ignore_index=True)


def _split_again(ctx: RunContext, graph: GraphTables, redo: Any, levels: int) -> Any:
    """(concept_id, level, label) of levels 1..``levels`` inside the level-0 communities in ``redo``."""
    from pyspark.sql import functions as F

    ids = redo.select("concept_id", F.xxhash64("concept_id").alias("node"))
    labels = redo.join(ids, "concept_id").select("node", "label0")
    top = labels.join(labels.groupBy("label0").agg(F.min("node").alias("label")), "label0").select(
        "node", "label"
    )
    weights = _weights(graph.edges, ctx).join(
        redo.select(F.col("concept_id").alias("src")), "src", "left_semi"
    )
    weights = weights.join(redo.select(F.col("concept_id").alias("dst")), "dst", "left_semi")
    edges = _directed_edges(ids, weights, broadcast=True)
    refined = refine_below(top, edges, ctx.settings, levels, broadcast=True)
    return refined.join(ids, "node").select(
        "concept_id", "level", F.concat(F.lit("r:"), F.col("label").cast("string")).alias("label")
    )


def _write(
    ctx: RunContext, graph: GraphTables, communities: Any, concept_communities: Any, *, merge: bool = False
) -> None:
    """The three tables, each in one transaction: replaced after a full detection; after a local update
    MERGEd where the table is large (``merges_table``: community ids are a hash of level and smallest
    member, so communities an update did not reach keep their ids and rows, and the files holding only
    them are not rewritten), else replaced."""
    links = chunk_communities(graph.mentions, concept_communities)
    for name, rows in (
        (COMMUNITIES, communities),
        (CONCEPT_COMMUNITIES, concept_communities),
        (CHUNK_COMMUNITIES, links),
    ):
        if merge and merges_table(_rows_held(ctx, name), ctx.settings.communities):
            ctx.store.sync(name, rows)
        else:
            ctx.store.overwrite(name, rows)


def merges_table(rows_held: int, cfg: CommunitySettings) -> bool:
    """Whether a local update MERGEs a community table holding ``rows_held`` rows (else rewrites it)."""
    return rows_held >= cfg.merge_min_rows


def _rows_held(ctx: RunContext, name: str) -> int:
    """The table's rows as the last complete run left them, from its log and file footers (no Spark)."""
    facts = table_facts(ctx.store.uri(name), ctx.settings)
    return facts[1] if facts is not None else 0
