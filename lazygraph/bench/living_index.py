"""A living index: full build against 1 % appends and a 1 % delete, measured in one run (one Spark session).

The corpus is split once (seeded): ``--appends`` batches of ``--batch-share`` of the documents are held
back from the first build and appended one batch at a time; then one batch of documents of the first
build is deleted. Printed as one JSON object:

* seconds of the full build, of every append and of the delete, and their ratios to the full build;
* the count tables after the appends and after the delete against a recount from the index's own
  mentions (what a fresh build of the same documents counts), as equal / not equal;
* level-0 modularity after the appends against a full community detection on the same final graph
  (the graph after the appends is the graph a fresh build of the final corpus makes), and the drift
  and update kind (local / full) each run recorded.

    lazygraph bench living-index --input ../shared/datasets/wiki2mh_corpus/corpus.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from lazygraph.errors import InputError
from lazygraph.settings import Settings


def read_corpus(path: Path) -> list[dict]:
    if not path.is_file():
        raise InputError(f"no corpus at {path}; pass --input a JSONL file of documents (id, title, text)")
    with path.open() as lines:
        return [json.loads(line) for line in lines if line.strip()]


def write_jsonl(docs: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def split(docs: list[dict], share: float, batches: int, seed: int) -> tuple[list[dict], list[list[dict]]]:
    """(first build, held-back batches of ``share`` of the corpus each)."""
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    size = max(1, round(share * len(docs)))
    held = [[docs[i] for i in order[b * size : (b + 1) * size]] for b in range(batches)]
    held_ids = {d["doc_id"] for batch in held for d in batch}
    return [d for d in docs if d["doc_id"] not in held_ids], held


def write_delete_ids(first: list[dict], count: int, seed: int, path: Path) -> Path:
    """The ids of ``count`` documents of the first build, drawn with ``seed`` + 1, one a line: the
    documents the benchmarks delete."""
    doomed = random.Random(seed + 1).sample([d["doc_id"] for d in first], count)
    path.write_text("".join(f"{doc_id}\n" for doc_id in doomed))
    return path


def timed(run: Any) -> tuple[float, dict]:
    started = time.perf_counter()
    report = run()
    return round(time.perf_counter() - started, 2), report


def counts_match_recount(spark: Any, settings: Any, index: Path) -> bool:
    """The count tables against concept and pair counts recounted from the index's own mentions."""
    from lazygraph import tables
    from lazygraph.graph.cooccurrence import concept_statistics, pair_counts

    def load(name: str) -> Any:
        return spark.read.format("delta").load(str(index / name))

    mentions, chunks = load(tables.MENTIONS), load(tables.CHUNKS)
    names = load(tables.CONCEPT_COUNTS).select("concept_id", "name", "kind")
    columns = ["concept_id", "frequency", "chunk_frequency", "doc_frequency"]
    recount = concept_statistics(mentions, chunks, names).select(*columns)
    stored = load(tables.CONCEPT_COUNTS).select(*columns)
    pairs = pair_counts(mentions, settings.concepts)
    stored_pairs = load(tables.PAIR_COUNTS)
    return all(
        a.exceptAll(b).isEmpty() and b.exceptAll(a).isEmpty()
        for a, b in ((recount, stored), (pairs, stored_pairs))
    )


def modularity_against_full(spark: Any, settings: Any, index: Path) -> dict[str, float]:
    """Level-0 modularity of the index's communities and of a full detection on the same graph."""
    from pyspark.sql import functions as F

    from lazygraph import tables
    from lazygraph.communities import community_edge_weights, detect_communities, modularity

    def load(name: str) -> Any:
        return spark.read.format("delta").load(str(index / name))

    concepts = load(tables.CONCEPTS).filter("kept").select("concept_id", "name", "frequency")
    kept = load(tables.EDGES).filter("kept").select("src", "dst", "weight", "cooccurrence")
    weights = community_edge_weights(kept, settings.communities).cache()
    ours = load(tables.CONCEPT_COMMUNITIES).filter(F.col("level") == 0)
    started = time.perf_counter()
    full = detect_communities(spark, settings, concepts, kept).concept_communities
    full_seconds = time.perf_counter() - started
    q_ours = modularity(spark, weights, ours)
    q_full = modularity(spark, weights, full.filter(F.col("level") == 0))
    return {
        "after_appends": round(q_ours, 4),
        "full_detection": round(q_full, 4),
        "ratio": round(q_ours / q_full, 4) if q_full else 0.0,
        "full_detection_seconds": round(full_seconds, 1),
    }


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(prog="lazygraph bench living-index", description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--batch-share", type=float, default=0.01)
    parser.add_argument("--appends", type=int, default=10)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="also write the figures here, as they come")
    args = parser.parse_args(argv)

    from lazygraph.pipeline import build_index, delete_documents
    from lazygraph.runtime.spark import get_spark

    console = Console(stderr=True)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="living-"))
    work.mkdir(parents=True, exist_ok=True)
    index = work / "index"
    shutil.rmtree(index, ignore_errors=True)
    first, held = split(read_corpus(args.input), args.batch_share, args.appends, args.seed)
    spark = get_spark(settings)

    out: dict[str, Any] = {"documents_first_build": len(first), "batch_documents": len(held[0])}
    full_s, full = timed(
        lambda: build_index(
            settings, str(write_jsonl(first, work / "first.jsonl")), str(index), False, console
        )
    )
    out["full_build_s"] = full_s
    out["full_build_stages"] = full["timings"]
    save(out, args.out)
    appends = []
    for number, batch in enumerate(held, start=1):
        path = write_jsonl(batch, work / f"append-{number}.jsonl")
        seconds, report = timed(lambda path=path: build_index(settings, str(path), str(index), True, console))
        appends.append(
            {
                "seconds": seconds,
                "ratio": round(seconds / full_s, 4),
                "communities": report["communities"],
                "stages": report["timings"],
            }
        )
        print(f"append {number}: {seconds} s ({seconds / full_s:.1%} of the full build)", file=sys.stderr)
        out["appends"] = appends
        save(out, args.out)
    out["appends"] = appends
    out["counts_equal_recount_after_appends"] = counts_match_recount(spark, settings, index)
    out["modularity_level0"] = modularity_against_full(spark, settings, index)
    save(out, args.out)

    ids = write_delete_ids(first, len(held[0]), args.seed, work / "delete.txt")
    delete_s, deleted = timed(lambda: delete_documents(settings, str(ids), str(index), console))
    out["delete"] = {
        "seconds": delete_s,
        "ratio": round(delete_s / full_s, 4),
        "documents": deleted["new"],
        "communities": deleted["communities"],
        "stages": deleted["timings"],
    }
    out["counts_equal_recount_after_delete"] = counts_match_recount(spark, settings, index)
    save(out, args.out)
    print(json.dumps(out, indent=2))
    return 0


def save(figures: dict[str, Any], path: Path | None) -> None:
    if path is not None:
        path.write_text(json.dumps(figures, indent=2))
