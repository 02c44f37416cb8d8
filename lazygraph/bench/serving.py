"""What one query process costs on an index's serving store: memory, opening time, lookup latency and
vector recall. Prints one JSON object.

    lazygraph bench serving --index DIR [--subqueries 200] [--chunks N] [--seed S] [--actors N]
        [--queries-at-once N] [--working-sets N]

With ``--chunks`` a synthetic index of N chunks is first generated in DIR (``synthetic_index``, in a child
process, so that what generating holds does not count in ``uss_gb``). The same
runs as ``python benchmarks/bench_serving.py``.

- ``open_s``: ``ServingStore.open`` (manifest, version and table-id checks) plus opening each Lance
  dataset of the store.
- ``p50_ms`` / ``p95_ms``: one subquery's non-LLM work, the lookups a graph search makes per
  subquery: the 50 nearest chunks of the subquery's vector, their texts (``chunks``), their
  communities at every level (``communities_of``), the chunks of the three communities most of them
  fall in at the deepest level (``chunks_of``) and those communities' rows (``communities``), and the
  BM25 scores of every chunk holding one of five distinct terms of the nearest chunk, drawn at random
  (``lexical_scores``, the hybrid method's lookup, and the ids of its best 50). The reader's LRU
  caches stay on, as in a query actor; every subquery has a new vector, so the nearest-chunk search
  is never cached.
  ``step_p95_ms`` gives the 95th percentile of each of these lookups alone.
- ``uss_gb``: the unique memory (psutil ``memory_full_info().uss``: pages no other process shares,
  page cache excluded) of this process, which opened the store and ran the subqueries, measured after
  them.
- ``recall_at_50``: for ``--recall-queries`` of the subquery vectors, the share of the exact 50
  nearest chunks (a brute-force scan of every stored vector, in batches) that ``nearest_chunks``
  returned. Measured after ``uss_gb``, so the scan does not count in it.
- ``bm25_overlap_at_50``: for the same subqueries, the share of the exact BM25 top 50 (every posting
  of the terms read) among the 50 the lookup named, which reads each term's postings to
  ``serving.postings_depth`` (reported as ``postings_depth``).
- ``driver_rss_gb``: the resident memory of a fresh process doing the batch driver's own index work
  with ``query.index_source: store``: checking the method against the source, reading the manifest's
  last complete run and the store's metadata (``StoreReader.open``). It runs no Ray and no actor; it
  measures what the driver holds of the index, which should not grow with it.
- With ``--actors N``: ``one_actor_uss_gb``, one child process doing a query actor's work (open the
  store, the same subqueries) measured while alive; ``actors_uss_gb``, N such processes alive together
  on this node; ``actors_over_one``, their sum over the one's (the pages of the store's files they
  all map are shared, and count in none of them).
- With ``--queries-at-once N``: ``one_at_a_time_uss_gb``, one such process running one stream of
  subqueries; ``at_once_uss_gb``, one running N streams at once in threads (each its own subqueries,
  sharing one store and its caches, as a query actor with ``ray.queries_per_actor`` N does);
  ``at_once_over_one``, the second over the first.
- With ``--working-sets N``: N lazy queries' working sets (``lazygraph.query.search.lazy.working_set``)
  read after the rest, each for four vectors (three subqueries and the question) drawn as above, the
  texts of five terms of each one's nearest chunk, and the two nearest concepts of each:
  ``working_set_p50_ms`` / ``working_set_p95_ms`` (the read and the snapshot built from it),
  ``working_set_chunks`` / ``working_set_communities`` (means) and ``uss_after_working_sets_gb``;
  then the topics the map step reads for a budget of 20 relevant chunks (each subquery's 20 nearest in
  the set, in groups of ``max_chunks_per_map_group``): ``topics_p50_ms`` / ``topics_p95_ms`` a query.
- Subquery vectors are stored chunk vectors moved by Gaussian noise (cosine about 0.9 to the chunk)
  and normalised: near the data, as a question about the corpus is.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from lazygraph.lexical import tokenize
from lazygraph.serving import ServingStore, layout
from lazygraph.settings import LexicalSettings, Settings

K = 50
COMMUNITIES_PER_SUBQUERY = 3
BM25_TERMS = 5
LEXICAL = LexicalSettings()
QUERY_NOISE = 0.025  # per dimension: cosine about 1/sqrt(1 + 384 * 0.025^2) = 0.9 to the chunk


def open_store(index: str, settings: Settings) -> tuple[ServingStore, float]:
    started = time.perf_counter()
    store = ServingStore.open(index, settings)
    for name in layout.datasets(store.meta):
        store._dataset(name)  # noqa: SLF001 (opening every dataset is part of opening the store)
    return store, time.perf_counter() - started


def query_vectors(store: ServingStore, n: int, seed: int) -> np.ndarray:
    """Stored chunk vectors, chosen at random, moved by noise and normalised."""
    rng = np.random.default_rng(seed)
    dataset = store._dataset(layout.CHUNK_VECTORS)  # noqa: SLF001
    rows = rng.choice(dataset.count_rows(), size=n, replace=n > dataset.count_rows())
    table = dataset.take(np.sort(rows).tolist(), columns=["vector"])
    vectors = np.stack(table.column("vector").to_numpy(zero_copy_only=False)).astype(np.float32)
    vectors += QUERY_NOISE * rng.standard_normal(vectors.shape).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class Steps:
    """Seconds taken by each named lookup, over all subqueries (to see which one dominates)."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = defaultdict(list)
        self.bm25_asked: list[tuple[list[str], set[str]]] = []  # terms and the best K found, per subquery

    @contextmanager
    def time(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        self.seconds[name].append(time.perf_counter() - started)

    def p95_ms(self) -> dict[str, float]:
        return {name: round(float(np.percentile(s, 95)) * 1e3, 2) for name, s in self.seconds.items()}


def subquery(store: ServingStore, vector: np.ndarray, steps: Steps) -> list[str]:
    """One subquery's lookups (module doc); the ids of the nearest chunks."""
    with steps.time("nearest_chunks"):
        nearest = [hit.id for hit in store.nearest_chunks(vector, K)]
    with steps.time("chunks"):
        chunks = store.chunks(nearest)
    with steps.time("communities_of"):
        links = store.communities_of(nearest)
    deepest = max((m.level for members in links.values() for m in members), default=0)
    counted = Counter(
        (m.level, m.community_id) for members in links.values() for m in members if m.level == deepest
    )
    top = [key for key, _ in counted.most_common(COMMUNITIES_PER_SUBQUERY)]
    with steps.time("chunks_of"):
        store.chunks_of(top)
    with steps.time("communities"):
        store.communities(top)
    # A question names a few distinct words of what it asks about: five distinct terms of the nearest
    # chunk, drawn at random (its first words are its most repeated, the corpus's most common ones).
    distinct = sorted(set(tokenize(chunks[0].text))) if chunks else []
    picked = np.random.default_rng(len(steps.seconds["bm25"])).permutation(len(distinct))[:BM25_TERMS]
    terms = [distinct[i] for i in picked]
    with steps.time("bm25"):
        scores = store.lexical_scores(terms, LEXICAL.k1, LEXICAL.b)
        best = scores.ids_at(np.argsort(-scores.scores, kind="stable")[:K])  # named, as a cut reads them
    steps.bm25_asked.append((terms, set(best)))
    return nearest


def bm25_overlap(store: ServingStore, asked: list[tuple[list[str], set[str]]]) -> float:
    """The share of the exact BM25 top K (every posting read) that the depth-limited lookups found."""
    exact_settings = store.settings.model_copy(deep=True)
    exact_settings.serving.postings_depth = 0
    exact = ServingStore(store.uri, store.meta, exact_settings)
    hits = total = 0
    for terms, found in asked:
        scores = exact.lexical_scores(terms, LEXICAL.k1, LEXICAL.b)
        truth = set(scores.ids_at(np.argsort(-scores.scores, kind="stable")[:K]))
        hits, total = hits + len(truth & found), total + len(truth)
    return hits / total if total else 1.0


def exact_nearest(store: ServingStore, queries: np.ndarray, k: int) -> list[set[str]]:
    """The ids of the k most similar stored vectors of each query, by a scan of all of them."""
    best_scores = np.full((len(queries), 0), -np.inf, np.float32)
    best_ids = np.empty((len(queries), 0), object)
    dataset = store._dataset(layout.CHUNK_VECTORS)  # noqa: SLF001
    for batch in dataset.to_batches(columns=["chunk_id", "vector"], batch_size=65_536):
        ids = np.asarray(batch.column(0).to_pylist(), object)
        flat = batch.column(1).values.to_numpy(zero_copy_only=False)
        scores = queries @ flat.reshape(len(ids), -1).T
        best_scores = np.concatenate([best_scores, scores], axis=1)
        best_ids = np.concatenate([best_ids, np.broadcast_to(ids, scores.shape)], axis=1)
        keep = np.argsort(-best_scores, axis=1)[:, :k]
        best_scores = np.take_along_axis(best_scores, keep, axis=1)
        best_ids = np.take_along_axis(best_ids, keep, axis=1)
    return [set(row) for row in best_ids]


def recall(store: ServingStore, queries: np.ndarray, found: list[list[str]]) -> float:
    exact = exact_nearest(store, queries, K)
    hits = sum(len(truth & set(got)) for truth, got in zip(exact, found, strict=True))
    return hits / sum(len(truth) for truth in exact)


DRIVER = """
import json, sys, psutil
from lazygraph import manifest
from lazygraph.query.engine import check_index_source
from lazygraph.query.store_reader import StoreReader
from lazygraph.settings import Settings
settings = Settings()
settings.query.index_source = "store"
check_index_source(settings, "vector", None)
manifest.last_complete_run(sys.argv[1], settings)
StoreReader.open(sys.argv[1], settings)
print(json.dumps(psutil.Process().memory_info().rss))
"""


def driver_rss(index: str) -> int:
    """The RSS of a fresh process doing the batch driver's index work on the store (module doc)."""
    done = subprocess.run([sys.executable, "-c", DRIVER, index], capture_output=True, text=True, check=True)
    return int(done.stdout.strip().splitlines()[-1])


def store_bytes(store: ServingStore) -> int:
    root = Path(layout.dataset_uri(store.uri, layout.CHUNKS)).parent
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def working_sets(store: ServingStore, settings: Settings, n: int, seed: int) -> dict[str, Any]:
    """``n`` lazy queries' working sets read from the store (module doc), timed one by one."""
    from lazygraph.query.search.lazy.working_set import read_working_set

    vectors = query_vectors(store, 4 * n, seed + 1)
    seconds, chunks, communities, topics = [], [], [], []
    for q in range(n):
        asked = vectors[4 * q : 4 * q + 4]
        texts = []
        for vector in asked:
            nearest = store.chunks([hit.id for hit in store.nearest_chunks(vector, 1)])
            words = sorted(set(tokenize(nearest[0].text))) if nearest else []
            picked = np.random.default_rng(seed + q).permutation(len(words))[:BM25_TERMS]
            texts.append(" ".join(words[i] for i in picked))
        concepts = [hit.id for vector in asked for hit in store.nearest_concepts(vector, 2)]
        started = time.perf_counter()
        working = read_working_set(store, settings, asked, texts, concepts)
        seconds.append(time.perf_counter() - started)
        chunks.append(working.n_chunks)
        communities.append(working.n_communities)
        started = time.perf_counter()
        for vector in asked[:-1]:
            working.concept_subgraphs(map_groups(working, vector, settings.query.max_chunks_per_map_group))
        topics.append(time.perf_counter() - started)
    return {
        "working_sets": n,
        "lazy_candidates": settings.serving.lazy_candidates,
        "working_set_p50_ms": round(float(np.percentile(seconds, 50)) * 1e3, 1),
        "working_set_p95_ms": round(float(np.percentile(seconds, 95)) * 1e3, 1),
        "working_set_chunks": round(float(np.mean(chunks)), 1),
        "working_set_communities": round(float(np.mean(communities)), 1),
        "topics_p50_ms": round(float(np.percentile(topics, 50)) * 1e3, 1),
        "topics_p95_ms": round(float(np.percentile(topics, 95)) * 1e3, 1),
        "uss_after_working_sets_gb": round(psutil.Process().memory_full_info().uss / 2**30, 3),
    }


def map_groups(working: Any, vector: np.ndarray, size: int, relevant: int = 20) -> list[list[int]]:
    """A subquery's ``relevant`` nearest chunks of the set, in groups of ``size``: what a budget of 20
    relevance tests hands the map step at most."""
    best = np.argsort(-working.similarities(vector), kind="stable")[:relevant].tolist()
    return [best[i : i + size] for i in range(0, len(best), size)]


def bench(
    index: str,
    subqueries: int,
    recall_queries: int,
    seed: int,
    settings: Settings | None = None,
    n_working_sets: int = 0,
) -> dict[str, Any]:
    settings = settings or Settings()
    store, open_s = open_store(index, settings)
    vectors = query_vectors(store, subqueries, seed)
    latencies, found, steps = [], [], Steps()
    for vector in vectors:
        started = time.perf_counter()
        found.append(subquery(store, vector, steps))
        latencies.append(time.perf_counter() - started)
    uss = psutil.Process().memory_full_info().uss
    sample = min(recall_queries, subqueries)
    lazy = working_sets(store, settings, n_working_sets, seed) if n_working_sets else {}
    return lazy | {
        "chunks": store.n_chunks,
        "subqueries": subqueries,
        "uss_gb": round(uss / 2**30, 3),
        "driver_rss_gb": round(driver_rss(index) / 2**30, 3),
        "open_s": round(open_s, 3),
        "p50_ms": round(float(np.percentile(latencies, 50)) * 1e3, 2),
        "p95_ms": round(float(np.percentile(latencies, 95)) * 1e3, 2),
        "step_p95_ms": steps.p95_ms(),
        "recall_at_50": round(recall(store, vectors[:sample], found[:sample]), 4),
        "recall_queries": sample,
        "bm25_overlap_at_50": round(bm25_overlap(store, steps.bm25_asked[:sample]), 4),
        "postings_depth": store.settings.serving.postings_depth,
        "store_bytes": store_bytes(store),
        "vector_index": store.meta.get("vector_indexes", {}).get(layout.CHUNK_VECTORS),
    }


ACTOR = """
import sys
from lazygraph.bench.serving import actor
actor(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
"""


def actor(index: str, subqueries: int, seed: int, threads: int = 1) -> None:
    """One query actor's work in a child process: open the store, run the subqueries (``threads``
    streams of them at once, each its own, as an actor with ``ray.queries_per_actor`` answers several
    queries sharing one store), say ``ready`` and stay alive (its pages still mapped) until its stdin
    closes."""
    store, _ = open_store(index, Settings())

    def stream(offset: int) -> None:
        steps = Steps()
        for vector in query_vectors(store, subqueries, seed + offset):
            subquery(store, vector, steps)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(stream, range(threads)))
    print("ready", flush=True)
    sys.stdin.read()


def actors_uss(index: str, n: int, subqueries: int, seed: int, threads: int = 1) -> list[int]:
    """The USS of each of ``n`` actor processes on one node (each running ``threads`` streams of
    subqueries at once), measured while all of them are alive (a page of the store's files mapped by
    several of them is shared, so it counts in none)."""
    command = [sys.executable, "-c", ACTOR, index, str(subqueries)]
    procs = [
        subprocess.Popen(
            [*command, str(seed + i * threads), str(threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(n)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise SystemExit(f"a query actor process failed (exit {proc.wait()})")
        return [psutil.Process(proc.pid).memory_full_info().uss for proc in procs]
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=60)


def actors_report(index: str, n: int, subqueries: int, seed: int) -> dict[str, Any]:
    """One actor alone, then ``n`` together: their summed USS over the one's."""
    one = actors_uss(index, 1, subqueries, seed)[0]
    together = actors_uss(index, n, subqueries, seed)
    return {
        "actors": n,
        "one_actor_uss_gb": round(one / 2**30, 3),
        "actors_uss_gb": [round(u / 2**30, 3) for u in together],
        "actors_over_one": round(sum(together) / one, 2),
    }


def threads_report(index: str, n: int, subqueries: int, seed: int) -> dict[str, Any]:
    """One actor process answering one stream of subqueries, then one answering ``n`` at once in
    threads (each stream its own subqueries): the second's USS over the first's."""
    one = actors_uss(index, 1, subqueries, seed)[0]
    threaded = actors_uss(index, 1, subqueries, seed, threads=n)[0]
    return {
        "queries_at_once": n,
        "one_at_a_time_uss_gb": round(one / 2**30, 3),
        "at_once_uss_gb": round(threaded / 2**30, 3),
        "at_once_over_one": round(threaded / one, 2),
    }


def generate_elsewhere(index: str, chunks: int, seed: int) -> dict[str, Any]:
    """Generate the synthetic index in a child process: what generating it holds (the Arrow pools, the
    store build's buffers) must not count in this process's ``uss_gb``."""
    command = [sys.executable, "-m", "lazygraph", "bench", "synthetic-index", "--chunks", str(chunks),
               "--out", index, "--seed", str(seed)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"generating the synthetic index failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(prog="lazygraph bench serving", description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True)
    parser.add_argument("--subqueries", type=int, default=200)
    parser.add_argument("--recall-queries", type=int, default=50)
    parser.add_argument(
        "--chunks", type=int, default=None, help="Generate a synthetic index of N chunks first."
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--actors",
        type=int,
        default=0,
        help="Also run one, then N query-actor processes together on this node (each its own "
        "subqueries) and report their summed USS over the one's.",
    )
    parser.add_argument(
        "--queries-at-once",
        type=int,
        default=0,
        help="Also run one actor process answering N streams of subqueries at once in threads (as "
        "ray.queries_per_actor does) and report its USS over that of one answering one stream.",
    )
    parser.add_argument(
        "--working-sets",
        type=int,
        default=0,
        help="Also read N lazy queries' working sets (four vectors each) and report their time and size.",
    )
    args = parser.parse_args(argv)
    report: dict[str, Any] = {}
    if args.chunks is not None:
        generated = generate_elsewhere(args.index, args.chunks, args.seed)
        report["generate_s"] = round(generated["tables_s"] + generated["store_s"], 1)
    if args.actors:
        report |= actors_report(args.index, args.actors, args.subqueries, args.seed)
    if args.queries_at_once:
        report |= threads_report(args.index, args.queries_at_once, args.subqueries, args.seed)
    measured = bench(args.index, args.subqueries, args.recall_queries, args.seed, settings, args.working_sets)
    print(json.dumps(measured | report))
    return 0
