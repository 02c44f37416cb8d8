"""The schema of every table lazygraph writes, declared once.

Arrow is the one declaration: the query side reads the tables with ``deltalake`` (Arrow, no JVM) and
the Spark stages ask ``spark_schema`` for the same schema as a ``StructType``, so a column added
here reaches both sides and a stage cannot drift from what the readers expect. Each table also
names its key (the columns a MERGE matches on) and the stage package that owns it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa


@dataclass(frozen=True)
class TableSpec:
    name: str
    owner: str  # the stage package that writes it
    schema: pa.Schema
    keys: tuple[str, ...]  # what a MERGE matches on; empty for tables only appended or replaced
    row: str  # one row per ...


def _schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(name, kind) for name, kind in fields])


_TEXT = pa.string()

# The id of the synthetic level-0 community that gathers the chunks in no real level-0 community (no
# kept concept): never written to the communities table, added by every reader of it (the query
# snapshot, the serving store) so that a graph search can still reach those chunks.
UNASSIGNED_COMMUNITY = "(chunks without concepts)"

DOCUMENTS = TableSpec(
    "documents",
    "ingest",
    _schema(
        ("doc_id", _TEXT),
        ("title", _TEXT),
        ("text", _TEXT),
        ("text_hash", _TEXT),
        ("source", _TEXT),
        ("n_chars", pa.int32()),
        ("run_id", _TEXT),
    ),
    ("doc_id",),
    "document",
)
REJECTED = TableSpec(
    "rejected",
    "ingest",
    _schema(
        ("run_id", _TEXT),
        ("source", _TEXT),
        ("record", _TEXT),
        ("doc_id", _TEXT),
        ("reason", _TEXT),
        ("detail", _TEXT),
    ),
    ("source", "record", "reason"),
    "input record refused, with the reason",
)
CHUNKS = TableSpec(
    "chunks",
    "ingest",
    _schema(
        ("chunk_id", _TEXT),
        ("doc_id", _TEXT),
        ("title", _TEXT),
        ("ord", pa.int32()),
        ("text", _TEXT),
        ("n_tokens", pa.int32()),
    ),
    ("chunk_id",),
    "token window of a document (chunk_id is a content hash)",
)
CONCEPTS = TableSpec(
    "concepts",
    "graph",
    _schema(
        ("concept_id", _TEXT),
        ("name", _TEXT),
        ("kind", _TEXT),
        ("frequency", pa.int64()),
        ("chunk_frequency", pa.int64()),
        ("doc_frequency", pa.int64()),
        ("degree", pa.int64()),
        ("kept", pa.bool_()),
    ),
    ("concept_id",),
    "normalised noun phrase or entity, with its frequencies and pruning flag",
)
MENTIONS = TableSpec(
    "mentions",
    "nlp",
    _schema(("chunk_id", _TEXT), ("concept_id", _TEXT), ("count", pa.int32())),
    ("chunk_id", "concept_id"),
    "(chunk, concept) pair with its count",
)
EDGES = TableSpec(
    "edges",
    "graph",
    _schema(
        ("src", _TEXT),
        ("dst", _TEXT),
        ("cooccurrence", pa.int64()),
        ("weight", pa.float64()),
        ("kept", pa.bool_()),
    ),
    ("src", "dst"),
    "co-occurring concept pair, its count and NPMI weight",
)
CONCEPT_COUNTS = TableSpec(
    "concept_counts",
    "graph",
    _schema(
        ("concept_id", _TEXT),
        ("name", _TEXT),
        ("kind", _TEXT),
        ("frequency", pa.int64()),
        ("chunk_frequency", pa.int64()),
        ("doc_frequency", pa.int64()),
    ),
    ("concept_id",),
    "concept mentioned in the index, with its counts (kept up to date by MERGE of each run's change)",
)
PAIR_COUNTS = TableSpec(
    "pair_counts",
    "graph",
    _schema(("src", _TEXT), ("dst", _TEXT), ("cooccurrence", pa.int64())),
    ("src", "dst"),
    "concept pair (src < dst) paired in at least one chunk, with the number of such chunks",
)
COMMUNITIES = TableSpec(
    "communities",
    "communities",
    _schema(
        ("community_id", _TEXT),
        ("level", pa.int32()),
        ("parent_id", _TEXT),
        ("size", pa.int64()),
        ("n_chunks", pa.int64()),
        ("top_concepts", pa.list_(_TEXT)),
    ),
    ("community_id",),
    "community at a level, with its parent and size",
)
CONCEPT_COMMUNITIES = TableSpec(
    "concept_communities",
    "communities",
    _schema(("concept_id", _TEXT), ("level", pa.int32()), ("community_id", _TEXT)),
    ("concept_id", "level"),
    "(concept, level) -> community",
)
CHUNK_COMMUNITIES = TableSpec(
    "chunk_communities",
    "communities",
    _schema(("chunk_id", _TEXT), ("level", pa.int32()), ("community_id", _TEXT), ("weight", pa.float64())),
    ("chunk_id", "level", "community_id"),
    "(chunk, level, community) link with a weight",
)
CHUNK_EMBEDDINGS = TableSpec(
    "chunk_embeddings",
    "embed",
    _schema(
        ("chunk_id", _TEXT),
        ("embedding", pa.binary()),  # little-endian vector of ``dtype``
        ("dtype", _TEXT),
        ("dim", pa.int32()),
        ("model", _TEXT),
    ),
    ("chunk_id",),
    "chunk vector",
)
CHUNK_TERMS = TableSpec(
    "chunk_terms",
    "lexical",
    _schema(("chunk_id", _TEXT), ("term", _TEXT), ("count", pa.int32())),
    ("chunk_id", "term"),
    "(chunk, term) pair with its count, terms as ``lexical.terms.tokenize`` cuts them",
)
MANIFEST = TableSpec(
    "manifest",
    "manifest",
    _schema(
        ("run_id", _TEXT),
        ("mode", _TEXT),
        ("input", _TEXT),
        ("status", _TEXT),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("finished_at", pa.timestamp("us", tz="UTC")),
        ("settings_json", _TEXT),
        ("counts_json", _TEXT),
        ("versions_json", _TEXT),
        ("timings_json", _TEXT),
    ),
    ("run_id",),
    "index run: settings, counts, table versions, timings",
)
# Written by `lazygraph batch` in its own location, not inside an index.
RESULTS = TableSpec(
    "results",
    "serve",
    pa.schema(
        [
            pa.field("query_id", _TEXT, nullable=False),
            pa.field("question", _TEXT, nullable=False),
            pa.field("answer", _TEXT),
            pa.field("result_json", _TEXT),
            pa.field("status", _TEXT, nullable=False),  # "ok" or "error"
            pa.field("error", _TEXT),
            pa.field("seconds", pa.float64(), nullable=False),
            pa.field("finished_at", pa.timestamp("us", tz="UTC"), nullable=False),
            # The version of the index that answered (manifest.index_version); null in tables written
            # before it was recorded.
            pa.field("index_version", _TEXT),
        ]
    ),
    ("query_id",),
    "answered (or failed) query of a batch job",
)

LLM_CACHE = TableSpec(
    "llm_cache",
    "llm",
    pa.schema(
        [
            pa.field("key", _TEXT, nullable=False),  # SHA-256 of what the answer depends on (llm/cache.py)
            pa.field("kind", _TEXT, nullable=False),  # "verdict" (a relevance test) or "completion"
            pa.field("model", _TEXT, nullable=False),
            pa.field("p_yes", pa.float64()),  # verdicts
            pa.field("text", _TEXT),  # completions
            # What the model call cost when it was made, so a cache hit still reports the method's cost.
            pa.field("prompt_tokens", pa.int64()),
            pa.field("completion_tokens", pa.int64()),
            pa.field("created_at", pa.timestamp("us", tz="UTC"), nullable=False),
            # The partition: the key's first two hex digits, so a lookup reads 1/256 of the table.
            # Tables written before it have no such column and are read with a key filter.
            pa.field("bucket", _TEXT, nullable=False),
        ]
    ),
    ("key",),
    "relevance verdict or temperature-0 completion, reused by later queries and jobs",
)

INDEX_TABLES = (
    DOCUMENTS,
    REJECTED,
    CHUNKS,
    CONCEPTS,
    MENTIONS,
    EDGES,
    COMMUNITIES,
    CONCEPT_COMMUNITIES,
    CHUNK_COMMUNITIES,
    CHUNK_EMBEDDINGS,
    CHUNK_TERMS,
    CONCEPT_COUNTS,
    PAIR_COUNTS,
    MANIFEST,
)
SPECS = {spec.name: spec for spec in (*INDEX_TABLES, RESULTS, LLM_CACHE)}


def spark_schema(name: str) -> Any:
    """The table's schema as a Spark ``StructType`` (for mapInPandas and createDataFrame)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(SPECS[name].schema)


def columns(name: str) -> list[str]:
    return SPECS[name].schema.names
