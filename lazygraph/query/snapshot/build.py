"""A snapshot assembled from the Arrow tables of an index: its chunk, community, concept and lexical
parts.

The parts are built in that order because each refers to the ones before by index: communities list
chunks, concepts list chunks and belong to communities, terms list chunks. ``load_snapshot`` reads
the tables from Delta; tests and benchmarks pass in-memory tables.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from lazygraph import tables
from lazygraph.query.snapshot.chunks import build_chunks
from lazygraph.query.snapshot.columns import keys
from lazygraph.query.snapshot.communities import build_communities, communities_table, community_keys
from lazygraph.query.snapshot.concepts import ConceptTables, build_concepts
from lazygraph.query.snapshot.lexical import build_lexical
from lazygraph.query.snapshot.model import IndexSnapshot


def build_snapshot(uri: str, versions: tuple, arrow: Mapping[str, pa.Table]) -> IndexSnapshot:
    """Turn the Arrow tables of an index (by table name; only the chunk ones are required) into a snapshot."""
    chunk_table = arrow[tables.CHUNKS]
    chunk_keys = keys(chunk_table, "chunk_id")
    chunks = build_chunks(uri, chunk_table, arrow[tables.CHUNK_EMBEDDINGS], chunk_keys)

    community_table = communities_table(arrow.get(tables.COMMUNITIES))
    comm_keys = community_keys(community_table)
    communities = build_communities(
        community_table, comm_keys, arrow.get(tables.CHUNK_COMMUNITIES), chunk_keys
    )

    concept_tables = ConceptTables(
        concepts=arrow.get(tables.CONCEPTS),
        mentions=arrow.get(tables.MENTIONS),
        edges=arrow.get(tables.EDGES),
        concept_communities=arrow.get(tables.CONCEPT_COMMUNITIES),
    )
    concepts = build_concepts(
        concept_tables, chunk_keys, comm_keys, communities.community_level, communities.n_levels
    )
    lexical = build_lexical(arrow.get(tables.CHUNK_TERMS), chunk_keys)
    return IndexSnapshot(
        uri=uri,
        versions=versions,
        **chunks._asdict(),
        **communities._asdict(),
        **concepts._asdict(),
        **lexical._asdict(),
    )
