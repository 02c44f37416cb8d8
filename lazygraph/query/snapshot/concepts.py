"""The concept part of a snapshot: names, which chunks mention them, their graph and communities.

Only the concepts (and edges) the indexer kept are loaded; concept i is row i of the kept concepts.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
from scipy.sparse import csr_array

from lazygraph.query.snapshot.columns import kept, keys, level_keys, numbers, positions, strings
from lazygraph.query.snapshot.sparse import csr, empty_csr
from lazygraph.query.snapshot.text import TextColumn


class ConceptColumns(NamedTuple):
    """The snapshot fields about concepts (named as in ``IndexSnapshot``)."""

    concept_ids: TextColumn
    concept_names: TextColumn
    chunk_concepts: csr_array  # chunk -> concepts it mentions; data: mention count
    concept_chunks: csr_array  # concept -> chunks mentioning it; data: mention count
    concept_adjacency: csr_array  # concept -> neighbours by a kept edge, both directions; data: weight
    concept_community: np.ndarray  # (n_levels, n_concepts), -1 where unknown


class ConceptTables(NamedTuple):
    """The index tables the concept part is read from (None for a table the index lacks)."""

    concepts: pa.Table | None
    mentions: pa.Table | None
    edges: pa.Table | None
    concept_communities: pa.Table | None


def build_concepts(
    source: ConceptTables,
    chunk_keys: pa.Array,
    community_keys: pa.Array,
    community_level: np.ndarray,
    n_levels: int,
) -> ConceptColumns:
    """The kept concepts, with their chunks, edges and community at every level."""
    concepts = _kept_concepts(source.concepts)
    concept_keys = keys(concepts, "concept_id")
    chunk_concepts, concept_chunks = _mentions(source.mentions, chunk_keys, concept_keys)
    return ConceptColumns(
        concept_ids=strings(concepts, "concept_id"),
        concept_names=strings(concepts, "name"),
        chunk_concepts=chunk_concepts,
        concept_chunks=concept_chunks,
        concept_adjacency=_adjacency(source.edges, concept_keys),
        concept_community=_communities(
            source.concept_communities, concept_keys, community_keys, community_level, n_levels
        ),
    )


def _kept_concepts(table: pa.Table | None) -> pa.Table:
    """The kept concepts, or an empty table with their columns."""
    if table is not None and (table := kept(table)).num_rows:
        return table
    return pa.table({n: pa.array([], pa.string()) for n in ("concept_id", "name")})


def _mentions(
    table: pa.Table | None, chunk_keys: pa.Array, concept_keys: pa.Array
) -> tuple[csr_array, csr_array]:
    """Chunk -> concepts and concept -> chunks, weighted by the mention count."""
    n_chunks, n_concepts = len(chunk_keys), len(concept_keys)
    if table is None or table.num_rows == 0 or n_concepts == 0:
        return empty_csr((n_chunks, n_concepts)), empty_csr((n_concepts, n_chunks))
    chunks = positions(table.column("chunk_id"), chunk_keys)
    concepts = positions(table.column("concept_id"), concept_keys)
    known = (chunks >= 0) & (concepts >= 0)
    chunks, concepts = chunks[known], concepts[known]
    counts = numbers(table, "count", np.float32)[known]
    return (
        csr(chunks, concepts, (n_chunks, n_concepts), counts),
        csr(concepts, chunks, (n_concepts, n_chunks), counts),
    )


def _adjacency(table: pa.Table | None, concept_keys: pa.Array) -> csr_array:
    """Concept -> neighbours, from the kept edges in both directions, weighted by the edge weight."""
    n_concepts = len(concept_keys)
    if table is None or table.num_rows == 0 or n_concepts == 0:
        return empty_csr((n_concepts, n_concepts))
    table = kept(table)
    src = positions(table.column("src"), concept_keys)
    dst = positions(table.column("dst"), concept_keys)
    weights = numbers(table, "weight", np.float32)
    known = (src >= 0) & (dst >= 0)
    src, dst, weights = src[known], dst[known], weights[known]
    return csr(
        np.concatenate([src, dst]),
        np.concatenate([dst, src]),
        (n_concepts, n_concepts),
        np.concatenate([weights, weights]),
    )


def _communities(
    table: pa.Table | None,
    concept_keys: pa.Array,
    community_keys: pa.Array,
    community_level: np.ndarray,
    n_levels: int,
) -> np.ndarray:
    """The community of every concept at every level (-1 where the table gives none)."""
    n_concepts = len(concept_keys)
    result = np.full((n_levels, n_concepts), -1, dtype=np.int64)
    if table is None or table.num_rows == 0 or n_concepts == 0 or len(community_keys) == 0:
        return result
    concepts = positions(table.column("concept_id"), concept_keys)
    communities = positions(level_keys(table.column("level"), table.column("community_id")), community_keys)
    known = (concepts >= 0) & (communities >= 0)
    result[community_level[communities[known]], concepts[known]] = communities[known]
    return result
