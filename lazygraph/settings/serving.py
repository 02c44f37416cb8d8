"""The serving store: Lance datasets derived from an index's Delta tables, read by lookups."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ServingStoreSettings(BaseModel):
    """When and how the serving store is written (every index run, `lazygraph store build`) and how
    ``ServingStore`` reads it (lazygraph.serving). Queries read it with ``query.index_source: store``
    (every method; the lazy one through a working set per query), else the in-memory snapshot; with
    ``auto`` (the default), from ``store_above_chunks`` chunks."""

    build_on_index: bool = Field(
        True,
        description="Build the serving store of the versions every index run publishes (create, --append, "
        "--delete, a rerun, each --watch micro-batch) and `lazygraph maintain` leaves, under the run's "
        "writer lease. A failed build leaves the run published and says to run `lazygraph store build`.",
    )

    # Below this the snapshot loads in seconds and fits in memory, and answers every method; above it,
    # loading the whole index per process costs more than the store's lookups.
    # 2,000 covers hotpotqa100's and musique50-dev's corpora whole (994 and 1,890 chunks), so there the
    # lazy search on the store equals it on the snapshot; a budget of 50 tests reaches far fewer.
    lazy_candidates: int = Field(
        2000,
        ge=1,
        description="Chunks the lazy search reads from the serving store per subquery and signal: the "
        "nearest, the best by BM25 and the most-mentioning of each matched concept. It ranks and tests "
        "only these (on the snapshot it ranks every chunk).",
    )
    store_above_chunks: int = Field(
        1_000_000,
        ge=0,
        description="Chunks of the index's last complete run from which queries and `lazygraph batch` "
        "read the serving store rather than the snapshot, with `query.index_source: auto`, for the "
        "methods the store serves (every method, from store format 7).",
    )

    # Below this an exact scan of the vectors is cheap and an IVF-PQ index would be trained on too few
    # points (PQ wants at least 256 per codebook, IVF tens per list).
    vector_index_min_rows: int = Field(
        100_000,
        ge=0,
        description="Rows from which a vector column (chunks, concepts) gets an IVF-PQ index; below, "
        "lookups scan the vectors exactly.",
    )
    ivf_partitions: int | None = Field(
        None, ge=1, description="IVF lists of a vector index; None: about sqrt(rows), at least 1."
    )
    pq_sub_vectors: int | None = Field(
        None,
        ge=1,
        description="PQ sub-vectors (must divide the dimension); None: dimension / 8 where it divides, "
        "else 1.",
    )
    nprobes: int = Field(20, ge=1, description="IVF lists a nearest-vector lookup scans.")
    # PQ distances are coarse; re-ranking k * refine_factor candidates with the stored vectors restores
    # the order an exact search gives among them.
    refine_factor: int = Field(
        10, ge=1, description="Candidates re-ranked exactly per result of an indexed vector lookup."
    )
    # A hybrid search over the store fuses the chunks nearest the question with every chunk holding one
    # of its terms; 1,000 vector ranks reach far below any context cut (RRF gives rank 1,000 a weight
    # of 1/1060), and on an index of at most this many chunks the fusion is exactly the snapshot's.
    hybrid_vector_depth: int = Field(
        1_000,
        ge=1,
        description="Nearest chunks a hybrid search on the store fuses with the BM25 ranking; a chunk "
        "below them counts as ranked just below the last.",
    )
    full_text: bool = Field(
        True, description="Build a full-text (BM25) index on the chunk text when the installed Lance can."
    )
    concept_vectors: bool = Field(
        True,
        description="Embed the concept names with the embedding model into the store (needed for "
        "concepts-nearest-a-vector lookups).",
    )
    # Only names that are new or renamed since the index's newest earlier store are encoded; turning it
    # off re-encodes every kept concept's name (11-12 s a run on wiki2mh against 2.5 s, BENCHMARKS.md).
    reuse_concept_vectors: bool = Field(
        True,
        description="Take the vectors of concepts whose id and name an earlier complete store of the "
        "index holds, encoded by the same model, instead of encoding those names again.",
    )
    sort_rows: int = Field(
        5_000_000,
        ge=1,
        description="Rows sorted in memory at once while a store groups its BM25 postings by term and "
        "its community links by community (spilled to local temporary files in buckets of about "
        "this many rows, each sorted in turn).",
    )
    # A common term reaches a large share of the chunks: at 1M synthetic chunks, reading every posting
    # of five query terms took 586 ms (p95). In impact order, 100,000 postings a term kept 83 % of the
    # exact BM25 top 50 at 96 ms; 10,000 kept 51 % at 12 ms (BENCHMARKS.md). An index of at most this
    # many chunks is scored exactly.
    postings_depth: int = Field(
        100_000,
        ge=0,
        description="Postings of one term a BM25 lookup on the store reads, highest impact first (0: "
        "all of them, exact BM25). Below the depth a chunk scores without that term.",
    )
    # Rescoring the best 200 of a 1,000-deep read at 100k chunks lifted the kept share of the exact top
    # 50 from 59 % to 75 % but cost as much as reading every posting there, so it is off by default.
    bm25_rescore: int = Field(
        0,
        ge=0,
        description="Best chunks of a depth-limited BM25 read scored exactly from their own terms (0: "
        "none). A store build with it on also writes the postings grouped by chunk (chunk_term_counts: "
        "their size again on disk); a store without them is read unrescored.",
    )
    write_batch_rows: int = Field(
        65_536, ge=1, description="Rows read from a Delta table and written to Lance per batch."
    )
    chunk_cache: int = Field(
        4_096, ge=0, description="Chunks (text and metadata) kept in a reader's LRU cache."
    )
    community_cache: int = Field(
        1_024, ge=0, description="Communities' chunk lists kept in a reader's LRU cache."
    )
    membership_cache: int = Field(
        4_096, ge=0, description="Chunks' community lists kept in a reader's LRU cache."
    )
    # A community's chunks are held as two Arrow columns (~60 bytes a chunk): 1M chunks ~ 60 MB.
    community_cache_chunks: int = Field(
        1_000_000,
        ge=0,
        description="Chunks, over all the communities' chunk lists a reader's LRU cache holds (one large "
        "community can hold a hundred thousand); a list longer than this is read each time.",
    )
    # Lance keeps the index pages a lookup has read (B-tree pages, IVF lists) and the files' metadata in
    # caches of its session, unbounded by default: at 1M chunks, 200 subqueries left 615 MB in them and
    # an actor at 1.16 GB; bounded to 128 MB and 64 MB the actor held 0.67 GB at the same latency
    # (BENCHMARKS.md). One session serves every dataset of a store, so the bounds are the store's.
    lance_index_cache_mb: int = Field(
        128,
        ge=1,
        description="MiB of index pages (B-tree, IVF-PQ, full text) a reader's Lance session keeps.",
    )
    lance_metadata_cache_mb: int = Field(
        64, ge=1, description="MiB of file and manifest metadata a reader's Lance session keeps."
    )
