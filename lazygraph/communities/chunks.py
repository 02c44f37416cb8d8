"""Chunk <-> community membership: a chunk belongs to the communities of its concepts."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F


def chunk_communities(mentions_df: DataFrame, concept_communities_df: DataFrame) -> DataFrame:
    """(chunk_id, level, community_id, weight) at every level.

    weight is the share of the chunk's mentions of kept concepts that fall in the community, so the
    weights of one chunk sum to 1 at each level. Mentions of concepts outside the pruned graph (not in
    concept_communities) are ignored; a chunk with none has no rows.
    """
    mentions = mentions_df.select("chunk_id", "concept_id", F.col("count").cast("double").alias("n"))
    per_community = (
        mentions.join(concept_communities_df.select("concept_id", "level", "community_id"), "concept_id")
        .groupBy("chunk_id", "level", "community_id")
        .agg(F.sum("n").alias("n"))
    )
    chunk_total = F.sum("n").over(Window.partitionBy("chunk_id", "level"))
    return per_community.select(
        "chunk_id",
        F.col("level").cast("int").alias("level"),
        "community_id",
        (F.col("n") / chunk_total).alias("weight"),
    )
