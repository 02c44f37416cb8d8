"""The graph and community stages at scale, on synthetic mentions of N chunks.

    lazygraph bench graph-scale --chunks 1000000 --work DIR [--seed 0] [--leiden-max-nodes 300000] [--resume]

The mentions are drawn as ``lazygraph bench synthetic-index`` draws them (Zipf concept frequencies
within a chunk's topic and over the whole vocabulary, about 20 distinct concepts a chunk, documents of
1 to 4 chunks; how each was chosen is in that module's doc) and written as Parquet; generating them
is not timed. Then the index job's own functions run on Spark, each stage writing its Delta tables
as an index run does:

- ``counts``: concept statistics and pair counts from the mentions (``graph.cooccurrence``);
- ``graph``: pruning and NPMI weights (``graph_from_counts``), the concepts and edges tables;
- ``communities``: the hierarchy (``detect_communities``) and the chunk links.

Prints one JSON object: rows, seconds per stage, peak memory of the Python driver, of the Spark JVM
(on ``local[*]`` it is the driver *and* the executors) and of the Python workers together, the
largest refining task (concepts, and the share of the kept edges inside it), and level-0 modularity
against single-machine Leiden (igraph) when the kept graph has at most ``--leiden-max-nodes`` nodes.

A 1M-chunk run takes hours. Each stage that ends leaves a record in ``DIR/stages``; ``--resume`` keeps
DIR's mentions and the tables of every recorded stage (their seconds are reported as recorded) and
runs the stages after them, so a run stopped part way goes on where it stopped.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lazygraph.bench.index import PeakMemory
from lazygraph.bench.synthetic_index import (
    BATCH_CHUNKS,
    SYNTHETIC_MARK,
    Generator,
    chunk_ids,
    concept_ids,
    concept_name,
    draw_mentions,
)
from lazygraph.errors import ConfigError
from lazygraph.settings import Settings


def write_mentions(work: Path, chunks: int, seed: int) -> dict[str, int]:
    """The mentions, chunk documents and concept names of ``chunks`` synthetic chunks, as Parquet."""
    generator = Generator.create(work, chunks, seed)
    rows = {"mentions": 0}
    for folder in ("mentions", "chunk_docs"):
        (work / folder).mkdir(parents=True)
    for batch, start in enumerate(range(0, chunks, BATCH_CHUNKS)):
        end = min(chunks, start + BATCH_CHUNKS)
        rng = np.random.default_rng([seed, 1, batch])
        doc_of_chunk, doc_leaves, _ = generator.documents_of(rng, end - start)
        ids = chunk_ids(np.arange(start, end), seed)
        doc_ids = pc.binary_join_element_wise(
            "d",
            pa.array([str(batch)] * len(doc_leaves)),
            pa.array(np.arange(len(doc_leaves))).cast(pa.string()),
            "-",
        )
        m_chunk, m_concept, m_count = draw_mentions(
            rng, generator.shape, doc_leaves[doc_of_chunk], generator.mention_draws
        )
        generator.totals.chunk_frequency += np.bincount(m_concept, minlength=generator.shape.concepts).astype(
            np.int32
        )
        mentions = {
            "chunk_id": ids.take(pa.array(m_chunk)),
            "concept_id": concept_ids(m_concept),
            "count": m_count.astype(np.int32),
        }
        pq.write_table(pa.table(mentions), work / "mentions" / f"part-{batch:05d}.parquet")
        docs = {"chunk_id": ids, "doc_id": doc_ids.take(pa.array(doc_of_chunk))}
        pq.write_table(pa.table(docs), work / "chunk_docs" / f"part-{batch:05d}.parquet")
        rows["mentions"] += len(m_chunk)
    seen = np.flatnonzero(generator.totals.chunk_frequency > 0)
    names = {
        "concept_id": concept_ids(seen),
        "name": pa.array([concept_name(int(number)) for number in seen]),
        "kind": pa.array(["phrase"] * len(seen)),
    }
    pq.write_table(pa.table(names), work / "names.parquet")
    return rows | {"chunks": chunks, "concepts": int(len(seen))}


STAGES = ("counts", "graph", "communities")


@contextmanager
def _timed(seconds: dict[str, float], stage: str, memory: PeakMemory | None = None, work: Path | None = None):
    """Times one stage and says on stderr when it ends, with the memory peaks so far: a 1M-chunk run
    takes hours, and a run stopped part way still tells how far each stage got and what it cost. With
    ``work``, the same line is kept in ``work/stages/STAGE.json``, the record ``--resume`` goes by."""
    started = time.perf_counter()
    yield
    seconds[stage] = round(time.perf_counter() - started, 1)
    line = {"stage": stage, "seconds": seconds[stage]} | ({"memory": memory.gb()} if memory else {})
    print(json.dumps(line), file=sys.stderr, flush=True)
    if work is not None:
        (work / "stages").mkdir(exist_ok=True)
        (work / "stages" / f"{stage}.json").write_text(json.dumps(line) + "\n")


def finished_stages(work: Path) -> dict[str, dict[str, Any]]:
    """The stages an earlier run in ``work`` finished, in order and without a gap, with their records."""
    done: dict[str, dict[str, Any]] = {}
    for stage in STAGES:
        record = work / "stages" / f"{stage}.json"
        if not record.exists():
            break
        done[stage] = json.loads(record.read_text())
    return done


def run_stages(
    spark: Any,
    settings: Settings,
    work: Path,
    n_chunks: int,
    memory: PeakMemory | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Counts, graph and communities on Spark, each stage written to Delta in ``work/tables``; each
    stage's end is said on stderr (with ``memory``'s peaks so far, when given) and recorded in
    ``work/stages``. With ``resume`` the stages recorded there are not run again: their tables are read
    and their recorded seconds reported."""
    from pyspark.sql import functions as F

    from lazygraph.communities import chunk_communities, detect_communities
    from lazygraph.graph.cooccurrence import concept_statistics, graph_from_counts, pair_counts

    def write(df: Any, name: str) -> Any:
        path = str(work / "tables" / name)
        df.write.format("delta").mode("overwrite").save(path)
        return read(name)

    def read(name: str) -> Any:
        return spark.read.format("delta").load(str(work / "tables" / name))

    mentions = spark.read.parquet(str(work / "mentions"))
    chunk_docs = spark.read.parquet(str(work / "chunk_docs"))
    names = spark.read.parquet(str(work / "names.parquet"))
    done = finished_stages(work) if resume else {}
    seconds: dict[str, float] = {stage: record["seconds"] for stage, record in done.items()}
    if "counts" in done:
        stats, pairs = read("concept_counts"), read("pair_counts")
    else:
        with _timed(seconds, "counts", memory, work):
            stats = write(concept_statistics(mentions, chunk_docs, names), "concept_counts")
            pairs = write(pair_counts(mentions, settings.concepts), "pair_counts")
    if "graph" in done:
        concepts, edges = read("concepts"), read("edges")
    else:
        with _timed(seconds, "graph", memory, work):
            graph = graph_from_counts(stats, pairs, n_chunks, settings.graph)
            concepts = write(graph.concepts, "concepts")
            edges = write(graph.edges, "edges")
    # Always run: its result (the hierarchy's statistics) feeds the report.
    with _timed(seconds, "communities", memory, work):
        result = detect_communities(
            spark,
            settings,
            concepts.filter("kept").select("concept_id", "name", "frequency"),
            edges.filter("kept").select("src", "dst", "weight", "cooccurrence"),
            mentions_df=mentions.select("chunk_id", "concept_id"),
        )
        write(result.communities, "communities")
        membership = write(result.concept_communities, "concept_communities")
        write(chunk_communities(mentions, membership), "chunk_communities")
    kept_edges = edges.filter("kept")
    return {
        "seconds": seconds,
        "kept_concepts": concepts.filter("kept").count(),
        "kept_edges": kept_edges.count(),
        "pairs": pairs.count(),
        "community_stats": result.stats,
        "level0": membership.filter(F.col("level") == 0),
        "task_units": result.task_units,
        "kept_edge_frame": kept_edges,
    }


def largest_task(settings: Settings, units: Any, kept_edges: Any) -> dict[str, Any]:
    """The largest of the refining task units the stage used (``CommunityTables.task_units``: level-0
    communities, giant ones cut by ``task_units``): its concepts and its share of the kept edges."""
    from pyspark.sql import functions as F

    from lazygraph.communities import community_edge_weights

    if units is None:
        return {"largest_task_concepts": None, "largest_task_edges": None, "largest_task_edge_share": None}
    weights = community_edge_weights(kept_edges, settings.communities)
    sizes = units.groupBy("label").count()
    largest = int(sizes.agg(F.max("count")).first()[0] or 0)
    src_unit = units.select(F.col("node").alias("s"), "label")
    dst_unit = units.select(F.col("node").alias("d"), F.col("label").alias("d_label"))
    inside = (
        weights.select(F.xxhash64("src").alias("s"), F.xxhash64("dst").alias("d"))
        .join(src_unit, "s")
        .join(dst_unit, "d")
        .filter(F.col("label") == F.col("d_label"))
        .groupBy("label")
        .count()
        .agg(F.max("count"))
        .first()[0]
    )
    total = weights.count()
    return {
        "largest_task_concepts": largest,
        "largest_task_edges": int(inside or 0),
        "largest_task_edge_share": round((inside or 0) / total, 4) if total else 0.0,
    }


def level0_quality(
    spark: Any, settings: Settings, level0: Any, kept_edges: Any, max_nodes: int
) -> dict[str, Any]:
    """Level-0 modularity on Spark, against single-machine Leiden where the graph has at most
    ``max_nodes`` nodes."""
    from lazygraph.communities import community_edge_weights, leiden_modularity, modularity

    weights = community_edge_weights(kept_edges, settings.communities)
    ours = modularity(spark, weights, level0)
    report: dict[str, Any] = {"level0_modularity": round(ours, 4)}
    if level0.count() <= max_nodes:
        leiden = leiden_modularity(weights.toPandas())
        report |= {
            "leiden_modularity": round(leiden, 4),
            "ratio": round(ours / leiden, 4) if leiden else None,
        }
    return report


def _generate(args: argparse.Namespace) -> dict[str, Any]:
    """A fresh --work holding the mentions of --chunks chunks; what was written, with its seconds."""
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    (args.work / SYNTHETIC_MARK).write_text("written by lazygraph bench graph-scale\n")
    started = time.perf_counter()
    generated = write_mentions(args.work, args.chunks, args.seed) | {"seed": args.seed}
    generated["seconds"] = round(time.perf_counter() - started, 1)
    (args.work / "generated.json").write_text(json.dumps(generated) + "\n")
    return generated


def _generated(args: argparse.Namespace) -> dict[str, Any]:
    """What an earlier run wrote in --work, which --resume goes on with: the same chunks and seed."""
    record = args.work / "generated.json"
    if not record.exists():
        raise ConfigError(
            f"{args.work} holds no finished graph-scale mentions to resume; run without --resume"
        )
    generated = json.loads(record.read_text())
    if (generated["chunks"], generated.get("seed")) != (args.chunks, args.seed):
        raise ConfigError(
            f"{args.work} holds {generated['chunks']:,} chunks of seed {generated.get('seed')}; "
            "resume it with those --chunks and --seed, or give a new --work without --resume"
        )
    return generated


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(prog="lazygraph bench graph-scale", description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, required=True)
    parser.add_argument("--work", type=Path, required=True, help="A new or earlier graph-scale directory.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--leiden-max-nodes", type=int, default=300_000)
    parser.add_argument(
        "--resume",
        action="store_true",
        help="Keep --work's mentions and finished stages (same --chunks and --seed) and run the rest.",
    )
    args = parser.parse_args(argv)
    if args.chunks < 1:
        raise ConfigError("--chunks takes a positive number of chunks, e.g. --chunks 100000")
    if args.work.exists() and any(args.work.iterdir()) and not (args.work / SYNTHETIC_MARK).exists():
        raise ConfigError(
            f"{args.work} is not empty and was not written by this benchmark; give a new directory"
        )
    report: dict[str, Any] = {"generated": _generated(args) if args.resume else _generate(args)}

    from lazygraph.runtime.spark import get_spark

    with PeakMemory() as memory:
        spark = get_spark(settings)
        stages = run_stages(spark, settings, args.work, args.chunks, memory, resume=args.resume)
    report |= {
        "master": settings.spark.master,
        "seconds": stages["seconds"],
        "memory": memory.gb(),
        "pairs": stages["pairs"],
        "kept_concepts": stages["kept_concepts"],
        "kept_edges": stages["kept_edges"],
        "communities_per_level": stages["community_stats"].get("communities_per_level"),
        "level0_finished_by_louvain": stages["community_stats"].get("level0_finished_by_louvain"),
    }
    report |= largest_task(settings, stages["task_units"], stages["kept_edge_frame"])
    report |= level0_quality(
        spark, settings, stages["level0"], stages["kept_edge_frame"], args.leiden_max_nodes
    )
    print(json.dumps(report))
    spark.stop()
    return 0
