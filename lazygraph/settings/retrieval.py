"""The two retrieval signals an index carries besides its graph: BM25 over the chunk terms, and the
approximate nearest-neighbour index of the chunk embeddings."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


class LexicalSettings(BaseModel):
    """The lexical signal of ``--method hybrid``: Okapi BM25 over the chunk_terms table, fused with the
    vector ranking by reciprocal rank (see lazygraph.query.snapshot.lexical and lazygraph.query.ranking)."""

    # 1.2 is the low end of the 1.2-2.0 range Robertson & Zaragoza (2009) report as robust, and Lucene's
    # default; chunks are short, so a term's second occurrence should already count for much less.
    k1: float = Field(1.2, ge=0, description="BM25 term-frequency saturation.")
    # 0.75 is the standard default; chunks are token windows of nearly equal length, so it mostly
    # tempers short last windows and documents.
    b: float = Field(0.75, ge=0, le=1, description="BM25 length normalisation (0: none, 1: full).")
    # 60 is the value Cormack, Clarke & Buettcher (2009) found near-optimal across collections: large
    # enough that the first few ranks of one ranking cannot outvote agreement lower down both.
    rrf_k: int = Field(
        60,
        ge=1,
        description="Reciprocal rank fusion constant: a chunk scores 1 / (rrf_k + rank) per ranking.",
    )


class VectorIndexSettings(BaseModel):
    """The approximate nearest-neighbour index of the chunk embeddings (lazygraph.vectors).

    Exact search (a float32 matrix product over every chunk) is kept below ``ann_min_chunks``; from
    there the index job builds an IVF index with scalar-quantised codes (faiss) and querying ranks
    the ``candidates`` nearest chunks it returns, every other chunk scoring below them.
    """

    # Below, exact search over 1M chunks costs ~0.4 s per subquery and 1.5 GB.
    ann_min_chunks: int = Field(
        1_000_000,
        ge=0,
        description="Chunks from which the index job builds the approximate index and queries use it.",
    )
    # So that a list holds ~sqrt(n)/2 vectors and a probe stays cheap at any size.
    nlist: int | None = Field(
        None, ge=1, description="Inverted lists; None: 2 * sqrt(chunks), rounded to a power of two."
    )
    nprobe: int = Field(32, ge=1, description="Lists scanned per search: the recall/latency knob.")
    codes: Literal["SQ8", "SQfp16"] = Field(
        "SQ8", description="Per-vector code: SQ8 (one byte a dimension) or SQfp16 (two)."
    )
    # flat: assigning a batch is one matrix product, the fastest way to encode millions of vectors at up
    # to ~10k lists; hnsw for 100k lists and more, where the product grows too large.
    coarse: Literal["flat", "hnsw"] = Field(
        "flat", description="Coarse quantiser over the list centroids: flat (exact) or hnsw (a graph)."
    )
    train_sample: int = Field(
        200_000, ge=1, description="Vectors the lists are trained on (a uniform sample of the embeddings)."
    )
    candidates: int = Field(
        2_000,
        ge=1,
        description="Nearest chunks a subquery ranks exactly-as-stored; the others rank below them.",
    )
    rerank_community_max: int = Field(
        4_096,
        ge=0,
        description="A community's chunks beyond the candidates are ordered by similarity decoded from "
        "their codes when it has at most this many chunks (larger ones: stored order).",
    )
    # mmap: a node holds one copy in its page cache however many query actors it runs.
    sharing: Literal["mmap", "private"] = Field(
        "mmap",
        description="mmap: the first query process writes the filled index to a file under share_dir and "
        "every process maps it read-only; private: each process holds its own copy.",
    )
    share_dir: Path | None = Field(
        None,
        description="Where the shared index files go (node-local; None: <LAZYGRAPH_HOME>/vector-share), in a "
        "directory of this user's only (mode 0700), one folder per index build, each file verified by its "
        "content hash before it is mapped.",
    )
    share_keep_hours: float = Field(
        24.0,
        ge=0,
        description="Shared files not mapped for this long are removed when a new one is written.",
    )
    seed: int = Field(7, description="Seed of the training sample and k-means.")
