"""The serving store: Lance datasets derived from an index's Delta tables, for query processes that
read only what a query touches instead of loading the whole index (``lazygraph.query.snapshot``).

Delta stays the system of record; a store is built from the table versions the manifest's last
complete run names, lives in a directory of the index named by those versions, and is refused by a
reader once the manifest names others. Every index run builds the store of the versions it publishes,
under its writer lease (``serving.build_on_index``); `lazygraph store build` builds it on request.

- layout: where a store lives, its datasets and its metadata file (``store.json``, written last and
  atomically: a store without it is unfinished and never opened);
- writer: ``build_store``, the datasets written batch by batch from the pinned Delta versions, with
  B-tree indexes on ids, IVF-PQ vector indexes above a size, and a full-text index on chunk text;
- publish: ``build_after_publish``, the store of every published run, whose failure never fails the run;
- retention: which stores `lazygraph maintain` keeps (those a live run names);
- reader: ``ServingStore``, the lookups (chunks by id, nearest chunks and concepts, communities of
  chunks, chunks of communities, BM25 of the chunks holding given terms, Lance's full-text top-k, and
  for the lazy search's working set the rows of given chunks, communities and concepts, the mentions
  both ways and the kept edges), with bounded LRU caches;
- scores: ``ChunkScores``, a score per chunk in arrays (BM25 reaches many chunks);
- cache: the LRU cache.

The query engine reads it with ``query.index_source: store``, or ``auto`` on an index of
``serving.store_above_chunks`` chunks (``lazygraph.query.store_reader``, ``lazygraph.query.source``):
the vector and hybrid methods by lookups, the lazy method through a working set per query
(``lazygraph.query.search.lazy.working_set``).
"""

from lazygraph.serving.reader import (
    CommunityChunks,
    CommunityKey,
    Membership,
    Scored,
    ServingStore,
    StoredChunk,
    StoredCommunity,
)
from lazygraph.serving.scores import ChunkScores
from lazygraph.serving.writer import build_store

__all__ = [
    "ChunkScores",
    "CommunityChunks",
    "CommunityKey",
    "Membership",
    "Scored",
    "ServingStore",
    "StoredChunk",
    "StoredCommunity",
    "build_store",
]
