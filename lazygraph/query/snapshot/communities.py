"""The community part of a snapshot: the hierarchy and the chunks of every community.

Communities are indexed by their row in the communities table; their ids are unique only within a
level, so tables refer to them by "level/id" keys (``community_keys``). Chunks that belong to no
level-0 community (no kept concept) are gathered in one synthetic level-0 community after the real
ones, so that the graph search can still reach them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.sparse import csr_array

from lazygraph.query.snapshot.columns import level_keys, numbers, positions, strings
from lazygraph.query.snapshot.sparse import csr
from lazygraph.query.snapshot.text import TextColumn
from lazygraph.tables.schemas import UNASSIGNED_COMMUNITY


class CommunityColumns(NamedTuple):
    """The snapshot fields about communities (named as in ``IndexSnapshot``)."""

    community_ids: TextColumn
    community_level: np.ndarray
    community_parent: np.ndarray  # -1 for a root
    community_top_concepts: list[list[str]]
    community_children: csr_array  # community -> its sub-communities
    community_chunks: csr_array  # community -> its chunks, every level; data: membership weight
    n_levels: int
    chunk_primary_community: np.ndarray  # (n_levels, n_chunks): the community holding most of its mentions


class _Memberships(NamedTuple):
    """Chunk-community pairs as parallel arrays of indices, with the membership weight."""

    communities: np.ndarray
    chunks: np.ndarray
    weights: np.ndarray


def communities_table(table: pa.Table | None) -> pa.Table:
    """The communities table, or an empty one with its columns when the index has none."""
    if table is not None and table.num_rows:
        return table
    return pa.table(
        {
            "community_id": pa.array([], pa.string()),
            "level": pa.array([], pa.int32()),
            "parent_id": pa.array([], pa.string()),
            "top_concepts": pa.array([], pa.list_(pa.string())),
        }
    )


def community_keys(communities: pa.Table) -> pa.Array:
    """The "level/id" key of every community of the table, in row order."""
    if communities.num_rows == 0:
        return pa.array([], pa.string())
    return level_keys(communities.column("level"), communities.column("community_id"))


def build_communities(
    communities: pa.Table, keys: pa.Array, chunk_communities: pa.Table | None, chunk_keys: pa.Array
) -> CommunityColumns:
    """The hierarchy, plus the synthetic community when some chunks have no level-0 community."""
    n_real, n_chunks = communities.num_rows, len(chunk_keys)
    level = numbers(communities, "level", np.int32)
    parent = _parents(communities, keys, level)
    ids = strings(communities, "community_id")
    top = [list(t or []) for t in communities.column("top_concepts").to_pylist()] if n_real else []
    members = _memberships(chunk_communities, keys, chunk_keys)
    orphans = _orphans(members, level, n_chunks)
    if len(orphans):
        ids = TextColumn.from_strings([*ids.tolist(), UNASSIGNED_COMMUNITY])
        level = np.append(level, np.int32(0))
        parent = np.append(parent, -1)
        top.append([])
        members = _Memberships(
            np.concatenate([members.communities, np.full(len(orphans), n_real, dtype=np.int64)]),
            np.concatenate([members.chunks, orphans]),
            np.concatenate([members.weights, np.ones(len(orphans), dtype=np.float32)]),
        )
    n_communities = len(ids)
    n_levels = int(level.max()) + 1 if n_communities else 1
    has_parent = parent >= 0
    return CommunityColumns(
        community_ids=ids,
        community_level=level,
        community_parent=parent,
        community_top_concepts=top,
        community_children=csr(
            parent[has_parent], np.flatnonzero(has_parent), (n_communities, n_communities)
        ),
        community_chunks=csr(members.communities, members.chunks, (n_communities, n_chunks), members.weights),
        n_levels=n_levels,
        chunk_primary_community=_primary_communities(members, level, n_levels, n_chunks),
    )


def _parents(communities: pa.Table, keys: pa.Array, level: np.ndarray) -> np.ndarray:
    """The index of every community's parent (one level up), -1 for the roots."""
    if communities.num_rows == 0:
        return np.full(0, -1, dtype=np.int64)
    parent_keys = level_keys(
        pc.subtract(communities.column("level"), 1), communities.column("parent_id").fill_null("")
    )
    parent = positions(parent_keys, keys)
    parent[level == 0] = -1
    return parent


def _memberships(table: pa.Table | None, keys: pa.Array, chunk_keys: pa.Array) -> _Memberships:
    """The chunk_communities rows whose community and chunk are both in the snapshot."""
    if table is None or table.num_rows == 0 or len(keys) == 0:
        return _Memberships(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))
    communities = positions(level_keys(table.column("level"), table.column("community_id")), keys)
    chunks = positions(table.column("chunk_id"), chunk_keys)
    weights = numbers(table, "weight", np.float32)
    known = (communities >= 0) & (chunks >= 0)
    return _Memberships(communities[known], chunks[known], weights[known])


def _orphans(members: _Memberships, level: np.ndarray, n_chunks: int) -> np.ndarray:
    """The chunks in no level-0 community."""
    covered = np.zeros(n_chunks, dtype=bool)
    if len(members.communities):
        covered[members.chunks[level[members.communities] == 0]] = True
    return np.flatnonzero(~covered)


def _primary_communities(
    members: _Memberships, level: np.ndarray, n_levels: int, n_chunks: int
) -> np.ndarray:
    """Per level, the community of every chunk with the largest membership weight (-1 if none)."""
    primary = np.full((n_levels, n_chunks), -1, dtype=np.int64)
    if len(members.communities):
        # ascending weight: the last write per (level, chunk) wins
        order = np.lexsort((members.weights, members.communities))
        ranked = members.communities[order]
        primary[level[ranked], members.chunks[order]] = ranked
    return primary
