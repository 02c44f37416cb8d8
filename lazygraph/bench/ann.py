"""Benchmark of the approximate index on clustered synthetic chunks (``lazygraph bench query --ann``).

One streaming pass over the generated blocks fills the index and keeps the exact top-k of every query,
so the corpus is never held as float32. Then, per nprobe: recall@k of the index's candidates against
the exact top-k, the latency of one search, and the latency of the whole best-first ranking of a
subquery (search + candidate ranking over a three-level community hierarchy, as the lazy search
builds it), each on one query at a time.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Sequence

import numpy as np

from lazygraph.settings import VectorIndexSettings
from lazygraph.vectors.ann import VectorIndex
from lazygraph.vectors.synthetic import ClusteredVectors


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _merge_top(
    best: tuple[np.ndarray, np.ndarray], scores: np.ndarray, start: int, k: int
) -> tuple[np.ndarray, np.ndarray]:
    labels = np.broadcast_to(np.arange(start, start + scores.shape[1], dtype=np.int64), scores.shape)
    all_scores = np.concatenate([best[1], scores], axis=1)
    all_labels = np.concatenate([best[0], labels], axis=1)
    keep = np.argpartition(-all_scores, min(k, all_scores.shape[1]) - 1, axis=1)[:, :k]
    return np.take_along_axis(all_labels, keep, axis=1), np.take_along_axis(all_scores, keep, axis=1)


def build_with_truth(
    data: ClusteredVectors, queries: np.ndarray, k: int, cfg: VectorIndexSettings, log: Callable[[str], None]
) -> tuple[VectorIndex, np.ndarray, dict]:
    """The filled index, the exact top-k labels of every query (best first), and build facts."""
    t0 = time.perf_counter()
    n_train_blocks = min(data.n_blocks, -(-cfg.train_sample // data.block))
    sample = np.concatenate([data.block_at(b) for b in range(n_train_blocks)])[: cfg.train_sample]
    index = VectorIndex.train(sample, data.n, cfg)
    del sample
    train_s = time.perf_counter() - t0
    log(f"trained {index.nlist} lists on {cfg.train_sample:,} vectors in {train_s:.0f} s")
    best = (np.zeros((len(queries), 0), np.int64), np.zeros((len(queries), 0), np.float32))
    add_s = truth_s = 0.0
    for start, vectors in data.blocks():
        t1 = time.perf_counter()
        index.add(vectors, np.arange(start, start + len(vectors), dtype=np.int64))
        t2 = time.perf_counter()
        best = _merge_top(best, queries @ vectors.T, start, k)
        add_s += t2 - t1
        truth_s += time.perf_counter() - t2
        if (start // data.block) % 10 == 9:
            log(f"  {start + len(vectors):,} vectors added ({add_s:.0f} s encoding, {truth_s:.0f} s exact)")
    order = np.argsort(-best[1], axis=1, kind="stable")
    truth = np.take_along_axis(best[0], order, axis=1)
    facts = {
        "train_seconds": round(train_s, 1),
        "add_seconds": round(add_s, 1),
        "exact_truth_seconds": round(truth_s, 1),
        "nlist": index.nlist,
        "code_bytes_per_vector": index.code_size,
        "index_gb": round(index.memory_bytes() / 1e9, 3),
        "peak_rss_gb_after_build": round(_peak_rss_gb(), 2),
    }
    return index, truth, facts


def synthetic_snapshot(n: int, index: VectorIndex, seed: int = 0) -> object:
    """A snapshot of ``n`` text-less chunks over ``index``, in the community hierarchy of the query
    benchmark's synthetic index (20 roots, 200 children, 2,000 leaves; a chunk in 2 leaves), built
    from numpy directly: no per-chunk Python objects at ten million chunks."""
    from lazygraph.query.snapshot import IndexSnapshot
    from lazygraph.query.snapshot.sparse import csr, empty_csr
    from lazygraph.query.snapshot.text import TextColumn

    rng = np.random.default_rng(seed)
    leaves = rng.integers(0, 2000, size=(n, 2), dtype=np.int64)
    first = {2: 220, 1: 20, 0: 0}  # community index of each level's first community
    rows, cols = [], []
    for level, divisor in ((2, 1), (1, 10), (0, 100)):
        for col in range(2):
            rows.append(first[level] + leaves[:, col] // divisor)
            cols.append(np.arange(n, dtype=np.int64))
    del leaves
    n_comm = 2220
    community_chunks = csr(np.concatenate(rows), np.concatenate(cols), (n_comm, n))
    del rows, cols
    level = np.asarray([0] * 20 + [1] * 200 + [2] * 2000, dtype=np.int32)
    parent = np.asarray([-1] * 20 + [i // 10 for i in range(200)] + [20 + i // 10 for i in range(2000)])
    has_parent = parent >= 0
    no_text = TextColumn(np.zeros(0, np.uint8), np.zeros(n + 1, np.int64))
    names = TextColumn.from_strings([f"c{i}" for i in range(n_comm)])
    no_concepts = TextColumn.from_strings([])
    return IndexSnapshot(
        uri="memory://synthetic-ann",
        versions=(),
        chunk_ids=no_text,
        chunk_doc_ids=no_text,
        chunk_titles=no_text,
        chunk_texts=no_text,
        chunk_tokens=np.broadcast_to(np.int64(200), (n,)),
        embeddings=np.zeros((0, index.dim), np.float32),
        embedding_model="synthetic",
        community_ids=names,
        community_level=level,
        community_parent=parent,
        community_top_concepts=[[] for _ in range(n_comm)],
        community_children=csr(parent[has_parent], np.flatnonzero(has_parent), (n_comm, n_comm)),
        community_chunks=community_chunks,
        n_levels=3,
        chunk_primary_community=np.broadcast_to(np.int64(-1), (3, n)),
        concept_ids=no_concepts,
        concept_names=no_concepts,
        chunk_concepts=empty_csr((n, 0)),
        concept_chunks=empty_csr((0, n)),
        concept_adjacency=empty_csr((0, 0)),
        concept_community=np.zeros((3, 0), np.int64),
        term_vocabulary=np.zeros(0, dtype=object),
        term_chunks=empty_csr((0, n)),
        chunk_lexical_length=np.broadcast_to(np.float32(0), (n,)),
        average_lexical_length=0.0,
        vector_index=index,
    )


def run(
    n: int,
    nprobes: Sequence[int],
    cfg: VectorIndexSettings,
    n_queries: int = 100,
    k: int = 50,
    dim: int = 384,
    n_centres: int = 10_000,
    seed: int = 0,
    ranking: bool = True,
    log: Callable[[str], None] = print,
) -> dict:
    """Build, then measure recall@k and latencies per nprobe; returns every figure as a dict."""
    from lazygraph.query.cost import CostRecorder
    from lazygraph.query.ranking import rank_subquery
    from lazygraph.query.search.lazy.match import search_subquery
    from lazygraph.settings import QuerySettings

    data = ClusteredVectors(n, dim, n_centres=n_centres, seed=seed)
    queries = data.queries(n_queries)
    index, truth, facts = build_with_truth(data, queries, k, cfg, log)
    snapshot = synthetic_snapshot(n, index, seed) if ranking else None
    if snapshot is not None:
        t0 = time.perf_counter()
        snapshot.chunk_community_index()
        facts["chunk_community_index_seconds"] = round(time.perf_counter() - t0, 1)
    qs = QuerySettings()
    results = []
    for nprobe in nprobes:
        index.set_nprobe(nprobe)
        for q in queries[:5]:  # warm caches and thread pools
            index.search(q, cfg.candidates)
        search_ms, rank_ms, search_subquery_ms, recalls = [], [], [], []
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            labels, _ = index.search(q, cfg.candidates)
            search_ms.append((time.perf_counter() - t0) * 1000)
            recalls.append(len(np.intersect1d(labels[:k], truth[i])) / k)
            if snapshot is not None:
                t0 = time.perf_counter()
                ranked, _ = rank_subquery(snapshot, q, qs.community_rank_k)
                t1 = time.perf_counter()
                search_subquery(snapshot, ranked, "q", 100, _Instant(), qs, CostRecorder())
                rank_ms.append((t1 - t0) * 1000)
                search_subquery_ms.append((time.perf_counter() - t1) * 1000)
        row = {
            "nprobe": nprobe,
            "recall_at_k": round(float(np.mean(recalls)), 4),
            "min_recall": round(float(np.min(recalls)), 2),
            "search_ms_p50": round(float(np.percentile(search_ms, 50)), 2),
            "search_ms_p95": round(float(np.percentile(search_ms, 95)), 2),
        }
        if rank_ms:
            row["rank_ms_p50"] = round(float(np.percentile(rank_ms, 50)), 2)
            row["rank_ms_p95"] = round(float(np.percentile(rank_ms, 95)), 2)
            row["search_budget100_ms_p50"] = round(float(np.percentile(search_subquery_ms, 50)), 2)
        log(str(row))
        results.append(row)
    facts["peak_rss_gb"] = round(_peak_rss_gb(), 2)
    return {
        "n": n,
        "dim": dim,
        "k": k,
        "queries": n_queries,
        "candidates": cfg.candidates,
        **facts,
        "runs": results,
    }


class _Instant:
    """A relevance assessor that answers at once (30% relevant): the search's own cost remains."""

    def __init__(self) -> None:
        self._rng = np.random.default_rng(0)

    def relevance(self, question: str, passages: list[str]) -> list[float]:
        return [float(self._rng.random() < 0.3) for _ in passages]
