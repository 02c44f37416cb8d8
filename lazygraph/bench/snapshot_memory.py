"""Memory of 1 and of 4 query actors holding the index snapshot: shared through Ray's object store, or
one private copy per actor (as when every actor loads the index itself).

    lazygraph bench snapshot-memory --index /tmp/hp/index
    lazygraph bench snapshot-memory --synthetic-chunks 1000000 --modes shared
    lazygraph bench snapshot-memory --synthetic-chunks 200000 --ann

With ``--ann`` the embeddings are replaced by the approximate index the index job builds above
``vectors.ann_min_chunks``: shared, every actor maps one node-local file of it (counted once, with the
object store); copied, every actor deserialises its own.

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
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from lazygraph.settings import Settings


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
        if snap.vector_index is not None:  # probe every list once: every code is read
            index = snap.vector_index
            index.set_nprobe(index.nlist)
            total += float(index.search(np.ones(index.dim, np.float32) / np.sqrt(index.dim), 10)[1].sum())
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


def private_vectors(snapshot: Any) -> Any:
    """The snapshot with its approximate index set to deserialise a private copy per process."""
    if snapshot.vector_index is None:
        return snapshot
    from lazygraph.vectors.ann import VectorIndex

    index = snapshot.vector_index
    copied = pickle.loads(pickle.dumps(snapshot, protocol=5))
    copied.vector_index = VectorIndex(index.index, index.cfg.model_copy(update={"sharing": "private"}))
    return copied


def shared_dir(snapshot: Any) -> Path:
    return Path(snapshot.vector_index.cfg.share_dir)


def with_vector_index(snapshot: Any, share_dir: Path) -> Any:
    """The snapshot with its embeddings replaced by an approximate index of them (IVF-SQ8, as the index
    job builds above ``vectors.ann_min_chunks``), shared through files under ``share_dir``."""
    from lazygraph.settings import VectorIndexSettings
    from lazygraph.vectors.ann import VectorIndex

    cfg = VectorIndexSettings(share_dir=share_dir)
    embeddings = np.asarray(snapshot.embeddings)
    rng = np.random.default_rng(0)
    sample = embeddings[rng.choice(len(embeddings), min(len(embeddings), cfg.train_sample), replace=False)]
    index = VectorIndex.train(sample, len(embeddings), cfg)
    for start in range(0, len(embeddings), 200_000):
        block = embeddings[start : start + 200_000]
        index.add(block, np.arange(start, start + len(block)))
    snapshot.vector_index = index
    snapshot.embeddings = np.zeros((0, embeddings.shape[1]), np.float32)
    return snapshot


def measure(snapshot: Any, actors: int, mode: str) -> dict[str, Any]:
    import ray

    ray.init(num_cpus=actors + 1, include_dashboard=False, log_to_driver=False)
    try:
        holder = ray.remote(num_cpus=1)(SnapshotHolder)
        if mode == "shared":
            payload = ray.put(snapshot)
            store = snapshot_bytes(snapshot)
        else:
            payload = ray.put(pickle.dumps(private_vectors(snapshot), protocol=5))
            store = 0  # the pickled bytes are freed once every actor has rebuilt its copy
        handles = [holder.remote(payload, mode == "copied") for _ in range(actors)]
        reports = ray.get([h.touch.remote() for h in handles])
        for handle in handles:
            ray.kill(handle)
        empty = [holder.remote(None, False) for _ in range(actors)]
        baseline = sum(r["uss"] for r in ray.get([h.touch.remote() for h in empty]))
        uss = sum(r["uss"] for r in reports)
        if mode == "shared" and snapshot.vector_index is not None:
            # the file the actors map: in the page cache once per node, in no actor's USS
            store += sum(f.stat().st_size for f in shared_dir(snapshot).glob("lazygraph-vectors-*"))
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


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(
        prog="lazygraph bench snapshot-memory", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--index", default=None, help="an index to load")
    parser.add_argument("--synthetic-chunks", type=int, default=0, help="instead: a random index of N chunks")
    parser.add_argument("--text-bytes", type=int, default=600, help="text length of a synthetic chunk")
    parser.add_argument("--modes", default="shared,copied", help="shared and/or copied")
    parser.add_argument("--actors", default="1,4")
    parser.add_argument(
        "--ann", action="store_true", help="replace the embeddings by the approximate index (IVF-SQ8)"
    )
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
    if args.ann:
        import tempfile

        with console.status("building the approximate index of the embeddings"):
            snapshot = with_vector_index(snapshot, Path(tempfile.mkdtemp(prefix="bench-snapshot-ann-")))
        name += ", approximate index"
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
    if args.ann:
        import shutil

        shutil.rmtree(shared_dir(snapshot), ignore_errors=True)
    return 0
