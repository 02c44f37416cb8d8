"""The index job's step that builds the approximate index: ``refresh_vector_index``.

Built so that a cluster can: the driver trains the lists and quantiser on a uniform sample of the
embeddings (``vectors.train_sample`` rows, the only vectors it collects); the trained index (a few MB)
is broadcast, and every partition of chunk_embeddings encodes its own vectors in a ``mapInPandas``
task; Spark writes the codes as Parquet beside the tables. Encoding is a matrix product per batch,
thousands of times cheaper than the embedding model that made the vectors, so after an append the
whole index is re-encoded rather than patched: one code path, and deleted or replaced chunks vanish
with no tombstones. The lists are retrained on every build, since an append can move the topics.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from lazygraph import tables
from lazygraph.embed.codec import decode_embeddings
from lazygraph.settings import VectorIndexSettings
from lazygraph.tables.store import table_facts
from lazygraph.vectors import store
from lazygraph.vectors.ann import VectorIndex

if TYPE_CHECKING:
    from lazygraph.run_context import RunContext

# Builds kept besides the newest: a query process that pinned the previous run keeps its index.
KEEP_PREVIOUS = 1


def decode_batch(batch: pd.DataFrame) -> np.ndarray:
    """The float32 vectors of chunk_embeddings rows (embedding bytes, dtype, dim)."""
    table = pa.Table.from_pandas(batch[["embedding", "dtype", "dim"]], preserve_index=False)
    return decode_embeddings(table)


def encode_batches(
    batches: Iterator[pd.DataFrame], trained: bytes, cfg: VectorIndexSettings
) -> Iterator[pd.DataFrame]:
    """mapInPandas body: chunk_embeddings rows -> (chunk_id, code) rows, with the trained index."""
    index = VectorIndex.from_bytes(np.frombuffer(trained, np.uint8), cfg)
    for batch in batches:
        if batch.empty:
            continue
        codes = index.encode(decode_batch(batch))
        yield pd.DataFrame({"chunk_id": batch["chunk_id"].tolist(), "code": [bytes(c) for c in codes]})


def refresh_vector_index(ctx: RunContext) -> dict[str, int]:
    """Build the approximate index for the current chunk_embeddings version when the index holds at
    least ``vectors.ann_min_chunks`` chunks (nothing to do when that build exists); drop older builds.

    Call it after any change to chunk_embeddings (create, append, deletion), before the manifest row:
    the build is tied to the embeddings version, so a query of the new run finds it. Returns counts
    for the run log: ``vectors`` (embeddings), ``encoded`` (0 when nothing was built).
    """
    cfg = ctx.settings.vectors
    facts = table_facts(ctx.store.uri(tables.CHUNK_EMBEDDINGS), ctx.settings)
    if facts is None:
        return {"vectors": 0, "encoded": 0}
    version, n = facts
    if n < cfg.ann_min_chunks or n == 0:
        return {"vectors": n, "encoded": 0}
    build = store.build_uri(ctx.index_uri, version)
    encoded = 0
    if store.read_meta(build, ctx.settings) is None:
        encoded = _build(ctx, build, version, n, cfg)
    _drop_old_builds(ctx, build)
    return {"vectors": n, "encoded": encoded}


def _build(ctx: RunContext, build: str, version: int, n: int, cfg: VectorIndexSettings) -> int:
    from lazygraph.runtime.storage import spark_uri

    frame = (
        ctx.spark.read.format("delta")
        .option("versionAsOf", version)
        .load(ctx.store.spark_uri(tables.CHUNK_EMBEDDINGS))
        .select("chunk_id", "embedding", "dtype", "dim")
    )
    fraction = min(1.0, 1.2 * cfg.train_sample / n)
    sample = frame.sample(fraction=fraction, seed=cfg.seed).limit(cfg.train_sample).toPandas()
    if sample.empty:  # a tiny index can draw no row: train on all of it
        sample = frame.limit(cfg.train_sample).toPandas()
    trained = VectorIndex.train(decode_batch(sample), n, cfg)
    blob = trained.to_bytes().tobytes()
    shared = ctx.spark.sparkContext.broadcast(blob)
    codes = frame.mapInPandas(
        lambda batches: encode_batches(batches, shared.value, cfg), schema="chunk_id string, code binary"
    )
    codes.write.mode("overwrite").parquet(spark_uri(f"{build}/{store.CODES}"))
    shared.unpersist()
    store.write_file(f"{build}/{store.TRAINED}", blob, ctx.settings)
    meta: dict[str, Any] = {
        "embeddings_version": version,
        "vectors": n,
        "dim": trained.dim,
        "nlist": trained.nlist,
        "codes": cfg.codes,
        "code_bytes": trained.code_size,
        "train_sample": len(sample),
        "built_at": datetime.now(UTC).isoformat(),
        "run_id": ctx.run_id,
    }
    store.write_file(f"{build}/{store.META}", json.dumps(meta, indent=2).encode(), ctx.settings)
    return n


def _drop_old_builds(ctx: RunContext, current: str) -> None:
    builds = [b for b in store.list_builds(ctx.index_uri, ctx.settings) if b != current]
    for old in builds[: max(0, len(builds) - KEEP_PREVIOUS)]:
        store.delete_build(old, ctx.settings)
