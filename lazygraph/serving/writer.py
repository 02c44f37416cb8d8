"""Building a serving store from an index's Delta tables, at the versions its manifest pins.

Every table is read batch by batch from the Delta version the last complete run recorded and written
to Lance as it is read, so the writer never holds a whole table; what it does hold is the set of chunk
ids (to drop rows of chunks outside the index, as the snapshot does, and to find the chunks that belong
to no level-0 community) and the community keys. The rows a store holds are the snapshot's: kept
concepts only, links only between chunks, concepts and communities the index holds, and the synthetic
level-0 community of the chunks without concepts.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lazygraph import manifest, tables
from lazygraph.embed.codec import decode_embeddings
from lazygraph.errors import IndexStateError
from lazygraph.serving import layout
from lazygraph.serving.earlier_vectors import EarlierVectors, find_earlier
from lazygraph.serving.scores import term_weights
from lazygraph.settings import ServingStoreSettings, Settings
from lazygraph.tables.schemas import UNASSIGNED_COMMUNITY

Encode = Callable[[list[str]], np.ndarray]

CHUNK_COLUMNS = ["chunk_id", "doc_id", "title", "ord", "text", "n_tokens"]
COMMUNITY_COLUMNS = ["community_id", "level", "parent_id", "size", "n_chunks", "top_concepts"]
CONCEPT_COLUMNS = ["concept_id", "name", "kind", "frequency", "chunk_frequency", "doc_frequency", "degree"]
# Separates level and id in the in-memory community keys (ids are unique only within a level).
_SEP = "\x1f"
# How the grouped datasets are sorted: one term's postings, one chunk's or community's links, together.
# A term's postings highest impact first, so a reader that stops at a depth keeps the best of them.
_POSTINGS_ORDER = [("term", "ascending"), ("impact", "descending"), ("chunk_id", "ascending")]
_POSTINGS_BY_CHUNK = [("chunk_id", "ascending"), ("term", "ascending")]
_BY_CHUNK = [("chunk_id", "ascending"), ("level", "ascending"), ("community_id", "ascending")]
_BY_COMMUNITY = [("community_id", "ascending"), ("level", "ascending"), ("chunk_id", "ascending")]
_MENTIONS_BY_CHUNK = [("chunk_id", "ascending"), ("concept_id", "ascending")]
# A concept's most-mentioning chunks first: a reader that wants only the best of a common concept's
# chunks stops early.
_MENTIONS_BY_CONCEPT = [("concept_id", "ascending"), ("count", "descending"), ("chunk_id", "ascending")]
_EDGES_BY_SRC = [("src", "ascending"), ("dst", "ascending")]


def build_store(
    index: str,
    settings: Settings | None = None,
    *,
    encode: Encode | None = None,
    force: bool = False,
    confirm: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Write the store of the index's last complete run (unless it exists; ``force`` rewrites it) and
    return its metadata. ``encode`` embeds concept names (None: concepts are stored without vectors).
    ``confirm`` is called just before ``store.json`` is written and raises to leave the store
    unfinished (a writer that lost its lease must not mark a store complete)."""
    settings = settings or Settings()
    uri = tables.normalise_index_uri(index)
    run, recorded = manifest.complete_versions(uri, settings)
    versions = layout.source_versions(recorded)
    missing = [n for n in layout.REQUIRED if n not in versions]
    if missing:
        raise IndexStateError(
            f"the index at {uri} has no {', '.join(missing)} in its last complete run; "
            f"rebuild it in a new directory with `lazygraph index --input DOCS --index DIR`"
        )
    store = layout.store_uri(uri, versions)
    handles = manifest.open_complete(uri, layout.SOURCES, versions, settings)
    existing = layout.read_meta(store, settings)
    # A complete store is reused only when it is of this format, of these very tables (the same versions
    # under other table ids mean the index was rebuilt from scratch in place) and holds what is asked.
    if (
        existing is not None
        and not force
        and existing.get("format") == layout.FORMAT
        and existing.get("table_ids") == layout.table_ids(handles)
        and (
            existing.get("concept_vectors")
            or encode is None
            or not settings.serving.concept_vectors
            # an index without kept concepts has no vectors to add: rebuilding would not change it
            or not existing.get("datasets", {}).get(layout.CONCEPTS)
        )
    ):
        return {**existing, "store": store, "built": False}
    if existing is not None or store in layout.list_stores(uri, settings):
        layout.delete_store(store, settings)  # an unfinished, stale or forced one: start clean
    started = time.perf_counter()
    writer = _Writer(store, handles, settings, encode)
    if writer.encode is not None and settings.serving.reuse_concept_vectors:
        writer.earlier = find_earlier(uri, store, settings, writer.encoder_key)
    written = writer.write_all()
    meta = {
        "format": layout.FORMAT,
        "index": uri,
        "run_id": run["run_id"],
        "tables": versions,
        "table_ids": layout.table_ids(handles),
        "datasets": written,
        "embedding_model": writer.embedding_model,
        "dimension": writer.dimension,
        "concept_vectors": writer.concept_dimension > 0,
        "concept_encoder": writer.encoder_key if writer.concept_dimension > 0 else None,
        "concept_vectors_reused": writer.reused_vectors,
        "vector_indexes": writer.vector_indexes,
        "full_text": writer.full_text,
        "lexical": writer.lexical,
        "lance": _lance_version(),
        "created_at": datetime.now(UTC).isoformat(),
        "seconds": round(time.perf_counter() - started, 3),
    }
    if confirm is not None:
        confirm()
    layout.write_meta(store, meta, settings)  # last: the store is complete from here on
    return {**meta, "store": store, "built": True}


def _lance_version() -> str:
    import lance

    return str(lance.__version__)


class _Writer:
    """One store being written: the datasets in order, each from its table's pinned version."""

    def __init__(
        self, store: str, handles: dict[str, Any], settings: Settings, encode: Encode | None
    ) -> None:
        self.store = store
        self.handles = handles
        self.settings = settings
        self.cfg: ServingStoreSettings = settings.serving
        self.encode = encode if self.cfg.concept_vectors else None
        # The vectors of names an earlier store encoded with the same model are taken from it.
        self.encoder_key: str | None = getattr(self.encode, "key", None)
        self.earlier: EarlierVectors | None = None
        self.reused_vectors = 0
        self.chunk_ids = pa.array([], pa.string())
        self.community_keys = pa.array([], pa.string())
        self.kept_concepts = pa.array([], pa.string())
        self.embedding_model = ""
        self.dimension = 0
        self.concept_dimension = 0
        self.vector_indexes: dict[str, dict[str, Any]] = {}
        self.full_text = False
        self.lexical: dict[str, float] = {"average_length": 0.0}
        self._n_orphans = 0
        self.link_ranges = False  # whether chunk_link_ranges was written (``chunk_link_ranges``)

    # ---- the datasets, in dependency order -------------------------------------------------------
    def write_all(self) -> dict[str, int]:
        """Write every dataset; the rows each holds (counted at the end: the synthetic community is
        appended to the communities after the links are written)."""
        self.chunks()
        self.chunk_vectors()
        self.communities()
        self.chunk_communities()
        self.concepts()
        self.concept_communities()
        self.concept_mentions()
        self.concept_edges()
        self.chunk_terms()
        optional = () if self.cfg.bm25_rescore else (layout.CHUNK_TERM_COUNTS,)
        optional += () if self.link_ranges else (layout.CHUNK_LINK_RANGES,)
        return {name: self._dataset(name).count_rows() for name in layout.DATASETS if name not in optional}

    def chunks(self) -> int:
        ids: list[pa.Array] = []

        def batches() -> Iterator[pa.RecordBatch]:
            written = 0
            for batch in self._read(tables.CHUNKS, CHUNK_COLUMNS):
                ids.append(batch.column(0))
                rows = pa.array(np.arange(written, written + batch.num_rows, dtype=np.int32))
                written += batch.num_rows
                yield pa.record_batch([*batch.columns, rows], schema=schema)

        schema = _chunk_schema()

        rows = self._write(layout.CHUNKS, schema, batches())
        self.chunk_ids = pa.concat_arrays(ids) if ids else pa.array([], pa.string())
        if rows:
            self._scalar_index(layout.CHUNKS, "chunk_id")
            self.full_text = self.cfg.full_text and self._full_text_index(layout.CHUNKS, "text")
        return rows

    def chunk_vectors(self) -> int:
        batches = self._read(tables.CHUNK_EMBEDDINGS, ["chunk_id", "embedding", "dtype", "dim", "model"])
        first = next(batches, None)
        if first is None:
            return self._write(layout.CHUNK_VECTORS, _vector_schema("chunk_id", 1), iter(()))
        self.embedding_model = str(first.column(4)[0].as_py())
        vectors = _unit(decode_embeddings(pa.Table.from_batches([first])))
        self.dimension = vectors.shape[1]
        schema = _vector_schema("chunk_id", self.dimension)

        def encoded() -> Iterator[pa.RecordBatch]:
            for batch in _chain(first, batches):
                yield from self._vector_batch(batch, schema)

        rows = self._write(layout.CHUNK_VECTORS, schema, encoded())
        if rows:
            self._scalar_index(layout.CHUNK_VECTORS, "chunk_id")
            self._vector_index(layout.CHUNK_VECTORS, rows, self.dimension)
        return rows

    def communities(self) -> int:
        keys: list[pa.Array] = []

        def batches() -> Iterator[pa.RecordBatch]:
            for batch in self._read(tables.COMMUNITIES, COMMUNITY_COLUMNS):
                keys.append(_keys(batch.column(1), batch.column(0)))
                yield batch

        rows = self._write(layout.COMMUNITIES, _community_schema(), batches())
        self.community_keys = pa.concat_arrays(keys) if keys else pa.array([], pa.string())
        return rows

    def chunk_communities(self) -> int:
        """The links whose chunk and community the index holds, then the synthetic community's: the
        chunks in no level-0 community (as ``query.snapshot.communities`` gathers them).

        Written twice, each grouped (spilled and sorted as the postings are) so that a lookup reads a
        range rather than rows scattered through the dataset: ``chunk_communities`` grouped by chunk
        (a chunk's links, for ``communities_of``) and ``community_chunks`` grouped by community (a
        community's chunks, for ``chunks_of``: thousands of rows for a large community)."""
        covered: list[pa.Array] = []
        schema = _membership_schema()

        def known_links() -> Iterator[pa.RecordBatch]:
            for batch in self._read(
                tables.CHUNK_COMMUNITIES, ["chunk_id", "level", "community_id", "weight"]
            ):
                known = pc.and_(
                    pc.is_in(batch.column(0), value_set=self.chunk_ids),
                    pc.is_in(_keys(batch.column(1), batch.column(2)), value_set=self.community_keys),
                )
                batch = batch.filter(known)
                covered.append(batch.filter(pc.equal(batch.column(1), 0)).column(0))
                yield batch.cast(schema)

        def orphans() -> Iterator[pa.RecordBatch]:
            orphaned = self._orphans(covered)  # known once every link has been read
            if len(orphaned):
                yield pa.record_batch(
                    [
                        orphaned,
                        pa.array(np.zeros(len(orphaned), np.int32)),
                        pa.array([UNASSIGNED_COMMUNITY] * len(orphaned), pa.string()),
                        pa.array(np.ones(len(orphaned), np.float64)),
                    ],
                    schema=schema,
                )

        buckets = self._buckets(self._source_rows(tables.CHUNK_COMMUNITIES))
        by_chunk = _grouped(known_links(), schema, "chunk_id", _BY_CHUNK, buckets)
        rows = self._write(layout.CHUNK_COMMUNITIES, schema, _then(by_chunk, orphans))
        # The orphans' one community is written last: its rows lie together too.
        links = self._read_store(layout.CHUNK_COMMUNITIES)
        by_community = _grouped(links, schema, "community_id", _BY_COMMUNITY, buckets)
        self._write(layout.COMMUNITY_CHUNKS, schema, by_community)
        if self._n_orphans:
            self._append_unassigned_community()
        self.chunk_link_ranges()
        if rows:
            self._scalar_index(layout.CHUNK_COMMUNITIES, "chunk_id")
            self._scalar_index(layout.COMMUNITY_CHUNKS, "community_id")
        if self._dataset(layout.COMMUNITIES).count_rows():
            self._scalar_index(layout.COMMUNITIES, "community_id")
        return rows

    def chunk_link_ranges(self) -> int:
        """Where each chunk's links lie in ``chunk_communities`` (format 8): row r of this dataset is
        chunk row r, with the first of its link rows and how many there are (0 for none), so that the
        links of chunks whose rows are known are read by row number instead of through the B-tree on
        chunk_id (about 1.1 s of a lazy query's 2.8 s working set at 1M chunks). Not written when a
        chunk's links are not one run; a reader then looks them up by id."""
        run_ids: list[pa.Array] = []
        run_starts: list[np.ndarray] = []
        run_lengths: list[np.ndarray] = []
        offset, last = 0, None
        for batch in self._read_store(layout.CHUNK_COMMUNITIES):
            ids = batch.column(0)
            if not len(ids):
                continue
            # A run starts where the chunk id changes; only the runs' first ids are looked up below.
            changed = pc.not_equal(ids.slice(1), ids.slice(0, len(ids) - 1))
            begins = np.r_[0, np.flatnonzero(changed.to_numpy(zero_copy_only=False)) + 1]
            lengths = np.diff(np.r_[begins, len(ids)])
            if last is not None and ids[0].as_py() == last:  # the previous batch's last run goes on
                run_lengths[-1][-1] += lengths[0]
                begins, lengths = begins[1:], lengths[1:]
            run_ids.append(ids.take(pa.array(begins)))
            run_starts.append(offset + begins)
            run_lengths.append(lengths)
            offset, last = offset + len(ids), ids[-1].as_py()
        n = len(self.chunk_ids)
        start = np.full(n, -1, dtype=np.int64)
        count = np.zeros(n, dtype=np.int32)
        if run_ids:
            rows = pc.index_in(pa.concat_arrays(run_ids), value_set=self.chunk_ids)
            if rows.null_count:
                return 0  # a link to a chunk the store does not hold: looked up by id
            rows = np.asarray(rows.to_numpy(zero_copy_only=False), dtype=np.int64)
            if len(np.unique(rows)) < len(rows):
                return 0  # a chunk's links in two runs: looked up by id
            start[rows] = np.concatenate(run_starts)
            count[rows] = np.concatenate(run_lengths)
        schema = pa.schema([("links_start", pa.int64()), ("links_count", pa.int32())])
        table = pa.table([pa.array(start), pa.array(count)], schema=schema)
        self.link_ranges = True
        batches = iter(table.to_batches(self.cfg.write_batch_rows))
        return self._write(layout.CHUNK_LINK_RANGES, schema, batches)

    def concepts(self) -> int:
        kept: list[pa.Array] = []

        def batches() -> Iterator[pa.RecordBatch]:
            for batch in self._read(tables.CONCEPTS, [*CONCEPT_COLUMNS, "kept"]):
                batch = batch.filter(pc.equal(batch.column(len(CONCEPT_COLUMNS)), True)).select(
                    CONCEPT_COLUMNS
                )
                if not batch.num_rows:
                    continue  # the first batch written fixes the schema, the vector width with it
                kept.append(batch.column(0))
                # The name as a query's words are matched against it (``lexical_matches``).
                batch = batch.append_column("name_key", pc.utf8_lower(batch.column(1)))
                if self.encode is None:
                    yield batch
                    continue
                vectors = self._concept_vectors(batch.column(0), batch.column(1))
                self.concept_dimension = vectors.shape[1]
                yield _with_vectors(batch, vectors)

        rows = self._write_inferred(layout.CONCEPTS, batches())
        self.kept_concepts = pa.concat_arrays(kept) if kept else pa.array([], pa.string())
        if rows:
            self._scalar_index(layout.CONCEPTS, "concept_id")
            self._scalar_index(layout.CONCEPTS, "name_key")
            if self.concept_dimension:
                self._vector_index(layout.CONCEPTS, rows, self.concept_dimension)
        return rows

    def _concept_vectors(self, ids: pa.Array, names: pa.Array) -> np.ndarray:
        """Unit vectors of the names: an earlier store's where it holds the same id and name, the
        rest encoded."""
        assert self.encode is not None
        if self.earlier is None:
            return _unit(self.encode(names.to_pylist()))
        found, vectors = self.earlier.lookup(ids, names)
        missing = np.flatnonzero(~found)
        if len(missing):
            fresh = _unit(self.encode(names.take(pa.array(missing)).to_pylist()))
            if fresh.shape[1] != vectors.shape[1]:
                raise IndexStateError(
                    f"the concept vectors of {self.earlier.store} have {vectors.shape[1]} dimensions and "
                    f"the embedding model gives {fresh.shape[1]}; delete that store and run "
                    "`lazygraph store build --force`"
                )
            vectors[missing] = fresh
        self.reused_vectors += len(ids) - len(missing)
        return vectors

    def concept_communities(self) -> int:
        schema = pa.schema(
            [("concept_id", pa.string()), ("level", pa.int32()), ("community_id", pa.string())]
        )

        def batches() -> Iterator[pa.RecordBatch]:
            for batch in self._read(tables.CONCEPT_COMMUNITIES, ["concept_id", "level", "community_id"]):
                known = pc.and_(
                    pc.is_in(batch.column(0), value_set=self.kept_concepts),
                    pc.is_in(_keys(batch.column(1), batch.column(2)), value_set=self.community_keys),
                )
                yield batch.filter(known).cast(schema)

        rows = self._write(layout.CONCEPT_COMMUNITIES, schema, batches())
        if rows:
            self._scalar_index(layout.CONCEPT_COMMUNITIES, "concept_id")
        return rows

    def concept_mentions(self) -> int:
        """The mentions of kept concepts by chunks of the index (as ``query.snapshot.concepts`` keeps
        them), written twice: grouped by chunk (``chunk_concepts``: the concepts a chunk mentions) and
        by concept, most-mentioning chunk first (``concept_chunks``: the chunks a concept brings in)."""
        schema = _mention_schema()

        def known() -> Iterator[pa.RecordBatch]:
            for batch in self._read(tables.MENTIONS, ["chunk_id", "concept_id", "count"]):
                held = pc.and_(
                    pc.is_in(batch.column(0), value_set=self.chunk_ids),
                    pc.is_in(batch.column(1), value_set=self.kept_concepts),
                )
                yield batch.filter(held).cast(schema)

        buckets = self._buckets(self._source_rows(tables.MENTIONS))
        rows = self._write(
            layout.CHUNK_CONCEPTS, schema, _grouped(known(), schema, "chunk_id", _MENTIONS_BY_CHUNK, buckets)
        )
        by_concept = _grouped(
            self._read_store(layout.CHUNK_CONCEPTS), schema, "concept_id", _MENTIONS_BY_CONCEPT, buckets
        )
        self._write(layout.CONCEPT_CHUNKS, schema, by_concept)
        if rows:
            self._scalar_index(layout.CHUNK_CONCEPTS, "chunk_id")
            self._scalar_index(layout.CONCEPT_CHUNKS, "concept_id")
        return rows

    def concept_edges(self) -> int:
        """The kept edges between kept concepts, once in each direction, grouped by ``src``: a concept's
        neighbours are one lookup (the snapshot's ``concept_adjacency``)."""
        schema = _edge_schema()

        def both_ways() -> Iterator[pa.RecordBatch]:
            for batch in self._read(tables.EDGES, ["src", "dst", "weight", "kept"]):
                between_kept = pc.and_(
                    pc.is_in(batch.column(0), value_set=self.kept_concepts),
                    pc.is_in(batch.column(1), value_set=self.kept_concepts),
                )
                held = pc.and_(pc.equal(batch.column(3), True), between_kept)
                batch = batch.filter(held)
                src, dst, weight = batch.column(0), batch.column(1), batch.column(2)
                yield pa.record_batch([src, dst, weight], schema=schema)
                yield pa.record_batch([dst, src, weight], schema=schema)

        buckets = self._buckets(2 * self._source_rows(tables.EDGES))
        rows = self._write(
            layout.CONCEPT_EDGES, schema, _grouped(both_ways(), schema, "src", _EDGES_BY_SRC, buckets)
        )
        if rows:
            self._scalar_index(layout.CONCEPT_EDGES, "src")
        return rows

    def chunk_terms(self) -> int:
        """The BM25 postings in the index's own terms (``lexical.tokenize``, as the snapshot scores):
        one row per term of a chunk with its count, the chunk's length in terms and the posting's
        impact, and a directory of the terms (``terms``: where each term's rows start and how many).

        The rows are grouped by term (``_grouped``), so that one term's postings are one range of rows
        (scattered, 20,000 postings took about 200 ms at 100,000 chunks), and within a term ordered by
        impact, the BM25 term weight without its idf under the ``lexical`` settings' k1 and b. A common
        term's postings then start with the chunks it weighs most in, and a reader can stop at a depth
        (``serving.postings_depth``) instead of reading a share of the whole index. Two passes over the
        table: the chunk lengths first (an array beside the chunk ids), then the rows."""
        lengths = np.zeros(len(self.chunk_ids), np.float64)
        n_rows = 0
        for batch in self._read(tables.CHUNK_TERMS, ["chunk_id", "count"]):
            at = self._chunk_positions(batch.column(0))
            known = at >= 0
            n_rows += int(known.sum())
            counts = batch.column(1).to_numpy(zero_copy_only=False)[known]
            lengths += np.bincount(at[known], weights=counts, minlength=len(lengths))
        average = float(lengths.mean()) if len(lengths) and n_rows else 0.0
        k1, b = self.settings.lexical.k1, self.settings.lexical.b
        schema = _postings_schema()

        def postings() -> Iterator[pa.RecordBatch]:
            for batch in self._read(tables.CHUNK_TERMS, ["term", "chunk_id", "count"]):
                at = self._chunk_positions(batch.column(1))
                known = at >= 0
                rows = batch.filter(pa.array(known))
                length = lengths[at[known]]
                tf = rows.column(2).to_numpy(zero_copy_only=False).astype(np.float64)
                impact = term_weights(tf, length, average, k1, b).astype(np.float32)
                columns = [
                    *rows.columns,
                    pa.array(length.astype(np.float32)),
                    pa.array(impact),
                    pa.array(at[known].astype(np.int32)),
                ]
                yield pa.record_batch(columns, schema=schema)

        directory = _TermDirectory()
        grouped = _grouped(postings(), schema, "term", _POSTINGS_ORDER, self._buckets(n_rows))
        rows = self._write(layout.CHUNK_TERMS, schema, directory.follow(grouped))
        self._write(layout.TERMS, _terms_schema(), iter(directory.batches()))
        self.lexical = {"average_length": average if rows else 0.0, "k1": k1, "b": b}
        if rows:
            self._scalar_index(layout.TERMS, "term")
        if self.cfg.bm25_rescore:
            # The same rows grouped by chunk: a chunk's own terms, to score the best of a depth-limited
            # read exactly (``ServingStore._rescored``). Off by default: a third pass over the postings
            # and their size again on disk.
            by_chunk = _grouped(postings(), schema, "chunk_id", _POSTINGS_BY_CHUNK, self._buckets(n_rows))
            self._write(layout.CHUNK_TERM_COUNTS, schema, by_chunk)
            if rows:
                self._scalar_index(layout.CHUNK_TERM_COUNTS, "chunk_id")
        return rows

    # ---- pieces ------------------------------------------------------------------------------------
    def _source_rows(self, name: str) -> int:
        handle = self.handles.get(name)
        return 0 if handle is None else tables.arrow_dataset(handle, self.settings).count_rows()

    def _buckets(self, rows: int) -> int:
        """How many spilled buckets sort ``rows`` rows about ``serving.sort_rows`` at a time."""
        return max(1, math.ceil(rows / self.cfg.sort_rows))

    def _chunk_positions(self, chunk_ids: pa.Array) -> np.ndarray:
        """Each id's position among the store's chunks (-1 for a chunk the index does not hold)."""
        at = pc.index_in(chunk_ids, value_set=self.chunk_ids)
        return np.asarray(pc.fill_null(at, -1).to_numpy(zero_copy_only=False), dtype=np.int64)

    def _orphans(self, covered: Sequence[pa.Array]) -> pa.Array:
        if not len(self.chunk_ids):
            return pa.array([], pa.string())
        members = pa.concat_arrays(list(covered)) if covered else pa.array([], pa.string())
        orphans = self.chunk_ids.filter(pc.invert(pc.is_in(self.chunk_ids, value_set=members)))
        self._n_orphans = len(orphans)
        return orphans

    def _append_unassigned_community(self) -> None:
        """The synthetic level-0 community the orphans were linked to, after the real ones."""
        import lance

        row = pa.table(
            {
                "community_id": [UNASSIGNED_COMMUNITY],
                "level": pa.array([0], pa.int32()),
                "parent_id": pa.array([None], pa.string()),
                "size": pa.array([0], pa.int64()),
                "n_chunks": pa.array([self._n_orphans], pa.int64()),
                "top_concepts": pa.array([[]], pa.list_(pa.string())),
            },
            schema=_community_schema(),
        )
        lance.write_dataset(
            row, self._uri(layout.COMMUNITIES), mode="append", storage_options=self._options()
        )

    def _vector_batch(self, batch: pa.RecordBatch, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        """A batch of chunk_embeddings rows as unit float32 vectors, for chunks of the index only.

        A zero vector has no direction (cosine is undefined): it is left out, and such a chunk is never
        a nearest neighbour (in the snapshot it scores 0)."""
        known = pc.is_in(batch.column(0), value_set=self.chunk_ids)
        batch = batch.filter(known)
        if not batch.num_rows:
            return
        vectors = _unit(decode_embeddings(pa.Table.from_batches([batch])))
        if vectors.shape[1] != self.dimension:
            raise IndexStateError(
                f"chunk_embeddings mixes dimensions ({vectors.shape[1]} and {self.dimension}); "
                "re-embed the index with one model before building its serving store"
            )
        nonzero = np.linalg.norm(vectors, axis=1) > 0
        ids = batch.column(0).filter(pa.array(nonzero))
        yield pa.record_batch([ids, _fixed(vectors[nonzero])], schema=schema)

    def _read(self, name: str, columns: list[str]) -> Iterator[pa.RecordBatch]:
        """The table's batches at its pinned version (none for a table the run did not have)."""
        handle = self.handles.get(name)
        if handle is None:
            return iter(())
        dataset = tables.arrow_dataset(handle, self.settings)
        return iter(dataset.to_batches(columns=columns, batch_size=self.cfg.write_batch_rows))

    def _read_store(self, name: str) -> Iterator[pa.RecordBatch]:
        """A dataset this writer has written, batch by batch."""
        return iter(self._dataset(name).to_batches(batch_size=self.cfg.write_batch_rows))

    def _write(self, name: str, schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> int:
        import lance

        reader = pa.RecordBatchReader.from_batches(schema, (b.cast(schema) for b in batches))
        dataset = lance.write_dataset(reader, self._uri(name), mode="create", storage_options=self._options())
        return dataset.count_rows()

    def _write_inferred(self, name: str, batches: Iterator[pa.RecordBatch]) -> int:
        """Like ``_write``, with the schema of the first batch (the vector width is known only then)."""
        first = next(batches, None)
        if first is None:
            columns = [(c, _concept_type(c)) for c in CONCEPT_COLUMNS]
            return self._write(name, pa.schema([*columns, ("name_key", pa.string())]), iter(()))
        return self._write(name, first.schema, _chain(first, batches))

    def _uri(self, name: str) -> str:
        return layout.dataset_uri(self.store, name)

    def _options(self) -> dict[str, str] | None:
        return layout.lance_options(self.store, self.settings)

    def _dataset(self, name: str) -> Any:
        import lance

        return lance.dataset(self._uri(name), storage_options=self._options())

    def _scalar_index(self, name: str, column: str) -> None:
        # A B-tree turns `column IN (...)` into index look-ups instead of a scan of the column.
        self._dataset(name).create_scalar_index(column, index_type="BTREE")

    def _full_text_index(self, name: str, column: str) -> bool:
        """An inverted (BM25) index, where this Lance has one; False where it does not."""
        try:
            self._dataset(name).create_scalar_index(column, index_type="INVERTED")
        except (ValueError, NotImplementedError, RuntimeError, TypeError):
            return False
        return True

    def _vector_index(self, name: str, rows: int, dim: int) -> None:
        """IVF-PQ from ``vector_index_min_rows`` rows; below, lookups scan the vectors exactly."""
        if rows < self.cfg.vector_index_min_rows:
            return
        partitions = self.cfg.ivf_partitions or max(1, round(math.sqrt(rows)))
        sub_vectors = self.cfg.pq_sub_vectors or (dim // 8 if dim % 8 == 0 else 1)
        if dim % sub_vectors:
            raise IndexStateError(
                f"serving.pq_sub_vectors={sub_vectors} does not divide the vector dimension {dim}"
            )
        self._dataset(name).create_index(
            "vector",
            index_type="IVF_PQ",
            metric="cosine",
            num_partitions=partitions,
            num_sub_vectors=sub_vectors,
        )
        self.vector_indexes[name] = {"type": "IVF_PQ", "partitions": partitions, "sub_vectors": sub_vectors}


# ---- Arrow helpers -------------------------------------------------------------------------------------
def _grouped(
    batches: Iterator[pa.RecordBatch], schema: pa.Schema, key: str, order: list[tuple[str, str]], buckets: int
) -> Iterator[pa.RecordBatch]:
    """The rows of ``batches`` with equal ``key`` together, sorted by ``order`` within each bucket.

    They are spilled to local Arrow files in ``buckets`` by a hash of the key (all rows of one key land
    in one bucket), then each bucket is read whole, sorted in memory and yielded in turn: one bucket in
    memory at a time, so a table of any size is grouped in bounded memory (``serving.sort_rows``)."""
    import pyarrow.ipc as ipc

    with tempfile.TemporaryDirectory(prefix="lazygraph-store-sort-") as spill:
        files = [Path(spill) / f"{b}.arrow" for b in range(buckets)]
        writers = [ipc.new_file(str(f), schema) for f in files]
        try:
            for batch in batches:
                if buckets == 1:
                    writers[0].write_batch(batch)
                    continue
                bucket = _buckets_of(batch.column(schema.get_field_index(key)), buckets)
                for b in np.unique(bucket):
                    writers[b].write_batch(batch.filter(pa.array(bucket == b)))
        finally:
            for writer in writers:
                writer.close()
        for f in files:
            with ipc.open_file(str(f)) as reader:
                table = reader.read_all()
            yield from table.sort_by(order).cast(schema).to_batches()


class _TermDirectory:
    """Follows the grouped postings on their way to the store and records, per term, the row its
    postings start at and how many there are (the rows of one term are adjacent; a term's rows may
    be split across batches, so runs are merged at the end)."""

    def __init__(self) -> None:
        self._terms: list[pa.Array] = []
        self._runs: list[np.ndarray] = []

    def follow(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            terms = batch.column(0)
            if len(terms):
                changed = pc.not_equal(terms.slice(1), terms.slice(0, len(terms) - 1))
                starts = np.flatnonzero(np.concatenate([[True], changed.to_numpy(zero_copy_only=False)]))
                self._terms.append(terms.take(pa.array(starts)))
                self._runs.append(np.diff(np.append(starts, len(terms))))
            yield batch

    def batches(self) -> list[pa.RecordBatch]:
        if not self._terms:
            return []
        terms = pa.concat_arrays(self._terms)
        runs = np.concatenate(self._runs)
        first = np.ones(len(terms), bool)
        first[1:] = ~pc.equal(terms.slice(1), terms.slice(0, len(terms) - 1)).to_numpy(zero_copy_only=False)
        starts = np.flatnonzero(first)
        df = np.add.reduceat(runs, starts)
        first_row = np.concatenate([[0], np.cumsum(df)[:-1]])
        columns = [terms.take(pa.array(starts)), pa.array(df, pa.int64()), pa.array(first_row, pa.int64())]
        return [pa.record_batch(columns, schema=_terms_schema())]


def _buckets_of(keys: pa.Array, buckets: int) -> np.ndarray:
    """Each row's bucket, from a hash of its key. hash() of a str is fixed within this process, which is
    all the buckets need; it is taken once per distinct key of the batch (a batch of postings holds
    each term many times, each chunk id a hundred times), not once per row."""
    encoded = pc.dictionary_encode(keys)
    distinct = encoded.dictionary.to_pylist()
    per_key = np.fromiter((hash(v) % buckets for v in distinct), np.int64, len(distinct))
    return per_key[np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)]


def _then(
    first: Iterator[pa.RecordBatch], rest: Callable[[], Iterator[pa.RecordBatch]]
) -> Iterator[pa.RecordBatch]:
    """``first``'s batches, then ``rest()``'s (called only once ``first`` is exhausted)."""
    yield from first
    yield from rest()


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def _keys(levels: pa.Array, ids: pa.Array) -> pa.Array:
    """ "level<sep>id" keys of communities (ids are unique only within a level)."""
    return pc.binary_join_element_wise(pc.cast(levels, pa.string()), pc.cast(ids, pa.string()), _SEP)


def _unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero): cosine is then a dot product."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def _fixed(vectors: np.ndarray) -> pa.FixedSizeListArray:
    dim = vectors.shape[1]
    return pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), dim)


def _with_vectors(batch: pa.RecordBatch, vectors: np.ndarray) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [*batch.columns, _fixed(vectors)], names=[*batch.schema.names, "vector"]
    )


def _vector_schema(key: str, dim: int) -> pa.Schema:
    return pa.schema([(key, pa.string()), ("vector", pa.list_(pa.float32(), dim))])


def _chunk_schema() -> pa.Schema:
    """The chunks' columns, and each chunk's row number (how a posting names its chunk: a reader sums
    a query's postings by these integers instead of hashing hundreds of thousands of ids)."""
    spec = {f.name: f.type for f in tables.schemas.CHUNKS.schema}
    return pa.schema([*((c, spec[c]) for c in CHUNK_COLUMNS), ("chunk_row", pa.int32())])


def _community_schema() -> pa.Schema:
    spec = {f.name: f.type for f in tables.schemas.COMMUNITIES.schema}
    return pa.schema([(c, spec[c]) for c in COMMUNITY_COLUMNS])


def _postings_schema() -> pa.Schema:
    return pa.schema(
        [
            ("term", pa.string()),
            ("chunk_id", pa.string()),
            ("count", pa.int32()),
            ("chunk_length", pa.float32()),
            ("impact", pa.float32()),
            ("chunk_row", pa.int32()),
        ]
    )


def _terms_schema() -> pa.Schema:
    return pa.schema([("term", pa.string()), ("df", pa.int64()), ("first_row", pa.int64())])


def _mention_schema() -> pa.Schema:
    return pa.schema([("chunk_id", pa.string()), ("concept_id", pa.string()), ("count", pa.int32())])


def _edge_schema() -> pa.Schema:
    return pa.schema([("src", pa.string()), ("dst", pa.string()), ("weight", pa.float64())])


def _membership_schema() -> pa.Schema:
    return tables.schemas.CHUNK_COMMUNITIES.schema


def _concept_type(column: str) -> pa.DataType:
    return {f.name: f.type for f in tables.schemas.CONCEPTS.schema}[column]
