"""Reading a serving store: ``ServingStore.open`` checks it is the store of the index's current
versions, then every method is a lookup that reads only the rows it returns (by a B-tree, vector or
full-text index, or by a scan of one column where the store is too small to have an index).

A store is opened at one point in time: the versions its index's manifest named then. An indexing run
that completes later does not change what an open store reads; opening again refuses until the store
of the new versions is built (``StoreOutOfDateError``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from lazygraph import manifest, tables
from lazygraph.errors import StoreOutOfDateError
from lazygraph.serving import layout
from lazygraph.serving.cache import LRUCache
from lazygraph.serving.scores import ChunkScores, RowScores, term_weights
from lazygraph.settings import Settings

if TYPE_CHECKING:
    from lazygraph.tables import StorageSource

CommunityKey = tuple[int, str]  # (level, community id): ids are unique only within a level
_NO_SCORES = ChunkScores(pa.array([], pa.string()), np.zeros(0, np.float32))


class StoredChunk(NamedTuple):
    chunk_id: str
    doc_id: str
    title: str | None
    ord: int
    text: str
    n_tokens: int


class Membership(NamedTuple):
    """A chunk's link to a community, or a community's to a chunk, with the link's weight."""

    level: int
    community_id: str
    chunk_id: str
    weight: float


@dataclass(frozen=True)
class CommunityChunks:
    """A community's chunks (ids ascending) and each link's weight, as Arrow columns: a large community
    holds a hundred thousand chunks, which as Python objects cost ten times the memory and most of the
    lookup's time."""

    chunk_ids: pa.StringArray
    weights: pa.DoubleArray

    def __len__(self) -> int:
        return len(self.chunk_ids)


_NO_CHUNKS = CommunityChunks(pa.array([], pa.string()), pa.array([], pa.float64()))


class StoredCommunity(NamedTuple):
    community_id: str
    level: int
    parent_id: str | None
    size: int
    n_chunks: int
    top_concepts: list[str]


class Scored(NamedTuple):
    """A row found by similarity or BM25: its id and score (cosine similarity, or BM25)."""

    id: str
    score: float


def rebuild_hint(index_uri: str) -> str:
    return f"build it with `lazygraph store build --index {index_uri}`"


class ServingStore:
    """The serving store of an index, as of the versions its manifest names when opened."""

    def __init__(
        self,
        store: str,
        meta: dict[str, Any],
        settings: Settings,
        *,
        index_uri: str = "",
        index_version: str = "",
    ) -> None:
        self.uri = store
        self.meta = meta
        self.settings = settings
        self.index_uri = index_uri
        # The version of the index the store serves (``manifest.index_version`` of the run opened at).
        self.index_version = index_version
        self._mean_chunk_tokens: float | None = None
        cfg = settings.serving
        self._datasets: dict[str, Any] = {}
        self._chunks: LRUCache[str, StoredChunk] = LRUCache(cfg.chunk_cache)
        self._chunk_links: LRUCache[str, list[Membership]] = LRUCache(cfg.membership_cache)
        self._community_links: LRUCache[CommunityKey, CommunityChunks] = LRUCache(
            cfg.community_cache, weight=len, max_weight=cfg.community_cache_chunks
        )
        self._session: Any = None  # one Lance session, its caches bounded, for every dataset
        self._open_lock = threading.Lock()

    @classmethod
    def open(cls, index: str, settings: Settings | None = None) -> ServingStore:
        """The store of the index's last complete run; ``StoreOutOfDateError`` when it is missing,
        unfinished or was built from other table versions (or tables since re-created)."""
        settings = settings or Settings()
        uri = tables.normalise_index_uri(index)
        run, recorded = manifest.complete_versions(uri, settings)
        versions = layout.source_versions(recorded)
        store = layout.store_uri(uri, versions)
        meta = layout.read_meta(store, settings)
        if meta is None:
            raise StoreOutOfDateError(_missing_message(uri, versions, settings))
        _check(uri, store, meta, versions, settings)
        return cls(store, meta, settings, index_uri=uri, index_version=manifest.index_version(run))

    # ---- chunks ------------------------------------------------------------------------------------
    def chunks(self, chunk_ids: Sequence[str]) -> list[StoredChunk]:
        """The chunks of ``chunk_ids`` the store holds, in the order asked (unknown ids left out)."""
        found, missing = self._chunks.split(chunk_ids)
        if missing:
            rows = self._filter(layout.CHUNKS, "chunk_id", missing, list(StoredChunk._fields)).to_pylist()
            fetched = {row["chunk_id"]: StoredChunk(**row) for row in rows}
            self._chunks.put_many(fetched)
            found.update(fetched)
        return [found[c] for c in dict.fromkeys(chunk_ids) if c in found]

    @property
    def n_chunks(self) -> int:
        return int(self.meta["datasets"][layout.CHUNKS])

    def mean_chunk_tokens(self) -> float | None:
        """The mean token count of a chunk (None without chunks), read once: one integer column."""
        if self._mean_chunk_tokens is None and self.n_chunks:
            column = self._dataset(layout.CHUNKS).to_table(columns=["n_tokens"]).column("n_tokens")
            self._mean_chunk_tokens = float(np.mean(column.to_numpy()))
        return self._mean_chunk_tokens

    def nearest_chunks(self, vector: np.ndarray, k: int) -> list[Scored]:
        """The ``k`` chunks most similar to ``vector`` (cosine), most similar first."""
        return self._nearest(layout.CHUNK_VECTORS, "chunk_id", vector, k)

    def bm25(self, text: str, k: int) -> list[Scored]:
        """The ``k`` chunks Lance's full-text index scores highest for ``text`` (BM25 over Lance's own
        tokenizer, not ``lazygraph.lexical``'s: the scores differ from the snapshot's ``bm25``).
        Empty when the store has no full-text index."""
        if not self.meta.get("full_text") or k <= 0 or not text.strip():
            return []
        table = self._dataset(layout.CHUNKS).to_table(
            columns=["chunk_id", "_score"], full_text_query=text, limit=k
        )
        return _scored(table, "chunk_id", "_score", similarity=False)

    def lexical_scores(self, terms: Sequence[str], k1: float, b: float) -> ChunkScores:
        """Okapi BM25 of the chunks holding one of ``terms`` (the index's own terms, as
        ``lexical.tokenize`` cuts a query), by chunk id: the formula and statistics of the snapshot's
        ``bm25`` (``query.snapshot.lexical.bm25_scores``), read from the postings of those terms alone.
        Empty for a store without postings (an index built before chunk_terms). The scores stay in
        arrays (``ChunkScores``): a common term reaches a large share of the chunks.

        A term with more than ``serving.postings_depth`` postings is read to that depth, its
        highest-impact postings first (format 4). The best ``serving.bm25_rescore`` chunks of that read
        are then scored exactly from their own rows (format 5, ``_rescored``); a chunk below them
        scores without the terms it was not reached by. Exact to the snapshot when the depth is 0 or no
        term is that common, or when k1 and b are not those the store ordered its postings by."""
        average = float(self.meta.get("lexical", {}).get("average_length", 0.0))
        distinct = sorted(set(terms))
        if average <= 0 or not distinct:
            return _NO_SCORES
        if self._has_term_directory:
            postings = self._postings_to_depth(distinct, k1, b)
        else:
            postings = self._all_postings(distinct)
        if not postings.rows.num_rows:
            return _NO_SCORES
        rows = postings.rows
        contribution = _bm25(
            self._idf(postings.df)[postings.term],
            rows.column("count"),
            rows.column("chunk_length"),
            k1,
            b,
            average,
        )
        # Summed per chunk through a hash of the chunks' rows (format 6) or ids (sorting tens of
        # thousands of Python strings with np.unique cost five times the read). The rows are integers:
        # pandas' hash table groups them in about half the time of Arrow's dictionary encoding, which
        # was a quarter of a 500,000-posting lookup at 1M chunks; both keep first-seen order.
        scores: ChunkScores
        if self._posting_chunk_column == "chunk_row":
            codes, chunk_rows = pd.factorize(rows.column("chunk_row").to_numpy(), sort=False)
            totals = np.bincount(codes, weights=contribution, minlength=len(chunk_rows))
            scores = RowScores(chunk_rows, totals, self._ids_of_rows, self._rows_of_ids)
        else:
            keys = pc.dictionary_encode(rows.column(self._posting_chunk_column)).combine_chunks()
            totals = np.bincount(_codes(keys), weights=contribution, minlength=len(keys.dictionary))
            scores = ChunkScores(keys.dictionary, totals)
        if postings.truncated and layout.CHUNK_TERM_COUNTS in self.meta.get("datasets", {}):
            scores = self._rescored(scores, postings, k1, b, average)
        return scores

    def _idf(self, df: np.ndarray) -> np.ndarray:
        return np.log1p((self.n_chunks - df + 0.5) / (df + 0.5))

    def _rescored(
        self, scores: ChunkScores, postings: _Postings, k1: float, b: float, average: float
    ) -> ChunkScores:
        """The best ``serving.bm25_rescore`` chunks of a depth-limited read scored exactly: their own
        rows of the query's terms read from ``chunk_term_counts`` (grouped by chunk), so that a chunk
        holding a rare term of the question gets the weight of its common terms too."""
        n = min(self.settings.serving.bm25_rescore, len(scores))
        if n <= 0:
            return scores
        top = np.argpartition(-scores.scores, n - 1)[:n] if n < len(scores) else np.arange(len(scores))
        chunks = pa.array(scores.ids_at(top), pa.string())
        wanted = pc.field("chunk_id").isin(chunks) & pc.field("term").isin(postings.names)
        rows = self._dataset(layout.CHUNK_TERM_COUNTS).to_table(
            columns=["chunk_id", "term", "count", "chunk_length"], filter=wanted
        )
        if not rows.num_rows:
            return scores
        term = _positions(rows.column("term"), postings.names)
        contribution = _bm25(
            self._idf(postings.df)[term], rows.column("count"), rows.column("chunk_length"), k1, b, average
        )
        exact = np.bincount(_positions(rows.column("chunk_id"), chunks), weights=contribution, minlength=n)
        rescored = scores.scores.copy()
        rescored[top] = exact
        return scores.with_scores(rescored)

    def _all_postings(self, distinct: list[str]) -> _Postings:
        """Every posting of the terms, through the B-tree on term (a store before format 4)."""
        rows = self._filter(
            layout.CHUNK_TERMS, "term", distinct, ["term", "chunk_id", "count", "chunk_length"]
        )
        encoded = pc.dictionary_encode(rows.column("term")).combine_chunks()
        term = _codes(encoded) if rows.num_rows else np.zeros(0, np.int64)
        df = np.bincount(term)  # every posting of each term read: their number is its df
        return _Postings(rows, term, df, encoded.dictionary, truncated=False)

    def _postings_to_depth(self, distinct: list[str], k1: float, b: float) -> _Postings:
        """The first postings of each term (all of them within the depth) as rows, each row's term as
        a position among the terms found, and each term's document frequency (from the directory:
        exact however deep the read)."""
        found = self._filter(layout.TERMS, "term", distinct, ["term", "df", "first_row"])
        names = found.column("term").combine_chunks()
        if not found.num_rows:
            nothing = np.zeros(0, np.int64)
            key = (self._posting_chunk_column, _POSTING_KEY_TYPES[self._posting_chunk_column])
            empty = pa.table({c: pa.array([], t) for c, t in (key, *_POSTING_COLUMNS)})
            return _Postings(empty, nothing, nothing, names, truncated=False)
        df = np.asarray(found.column("df").to_numpy(zero_copy_only=False), dtype=np.int64)
        first = np.asarray(found.column("first_row").to_numpy(zero_copy_only=False), dtype=np.int64)
        depth = self.settings.serving.postings_depth
        lexical = self.meta.get("lexical", {})
        ordered_alike = lexical.get("k1") == k1 and lexical.get("b") == b
        read = np.minimum(df, depth) if depth and ordered_alike else df
        order = np.argsort(first)  # rows asked in store order: ranges read front to back
        columns = [self._posting_chunk_column, "count", "chunk_length"]
        table = _row_ranges(self._dataset(layout.CHUNK_TERMS), first[order], read[order], columns)
        term = np.repeat(order, read[order])  # each row's term, in the order the rows were asked
        return _Postings(table, term, df, names, truncated=bool((read < df).any()))

    @property
    def _posting_chunk_column(self) -> str:
        """How a posting names its chunk: by row number from format 6, else by id."""
        return "chunk_row" if self.meta.get("format", 0) >= 6 else "chunk_id"

    def _ids_of_rows(self, rows: np.ndarray) -> pa.Array:
        """The ids of the chunks at these rows of the chunks dataset, in the order given."""
        table = self._dataset(layout.CHUNKS).take(np.asarray(rows, dtype=np.int64), columns=["chunk_id"])
        return table.column("chunk_id").combine_chunks()

    def _rows_of_ids(self, chunk_ids: Sequence[str]) -> np.ndarray:
        """The row of each chunk id in the chunks dataset, -1 for an id it does not hold."""
        asked = pa.array([str(c) for c in chunk_ids], pa.string())
        found = self._filter(
            layout.CHUNKS, "chunk_id", list(dict.fromkeys(asked.to_pylist())), ["chunk_id", "chunk_row"]
        )
        at = pc.index_in(asked, value_set=found.column("chunk_id").combine_chunks())
        rows = found.column("chunk_row").combine_chunks().take(at)
        return np.asarray(pc.fill_null(rows, -1).to_numpy(zero_copy_only=False), dtype=np.int64)

    @property
    def _has_term_directory(self) -> bool:
        return self.meta.get("format", 0) >= 4

    @property
    def has_full_text(self) -> bool:
        return bool(self.meta.get("full_text"))

    # ---- communities -------------------------------------------------------------------------------
    def communities_of(self, chunk_ids: Sequence[str]) -> dict[str, list[Membership]]:
        """Every community (every level) of each chunk asked, by chunk id; [] for a chunk in none."""
        found, missing = self._chunk_links.split(chunk_ids)
        if missing:
            fetched: dict[str, list[Membership]] = {c: [] for c in missing}
            for row in self.chunk_links(missing).to_pylist():
                fetched[row["chunk_id"]].append(_membership(row))
            for links in fetched.values():
                links.sort()
            self._chunk_links.put_many(fetched)
            found.update(fetched)
        return {c: found[c] for c in dict.fromkeys(chunk_ids)}

    def chunks_of(self, communities: Sequence[CommunityKey]) -> dict[CommunityKey, CommunityChunks]:
        """The chunks of each community asked, by (level, community id); empty for an unknown one."""
        keys = [(int(level), str(cid)) for level, cid in communities]
        found, missing = self._community_links.split(keys)
        if missing:
            fetched: dict[CommunityKey, CommunityChunks] = {key: _NO_CHUNKS for key in missing}
            # The B-tree on community_id finds the rows; ids are unique only within a level, so rows of a
            # same-named community at another level come back too and are dropped below.
            ids = sorted({cid for _, cid in missing})
            columns = ["level", "community_id", "chunk_id", "weight"]
            rows = self._filter(self._community_links_dataset, "community_id", ids, columns)
            for key, chunks in _grouped_by_community(rows).items():
                if key in fetched:
                    fetched[key] = chunks
            self._community_links.put_many(fetched)
            found.update(fetched)
        return {key: found[key] for key in dict.fromkeys(keys)}

    @property
    def _community_links_dataset(self) -> str:
        """The links grouped by community (a format-2 store has only those grouped by chunk)."""
        return layout.COMMUNITY_CHUNKS if self.meta.get("format", 0) >= 3 else layout.CHUNK_COMMUNITIES

    def communities(self, communities: Sequence[CommunityKey]) -> list[StoredCommunity]:
        """The hierarchy rows of the communities asked (parent, size, top concepts), in the order asked."""
        keys = [(int(level), str(cid)) for level, cid in communities]
        rows = self._filter(layout.COMMUNITIES, "community_id", sorted({c for _, c in keys})).to_pylist()
        by_key = {(row["level"], row["community_id"]): StoredCommunity(**row) for row in rows}
        return [by_key[key] for key in dict.fromkeys(keys) if key in by_key]

    # ---- concepts ----------------------------------------------------------------------------------
    def nearest_concepts(self, vector: np.ndarray, k: int) -> list[Scored]:
        """The ``k`` kept concepts whose names' embeddings are most similar to ``vector`` (by concept id);
        empty when the store was built without concept vectors."""
        if not self.meta.get("concept_vectors"):
            return []
        return self._nearest(layout.CONCEPTS, "concept_id", vector, k)

    def concept_names(self, concept_ids: Sequence[str]) -> dict[str, str]:
        rows = self._filter(
            layout.CONCEPTS, "concept_id", list(dict.fromkeys(concept_ids)), ["concept_id", "name"]
        )
        return dict(zip(rows.column("concept_id").to_pylist(), rows.column("name").to_pylist(), strict=True))

    def concept_communities(self, concept_ids: Sequence[str]) -> dict[str, list[CommunityKey]]:
        """The community of each concept asked at every level, by concept id (level order)."""
        out: dict[str, list[CommunityKey]] = {c: [] for c in dict.fromkeys(concept_ids)}
        for row in self._filter(layout.CONCEPT_COMMUNITIES, "concept_id", list(out)).to_pylist():
            out[row["concept_id"]].append((row["level"], row["community_id"]))
        for links in out.values():
            links.sort()
        return out

    # ---- what the lazy search reads besides (format 7) -----------------------------------------------
    @property
    def serves_lazy(self) -> bool:
        """Whether the store holds what the lazy search reads (mentions, edges, concept name keys)."""
        return self.meta.get("format", 0) >= layout.LAZY_FORMAT

    def chunk_rows(self, chunk_ids: Sequence[str]) -> pa.Table:
        """The rows of the chunks asked (every column of ``StoredChunk`` and ``chunk_row``), in the
        store's order: the order of the index's chunks table, which the snapshot keeps too."""
        columns = [*StoredChunk._fields, "chunk_row"]
        rows = self._filter(layout.CHUNKS, "chunk_id", list(dict.fromkeys(chunk_ids)), columns)
        return rows.sort_by("chunk_row")

    def chunk_vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The unit vector of each chunk asked that has one (a zero vector was stored as none)."""
        rows = self._filter(layout.CHUNK_VECTORS, "chunk_id", list(dict.fromkeys(chunk_ids)))
        if not rows.num_rows:
            return {}
        vectors = _matrix(rows.column("vector"))
        return dict(zip(rows.column("chunk_id").to_pylist(), vectors, strict=True))

    def community_rows(self, communities: Sequence[CommunityKey]) -> pa.Table:
        """The hierarchy rows of the communities asked, in the store's order (the snapshot's)."""
        ids = sorted({str(cid) for _, cid in communities})
        rows = self._dataset(layout.COMMUNITIES).to_table(
            filter=pc.field("community_id").isin(pa.array(ids, pa.string())), with_row_id=True
        )
        wanted = pa.array([f"{int(level)}\x1f{cid}" for level, cid in communities], pa.string())
        keys = pc.binary_join_element_wise(
            pc.cast(rows.column("level"), pa.string()), rows.column("community_id"), "\x1f"
        )
        return rows.filter(pc.is_in(keys, value_set=wanted)).sort_by("_rowid").drop_columns(["_rowid"])

    def chunk_links(self, chunk_ids: Sequence[str], chunk_rows: np.ndarray | None = None) -> pa.Table:
        """The community links (chunk_id, level, community_id, weight) of the chunks asked, in the
        store's order. ``chunk_rows``, the chunks' rows where the caller read them already, saves
        looking them up (format 8: the links are then read by row number, see ``_links_of_rows``)."""
        columns = ["chunk_id", "level", "community_id", "weight"]
        asked = list(dict.fromkeys(chunk_ids))
        if layout.CHUNK_LINK_RANGES not in self.meta.get("datasets", {}):
            return self._filter(layout.CHUNK_COMMUNITIES, "chunk_id", asked, columns)
        rows = self._rows_of_ids(asked) if chunk_rows is None else np.asarray(chunk_rows, np.int64)
        return self._links_of_rows(rows[rows >= 0], columns)

    def _links_of_rows(self, chunk_rows: np.ndarray, columns: list[str]) -> pa.Table:
        """The link rows of these chunk rows, through ``chunk_link_ranges``: each chunk's links are one
        run of ``chunk_communities``, so two reads by row number replace a B-tree look-up per id."""
        dataset = self._dataset(layout.CHUNK_COMMUNITIES)
        if not len(chunk_rows):
            return dataset.schema.empty_table().select(columns)
        ranges = self._dataset(layout.CHUNK_LINK_RANGES).take(np.unique(chunk_rows))
        starts = np.asarray(ranges.column("links_start").to_numpy(zero_copy_only=False), np.int64)
        counts = np.asarray(ranges.column("links_count").to_numpy(zero_copy_only=False), np.int64)
        starts, counts = starts[counts > 0], counts[counts > 0]
        # Every row of every run, in the store's order: the runs' starts, each repeated over its run.
        firsts = np.cumsum(counts) - counts
        rows = np.arange(int(counts.sum())) + np.repeat(starts - firsts, counts)
        return dataset.take(np.sort(rows), columns=columns)

    def concept_mentions(self, chunk_ids: Sequence[str]) -> pa.Table:
        """The kept concepts each chunk asked mentions: rows (chunk_id, concept_id, count)."""
        return self._filter(layout.CHUNK_CONCEPTS, "chunk_id", list(dict.fromkeys(chunk_ids)))

    def concept_chunk_rows(self, concept_ids: Sequence[str]) -> pa.Table:
        """Every chunk mentioning each concept asked: rows (chunk_id, concept_id, count), one range of
        ``concept_chunks`` a concept (a common concept's thousands included)."""
        return self._filter(layout.CONCEPT_CHUNKS, "concept_id", list(dict.fromkeys(concept_ids)))

    def chunks_mentioning(self, concept_ids: Sequence[str], limit: int) -> pa.Table:
        """Up to ``limit`` chunks of each concept asked, most-mentioning first: rows (chunk_id,
        concept_id, count)."""
        return most_mentioning(self.concept_chunk_rows(concept_ids), limit)

    def concept_rows(self, concept_ids: Sequence[str], columns: list[str] | None = None) -> pa.Table:
        """The concepts asked (``columns``, default every one: the name's vector too where stored), in
        the store's order."""
        rows = self._dataset(layout.CONCEPTS).to_table(
            columns=columns,
            filter=pc.field("concept_id").isin(pa.array(list(dict.fromkeys(concept_ids)), pa.string())),
            with_row_id=True,
        )
        return rows.sort_by("_rowid").drop_columns(["_rowid"])

    def concepts_named(self, names: Sequence[str]) -> list[str]:
        """The ids of the kept concepts whose lower-cased name is one of ``names``."""
        rows = self._filter(layout.CONCEPTS, "name_key", list(dict.fromkeys(names)), ["concept_id"])
        return rows.column("concept_id").to_pylist()

    def concept_edges(self, concept_ids: Sequence[str]) -> pa.Table:
        """The kept edges (src, dst, weight) from each concept asked, one row per neighbour."""
        return self._filter(layout.CONCEPT_EDGES, "src", list(dict.fromkeys(concept_ids)))

    def document_frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        """How many chunks hold each term asked that the index knows (the term directory, format 4)."""
        rows = self._filter(layout.TERMS, "term", list(dict.fromkeys(terms)), ["term", "df"])
        return dict(zip(rows.column("term").to_pylist(), rows.column("df").to_pylist(), strict=True))

    # ---- Lance -------------------------------------------------------------------------------------
    def cache_stats(self) -> dict[str, dict[str, int]]:
        """Entries, hits and misses of the reader's own caches (Lance's session caches not included)."""
        caches = {
            "chunks": self._chunks,
            "chunk_links": self._chunk_links,
            "community_links": self._community_links,
        }
        return {name: {"size": len(c), "hits": c.hits, "misses": c.misses} for name, c in caches.items()}

    def _dataset(self, name: str) -> Any:
        if name in self._datasets:
            return self._datasets[name]
        with self._open_lock:  # queries in several threads may open the same dataset first
            return self._open_dataset(name)

    def _open_dataset(self, name: str) -> Any:
        if name not in self._datasets:
            import lance

            if self._session is None:
                cfg = self.settings.serving
                self._session = lance.Session(
                    index_cache_size_bytes=cfg.lance_index_cache_mb * 2**20,
                    metadata_cache_size_bytes=cfg.lance_metadata_cache_mb * 2**20,
                )
            options = layout.lance_options(self.uri, self.settings)
            self._datasets[name] = lance.dataset(
                layout.dataset_uri(self.uri, name), storage_options=options, session=self._session
            )
        return self._datasets[name]

    def _filter(
        self, name: str, column: str, values: Sequence[str], columns: list[str] | None = None
    ) -> pa.Table:
        """The rows whose ``column`` is one of ``values`` (answered by the column's B-tree index)."""
        if not values:
            return (
                self._dataset(name).schema.empty_table().select(columns or self._dataset(name).schema.names)
            )
        expression = pc.field(column).isin(pa.array(list(values), pa.string()))
        return self._dataset(name).to_table(columns=columns, filter=expression)

    def _nearest(self, name: str, key: str, vector: np.ndarray, k: int) -> list[Scored]:
        dataset = self._dataset(name)
        if k <= 0 or dataset.count_rows() == 0:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        nearest = {"column": "vector", "q": query, "k": int(k), "metric": "cosine"}
        if name in self.meta.get("vector_indexes", {}):
            nearest |= {
                "nprobes": self.settings.serving.nprobes,
                "refine_factor": self.settings.serving.refine_factor,
            }
        table = dataset.to_table(columns=[key, "_distance"], nearest=nearest)
        return _scored(table, key, "_distance", similarity=True)


_POSTING_COLUMNS = (("count", pa.int32()), ("chunk_length", pa.float32()))
_POSTING_KEY_TYPES = {"chunk_id": pa.string(), "chunk_row": pa.int32()}


class _Postings(NamedTuple):
    """Postings read for a query: rows (chunk_id, count, chunk_length), each row's term as a position
    in ``names``, each term's document frequency, and whether some term was read only to a depth."""

    rows: pa.Table
    term: np.ndarray
    df: np.ndarray
    names: pa.Array
    truncated: bool


def most_mentioning(rows: pa.Table, limit: int) -> pa.Table:
    """Of mention rows (chunk_id, concept_id, count), each concept's ``limit`` most-mentioning chunks
    (ties by chunk id)."""
    if not rows.num_rows or limit <= 0:
        return rows.slice(0, 0)
    rows = rows.sort_by([("concept_id", "ascending"), ("count", "descending"), ("chunk_id", "ascending")])
    concept = _codes(rows.column("concept_id"))
    starts = np.r_[0, np.flatnonzero(np.diff(concept)) + 1]
    rank = np.arange(len(concept)) - np.repeat(starts, np.diff(np.r_[starts, len(concept)]))
    return rows.filter(pa.array(rank < limit))


def _row_ranges(dataset: Any, starts: np.ndarray, lengths: np.ndarray, columns: list[str]) -> pa.Table:
    """The rows ``[start, start + length)`` of each range, ranges in the order given, as one table.

    A term's postings are one contiguous range: scanning it by offset and limit read a five-term query's
    postings at 1M chunks in a fifth of the time of a ``take`` of the same row numbers (p95 7.6 against
    34.7 ms), which decodes row by row."""
    parts = [
        dataset.to_table(columns=columns, offset=int(start), limit=int(length))
        for start, length in zip(starts, lengths, strict=True)
        if length > 0
    ]
    if not parts:
        return dataset.schema.empty_table().select(columns)
    return pa.concat_tables(parts)


def _bm25(
    idf: np.ndarray, count: pa.ChunkedArray, length: pa.ChunkedArray, k1: float, b: float, average: float
) -> np.ndarray:
    """Each posting's BM25 contribution: its term's idf times its weight (``term_weights``)."""
    tf = count.to_numpy(zero_copy_only=False)
    return idf * term_weights(tf, length.to_numpy(zero_copy_only=False), average, k1, b)


def _positions(values: pa.ChunkedArray, among: pa.Array) -> np.ndarray:
    """Each value's position in ``among`` (every value is there)."""
    return np.asarray(pc.index_in(values, value_set=among).to_numpy(zero_copy_only=False), dtype=np.int64)


def _codes(column: pa.ChunkedArray | pa.DictionaryArray) -> np.ndarray:
    """Each value's position among the column's distinct values (Arrow's hash, no Python strings)."""
    encoded = (
        column if isinstance(column, pa.DictionaryArray) else pc.dictionary_encode(column).combine_chunks()
    )
    return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)


def _grouped_by_community(rows: pa.Table) -> dict[CommunityKey, CommunityChunks]:
    """Link rows grouped by (level, community id), each group's chunks in id order."""
    ordered = rows.sort_by([("level", "ascending"), ("community_id", "ascending"), ("chunk_id", "ascending")])
    # Grouping without threads keeps each group's rows in the order sorted.
    groups = ordered.group_by(["level", "community_id"], use_threads=False).aggregate(
        [("chunk_id", "list"), ("weight", "list")]
    )
    chunk_lists, weight_lists = groups.column("chunk_id_list"), groups.column("weight_list")
    return {
        (int(level), str(cid)): CommunityChunks(chunk_lists[i].values, weight_lists[i].values)
        for i, (level, cid) in enumerate(
            zip(groups.column("level").to_pylist(), groups.column("community_id").to_pylist(), strict=True)
        )
    }


def _matrix(column: pa.ChunkedArray) -> np.ndarray:
    """A fixed-size-list column of float32 vectors as one (rows, dim) matrix."""
    flat = column.combine_chunks()
    dim = flat.type.list_size
    return np.asarray(flat.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim)


def _membership(row: dict[str, Any]) -> Membership:
    return Membership(int(row["level"]), row["community_id"], row["chunk_id"], float(row["weight"]))


def _scored(table: pa.Table, key: str, score: str, *, similarity: bool) -> list[Scored]:
    """Rows as (id, score), best first: a cosine distance d is turned into the similarity 1 - d."""
    ids = table.column(key).to_pylist()
    values = np.asarray(table.column(score).to_numpy(zero_copy_only=False), dtype=np.float64)
    if similarity:
        values = 1.0 - values
    order = np.argsort(-values, kind="stable")
    return [Scored(ids[i], float(values[i])) for i in order]


def _check(
    uri: str, store: str, meta: dict[str, Any], versions: dict[str, int], settings: StorageSource
) -> None:
    """Refuse a store of another format, of other versions, or of tables re-created since it was built
    (a from-scratch rebuild in the same directory restarts version numbers, the table ids change)."""
    if meta.get("format") not in layout.READABLE_FORMATS:
        raise StoreOutOfDateError(
            f"the serving store {store} has format {meta.get('format')}, this lazygraph reads formats "
            f"{', '.join(map(str, layout.READABLE_FORMATS))}; {rebuild_hint(uri)} --force"
        )
    built = {name: int(v) for name, v in meta.get("tables", {}).items()}
    if built != versions:
        raise StoreOutOfDateError(
            f"the serving store {store} was built from table versions {built}, but the index's last "
            f"complete run names {versions}; {rebuild_hint(uri)}"
        )
    handles = manifest.open_complete(uri, list(versions), versions, settings)
    if layout.table_ids(handles) != meta.get("table_ids"):
        raise StoreOutOfDateError(
            f"the tables of {uri} were re-created since its serving store {store} was built; "
            f"{rebuild_hint(uri)} --force"
        )


def _missing_message(uri: str, versions: dict[str, int], settings: StorageSource) -> str:
    if layout.store_uri(uri, versions) in layout.list_stores(uri, settings):
        # Its directory without store.json: an index run is building it (the run's manifest row comes
        # first), or a build died; `store build` waits for the run's lease, then finishes or reuses it.
        return (
            f"the serving store of {uri} for table versions {versions} is not finished: an index run "
            f"may be building it now (retry in a moment), or its build failed ({rebuild_hint(uri)}); "
            "meanwhile `query.index_source: snapshot` reads the index without it"
        )
    others = [s for s in layout.list_stores(uri, settings) if layout.read_meta(s, settings) is not None]
    if others:
        return (
            f"the index at {uri} has changed since its serving store was built (no store of table "
            f"versions {versions}); {rebuild_hint(uri)}"
        )
    return f"the index at {uri} has no serving store for its table versions {versions}; {rebuild_hint(uri)}"
