"""The serving store: Lance datasets derived from an index's Delta tables, for query processes that
read only what a query touches instead of loading the whole index (``lazygraph.query.snapshot``).

Delta stays the system of record; a store is built from the table versions the manifest's last
complete run names, lives in a directory of the index named by those versions, and is refused by a
reader once the manifest names others.

- layout: where a store lives, its datasets and its metadata file (``store.json``);
- writer: ``build_store``, the datasets written batch by batch from the pinned Delta versions, with
  B-tree indexes on ids, IVF-PQ vector indexes above a size, and a full-text index on chunk text;
- reader: ``ServingStore``, the lookups (chunks by id, nearest chunks and concepts, communities of
  chunks, chunks of communities, BM25 top-k), with bounded LRU caches;
- cache: the LRU cache.

The query engine reads it for the vector method with ``query.index_source: store``
(``lazygraph.query.store_reader``); the lazy and hybrid methods still read the in-memory snapshot.
"""

from lazygraph.serving.reader import (
    CommunityKey,
    Membership,
    Scored,
    ServingStore,
    StoredChunk,
    StoredCommunity,
)
from lazygraph.serving.writer import build_store

__all__ = [
    "CommunityKey",
    "Membership",
    "Scored",
    "ServingStore",
    "StoredChunk",
    "StoredCommunity",
    "build_store",
]
