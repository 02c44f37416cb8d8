"""Memory of 1 and of 4 query actors holding the index snapshot: shared through Ray's object store, or
one private copy per actor (as when every actor loads the index itself).

    python benchmarks/bench_snapshot_memory.py --index /tmp/hp/index
    python benchmarks/bench_snapshot_memory.py --synthetic-chunks 1000000 --modes shared

Each actor receives the snapshot, touches every array (sums the embeddings, reads every CSR array,
decodes a sample of texts) and reports its process's unique memory (USS: pages no other process
shares). A mode's total is the sum of its actors' USS plus, for the shared mode, the snapshot's
bytes in the object store, counted once per node; the snapshot's share is that total less what the
same number of actors cost without a snapshot (a Python process with numpy, scipy and Ray loaded).
The goal is 4 actors ≤ 1.3 × the memory of 1, for the snapshot's share.
"""

from __future__ import annotations

import argparse
import gc
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))


class SnapshotHolder:
    """A query actor's memory without its models: the snapshot, read end to end."""

    def __init__(self, snapshot: Any, copied: bool) -> None:
        # The copy mode gets pickled bytes and rebuilds the snapshot: a private copy of every array.
        self.snapshot = pickle.loads(snapshot) if copied and snapshot is not None else snapshot
        gc.collect()

    def touch(self) -> dict[str, Any]:
        import psutil

        snap = self.snapshot
        if snap is None:  # the process alone: what every actor costs before any snapshot
            info = psutil.Process(os.getpid()).memory_full_info()
            return {"uss": info.uss, "rss": info.rss, "checksum": 0.0}
        total = float(np.asarray(snap.embeddings, dtype=np.float64).sum())
        for csr in (snap.community_chunks, snap.chunk_concepts, snap.concept_chunks, snap.term_chunks):
            total += float(csr.indptr.sum()) + float(csr.indices.sum())
        step = max(1, snap.n_chunks // 1000)
        decoded = sum(len(snap.chunk_texts[i] or "") for i in range(0, snap.n_chunks, step))
        info = psutil.Process(os.getpid()).memory_full_info()
        return {"uss": info.uss, "rss": info.rss, "checksum": total + decoded}


def snapshot_bytes(snapshot: Any) -> int:
    """The bytes of the snapshot's arrays (what the object store holds)."""
    buffers: list[pickle.PickleBuffer] = []
    inline = pickle.dumps(snapshot, protocol=5, buffer_callback=buffers.append)
    return len(inline) + sum(memoryview(b).nbytes for b in buffers)


def measure(snapshot: Any, actors: int, mode: str) -> dict[str, Any]:
    import ray

    ray.init(num_cpus=actors + 1, include_dashboard=False, log_to_driver=False)
    try:
        holder = ray.remote(num_cpus=1)(SnapshotHolder)
        if mode == "shared":
            payload = ray.put(snapshot)
            store = snapshot_bytes(snapshot)
        else:
            payload = ray.put(pickle.dumps(snapshot, protocol=5))
            store = 0  # the pickled bytes are freed once every actor has rebuilt its copy
        handles = [holder.remote(payload, mode == "copied") for _ in range(actors)]
        reports = ray.get([h.touch.remote() for h in handles])
        for handle in handles:
            ray.kill(handle)
        empty = [holder.remote(None, False) for _ in range(actors)]
        baseline = sum(r["uss"] for r in ray.get([h.touch.remote() for h in empty]))
        uss = sum(r["uss"] for r in reports)
        return {
            "mode": mode,
            "actors": actors,
            "actors_uss": uss,
            "store": store,
            "total": uss + store,
            # what the snapshot adds: the total less what the same actors cost without one
            "snapshot_total": uss - baseline + store,
        }
    finally:
        ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default=None, help="an index to load")
    parser.add_argument("--synthetic-chunks", type=int, default=0, help="instead: a random index of N chunks")
    parser.add_argument("--text-bytes", type=int, default=600, help="text length of a synthetic chunk")
    parser.add_argument("--modes", default="shared,copied", help="shared and/or copied")
    parser.add_argument("--actors", default="1,4")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    if args.synthetic_chunks:
        from bench_query import synthetic_arrow

        from lazygraph.query.snapshot import build_snapshot

        with console.status(f"building a random snapshot of {args.synthetic_chunks:,} chunks"):
            arrow = synthetic_arrow(args.synthetic_chunks, text_bytes=args.text_bytes)
            snapshot = build_snapshot("memory://synthetic", (), arrow)
            del arrow
        name = f"synthetic, {args.synthetic_chunks:,} chunks"
    elif args.index:
        from lazygraph.query.snapshot import load_snapshot

        snapshot = load_snapshot(args.index)
        name = f"{args.index}, {snapshot.n_chunks:,} chunks"
    else:
        parser.error("pass --index or --synthetic-chunks")
    gc.collect()
    counts = [int(a) for a in args.actors.split(",")]
    rows = []
    for mode in args.modes.split(","):
        for actors in counts:
            console.print(f"{mode}: {actors} actor(s)")
            rows.append(measure(snapshot, actors, mode))
    table = Table(
        title=f"query actors' memory, {name} (snapshot arrays: {snapshot_bytes(snapshot) / 2**20:,.0f} MiB)"
    )
    columns = ("mode", "actors", "actors' USS (MiB)", "object store (MiB)", "total (MiB)", "vs 1 actor")
    for column in (*columns, "snapshot's share (MiB)", "vs 1 actor"):
        table.add_column(column, justify="right")
    for row in rows:
        one = next(r for r in rows if r["mode"] == row["mode"] and r["actors"] == counts[0])
        table.add_row(
            row["mode"],
            str(row["actors"]),
            f"{row['actors_uss'] / 2**20:,.0f}",
            f"{row['store'] / 2**20:,.0f}",
            f"{row['total'] / 2**20:,.0f}",
            f"{row['total'] / one['total']:.2f}x",
            f"{row['snapshot_total'] / 2**20:,.0f}",
            f"{row['snapshot_total'] / one['snapshot_total']:.2f}x",
        )
    Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
