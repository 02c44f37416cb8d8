"""Community detection: speed, and modularity against single-machine Leiden on the same graph.

    lazygraph bench communities --index /path/to/index        # kept concepts/edges of an index
    lazygraph bench communities --synthetic 20000 --groups 200  # planted-partition graph

Prints one JSON object: graph size, levels and community counts, seconds of the Spark stage, and
the modularity of level 0 and of the leaf level over Leiden's (Leiden optimises one flat partition,
so level 0 is the comparable figure; the leaf level trades modularity for bounded community size).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from pyspark.sql import functions as F

from lazygraph.communities import community_edge_weights, detect_communities, leiden_modularity, modularity
from lazygraph.communities.synthetic import planted_partition
from lazygraph.runtime.checkpoint import checkpoint
from lazygraph.runtime.spark import get_spark
from lazygraph.settings import Settings
from lazygraph.tables import CONCEPTS, EDGES, table_uri


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="lazygraph bench communities",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--index", help="index directory or URI holding the concepts and edges tables")
    source.add_argument("--synthetic", type=int, metavar="NODES", help="planted-partition graph")
    parser.add_argument("--groups", type=int, default=0, help="planted groups (default NODES/100)")
    parser.add_argument("--mixing", type=float, default=0.25, help="share of edges leaving a group")
    parser.add_argument("--mean-degree", type=float, default=10.0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def _graph(spark, args: argparse.Namespace):
    if args.index:
        concepts = spark.read.format("delta").load(table_uri(args.index, CONCEPTS)).filter("kept")
        edges = spark.read.format("delta").load(table_uri(args.index, EDGES)).filter("kept")
        return concepts.select("concept_id", "name", "frequency"), edges
    groups = args.groups or max(2, args.synthetic // 100)
    graph = planted_partition(args.synthetic, groups, args.mean_degree, args.mixing, args.seed)
    return spark.createDataFrame(graph.concepts), spark.createDataFrame(graph.edges)


def main(argv: list[str], settings: Settings) -> int:
    args = _arguments(argv)
    spark_cfg = {"master": args.master, "shuffle_partitions": args.shuffle_partitions}
    settings = settings.model_copy(update={"spark": settings.spark.model_copy(update=spark_cfg)})
    spark = get_spark(settings)
    concepts, edges = _graph(spark, args)
    concepts, edges = checkpoint(concepts), checkpoint(edges)
    started = time.perf_counter()
    tables = detect_communities(spark, settings, concepts, edges)
    sizes = tables.communities.groupBy("level").agg(F.max("size").alias("max"), F.count("*").alias("n"))
    sizes = {row["level"]: (row["n"], row["max"]) for row in sizes.collect()}
    detect_seconds = time.perf_counter() - started

    weights = checkpoint(community_edge_weights(edges, settings.communities))
    leaf = max(sizes)
    started = time.perf_counter()
    ours = {
        level: modularity(spark, weights, tables.concept_communities.filter(F.col("level") == level))
        for level in sorted({0, leaf})
    }
    modularity_seconds = time.perf_counter() - started
    started = time.perf_counter()
    leiden = leiden_modularity(weights.toPandas())
    leiden_seconds = time.perf_counter() - started
    report = {
        "source": args.index or f"synthetic:{args.synthetic}",
        "master": args.master,
        "nodes": concepts.count(),
        "edges": weights.count(),
        "levels": len(sizes),
        "communities_per_level": [sizes[level][0] for level in sorted(sizes)],
        "max_size_per_level": [sizes[level][1] for level in sorted(sizes)],
        "max_community_size_setting": settings.communities.max_community_size,
        "seconds": {
            "detect_communities": round(detect_seconds, 2),
            "per_level": tables.stats["seconds_per_level"],
            "spark_modularity": round(modularity_seconds, 2),
            "leiden_single_machine": round(leiden_seconds, 2),
        },
        "iterations_per_level": tables.stats["iterations_per_level"],
        "modularity": {
            "level0": round(ours[0], 4),
            "leaf": round(ours[leaf], 4),
            "leiden": round(leiden, 4),
            "ratio_level0": round(ours[0] / leiden, 4) if leiden else None,
            "ratio_leaf": round(ours[leaf] / leiden, 4) if leiden else None,
        },
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    spark.stop()
