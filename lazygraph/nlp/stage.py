"""The concept-extraction stage of an index run: spaCy over the new chunks, mentions merged.

The mentions table (chunk, concept, count) is this stage's own table. Concept names and kinds ride
along to the graph stage (``Extraction.names``), which owns the concepts table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lazygraph.errors import IndexStateError
from lazygraph.ingest.stage import NewChunks
from lazygraph.manifest import recorded_settings
from lazygraph.nlp.extract import extract_concepts
from lazygraph.run_context import RunContext
from lazygraph.settings import ConceptSettings
from lazygraph.tables import MENTIONS

# The settings that decide which concepts a chunk yields, with the value a run recorded before the
# setting existed had implicitly (None: always recorded).
EXTRACTION_SETTINGS: dict[str, Any] = {
    "spacy_model": None,
    "max_phrase_tokens": None,
    "noun_phrases": "parser",
    "use_entities": True,
}


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


def check_same_extraction(last_run: dict[str, Any] | None, concepts: ConceptSettings, index: str) -> None:
    """Refuse to add chunks whose concepts would be found another way than the index's own: one index
    mixing two extractors has concepts that no single setting reproduces, and a rebuild would differ."""
    if last_run is None:
        return
    recorded = recorded_settings(last_run, "concepts")
    now = concepts.model_dump()
    differ = {}
    for key, implicit in EXTRACTION_SETTINGS.items():
        old = recorded.get(key, implicit)
        if old is not None and old != now[key]:
            differ[key] = (old, now[key])
    if differ:
        was = ", ".join(f"concepts.{key}={old!r}" for key, (old, _) in differ.items())
        asked = ", ".join(f"concepts.{key}={new!r}" for key, (_, new) in differ.items())
        env = " ".join(
            f"LAZYGRAPH_CONCEPTS__{key.upper()}={str(old).lower()}" for key, (old, _) in differ.items()
        )
        raise IndexStateError(
            f"the index {index} was built with {was}, but this run would extract concepts with {asked}; "
            f"run it with the index's settings (for example {env}) or build a new index with the new ones"
        )


def extract_mentions(ctx: RunContext, chunks: NewChunks) -> Extraction:
    from pyspark import StorageLevel

    rows = extract_concepts(chunks.frame, ctx.settings.concepts).persist(StorageLevel.MEMORY_AND_DISK)
    return Extraction(rows, rows.count())


def write_mentions(ctx: RunContext, extraction: Extraction, replaced: Any | None) -> None:
    """Merge the new mentions; those of replaced chunks are deleted in the same transaction."""
    ctx.store.merge_chunk_rows(MENTIONS, extraction.mentions, replaced)
