"""The concept-extraction stage of an index run: spaCy over the new chunks, mentions merged.

The mentions table (chunk, concept, count) is this stage's own table. Concept names and kinds ride
along to the graph stage (``Extraction.names``), which owns the concepts table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lazygraph.ingest.stage import NewChunks
from lazygraph.nlp.extract import extract_concepts
from lazygraph.run_context import RunContext
from lazygraph.tables import MENTIONS


@dataclass
class Extraction:
    rows: Any  # DataFrame: chunk_id, concept_id, name, kind, count; persisted
    count: int

    @property
    def mentions(self) -> Any:
        return self.rows.select("chunk_id", "concept_id", "count")

    @property
    def names(self) -> Any:
        """concept_id, name, is_entity (1 when any mention was a named entity)."""
        from pyspark.sql import functions as F

        return self.rows.select(
            "concept_id", "name", F.when(F.col("kind") == "entity", 1).otherwise(0).alias("is_entity")
        )

    def unpersist(self) -> None:
        self.rows.unpersist()


def extract_mentions(ctx: RunContext, chunks: NewChunks) -> Extraction:
    from pyspark import StorageLevel

    rows = extract_concepts(chunks.frame, ctx.settings.concepts).persist(StorageLevel.MEMORY_AND_DISK)
    return Extraction(rows, rows.count())


def write_mentions(ctx: RunContext, extraction: Extraction, replaced: Any | None) -> None:
    """Merge the new mentions; those of replaced chunks are deleted in the same transaction."""
    ctx.store.merge_chunk_rows(MENTIONS, extraction.mentions, replaced)
