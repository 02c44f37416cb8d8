"""A read-only, in-memory snapshot of what querying needs, loaded once per process from the Delta tables.

Everything is held as numpy arrays indexed by dense integers (chunk index, community index, concept
index) so that ranking a query against the whole corpus is a handful of vectorised operations:

- chunks: ids, doc ids, titles, texts, token counts, and the unit-length embedding matrix;
- communities: level, parent and children (CSR), top concept names, and the chunks of each community
  (CSR, every level);
- concepts: names, chunk -> concepts and concept -> chunks (CSR), the kept-edge adjacency (CSR) and
  the community of every concept per level.

Chunks that belong to no level-0 community (no kept concept) are gathered in one synthetic level-0
community, so that the graph search can still reach them. Tables are read at the versions the index's
last complete run recorded in its manifest (lazygraph.manifest), and snapshots are cached per index URI
and those versions: a process that answers many queries reads the tables once.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lazygraph import manifest, tables
from lazygraph.errors import IndexStateError

UNASSIGNED_COMMUNITY = "(chunks without concepts)"

_REQUIRED = (tables.CHUNKS, tables.CHUNK_EMBEDDINGS)
_OPTIONAL = (
    tables.CONCEPTS,
    tables.MENTIONS,
    tables.EDGES,
    tables.COMMUNITIES,
    tables.CONCEPT_COMMUNITIES,
    tables.CHUNK_COMMUNITIES,
)


@dataclass(frozen=True)
class CSR:
    """Rows of variable length: row i is ``indices[indptr[i]:indptr[i + 1]]``."""

    indptr: np.ndarray
    indices: np.ndarray
    weights: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return len(self.indptr) - 1

    def row(self, i: int) -> np.ndarray:
        return self.indices[self.indptr[i] : self.indptr[i + 1]]

    def row_lengths(self) -> np.ndarray:
        return np.diff(self.indptr)

    def row_ids(self) -> np.ndarray:
        """The row of every entry (the inverse of ``indptr``)."""
        return np.repeat(np.arange(self.n_rows, dtype=np.int64), self.row_lengths())

    @staticmethod
    def build(rows: np.ndarray, cols: np.ndarray, n_rows: int, weights: np.ndarray | None = None) -> CSR:
        order = np.argsort(rows, kind="stable")
        counts = np.bincount(rows, minlength=n_rows) if len(rows) else np.zeros(n_rows, dtype=np.int64)
        indptr = np.zeros(n_rows + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        w = None if weights is None else np.asarray(weights, dtype=np.float32)[order]
        return CSR(indptr, np.asarray(cols, dtype=np.int64)[order], w)


@dataclass
class IndexSnapshot:
    uri: str
    versions: tuple[tuple[str, int], ...]
    # chunks
    chunk_ids: np.ndarray
    chunk_doc_ids: np.ndarray
    chunk_titles: np.ndarray
    chunk_texts: np.ndarray
    chunk_tokens: np.ndarray
    embeddings: np.ndarray
    embedding_model: str
    # communities
    community_ids: np.ndarray
    community_level: np.ndarray
    community_parent: np.ndarray
    community_top_concepts: list[list[str]]
    community_children: CSR
    community_chunks: CSR
    n_levels: int
    # concepts
    concept_ids: np.ndarray
    concept_names: np.ndarray
    chunk_concepts: CSR
    concept_chunks: CSR
    concept_adjacency: CSR
    concept_community: np.ndarray  # (n_levels, n_concepts), -1 where unknown
    chunk_primary_community: np.ndarray  # (n_levels, n_chunks): the community holding most of its mentions
    _concept_vectors: np.ndarray | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _chunk_index: dict[str, int] | None = field(default=None, repr=False)
    _concept_name_index: dict[str, int] | None = field(default=None, repr=False)

    # ---- sizes and lookups ------------------------------------------------------------------------
    @property
    def n_chunks(self) -> int:
        return len(self.chunk_ids)

    @property
    def n_communities(self) -> int:
        return len(self.community_ids)

    @property
    def n_concepts(self) -> int:
        return len(self.concept_ids)

    def roots(self) -> np.ndarray:
        """Level-0 communities (including the synthetic one for chunks without concepts)."""
        return np.flatnonzero(self.community_level == 0)

    def similarities(self, vector: np.ndarray) -> np.ndarray:
        """Cosine similarity of every chunk to a unit-length vector (the embeddings are unit length)."""
        return self.embeddings @ np.asarray(vector, dtype=np.float32)

    def passage(self, chunk: int) -> str:
        """The chunk as every prompt quotes it: its title on the first line, then its text."""
        title = str(self.chunk_titles[chunk] or "")
        text = str(self.chunk_texts[chunk])
        return f"{title}\n{text}" if title else text

    def chunk_index(self) -> dict[str, int]:
        if self._chunk_index is None:
            self._chunk_index = {cid: i for i, cid in enumerate(self.chunk_ids.tolist())}
        return self._chunk_index

    def concept_name_index(self) -> dict[str, int]:
        if self._concept_name_index is None:
            self._concept_name_index = {name.lower(): i for i, name in enumerate(self.concept_names.tolist())}
        return self._concept_name_index

    def describe_community(self, c: int) -> str:
        concepts = ", ".join(self.community_top_concepts[c][:4])
        return f"L{int(self.community_level[c])}:{self.community_ids[c]}" + (
            f" [{concepts}]" if concepts else ""
        )

    # ---- concept-name embeddings (computed once, cached on disk) ------------------------------------
    def concept_vectors(
        self, encode: Callable[[list[str]], np.ndarray], cache_dir: Path | None
    ) -> np.ndarray:
        """Unit vectors of the concept names; embedded on first use, then read from ``cache_dir``."""
        with self._lock:
            if self._concept_vectors is not None:
                return self._concept_vectors
            path = None
            if cache_dir is not None:
                key = hashlib.sha256(
                    repr((self.uri, self.versions, self.embedding_model)).encode()
                ).hexdigest()
                path = Path(cache_dir) / f"concept-vectors-{key[:24]}.npy"
                if path.is_file():
                    cached = np.load(path)
                    if cached.shape[0] == self.n_concepts:
                        self._concept_vectors = cached
                        return cached
            names = self.concept_names.tolist()
            vectors = np.asarray(encode(names), dtype=np.float32) if names else np.zeros((0, 1), np.float32)
            if path is not None and len(names):
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".tmp.npy")
                np.save(tmp, vectors)
                tmp.replace(path)
            self._concept_vectors = vectors
            return vectors


# ---- loading -----------------------------------------------------------------------------------------
_CACHE: dict[tuple, IndexSnapshot] = {}
_CACHE_LOCK = threading.Lock()


def load_snapshot(index: str) -> IndexSnapshot:
    """The snapshot of ``index`` as of its last complete indexing run (cached per process).

    Every table is read at the version that run recorded in the manifest, never at its latest: a run
    in progress (or killed) may have written some tables and not others. The cache key is those
    versions, so a process sees a new snapshot once a later run completes.
    """
    uri = tables.normalise_index_uri(index)
    run, recorded = manifest.complete_versions(uri)
    versions = tuple(sorted((n, v) for n, v in recorded.items() if n in _REQUIRED + _OPTIONAL))
    missing = [n for n in _REQUIRED if n not in recorded]
    if missing:
        raise IndexStateError(
            f"the index at {uri} has no {', '.join(missing)} in its last complete run; "
            f"rebuild it in a new directory with `lazygraph index --input DOCS --index DIR`"
        )
    key = (uri, run["run_id"], versions)  # the run too: a directory rebuilt from scratch reuses versions
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
    handles = manifest.open_complete(uri, _REQUIRED + _OPTIONAL, recorded)
    arrow = {name: dt.to_pyarrow_table() for name, dt in handles.items()}
    snapshot = build_snapshot(uri, versions, arrow)
    with _CACHE_LOCK:
        _CACHE[key] = snapshot
    return snapshot


def clear_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


def _strings(table: pa.Table, column: str) -> np.ndarray:
    return np.asarray(table.column(column).to_pylist(), dtype=object)


def _positions(keys: pa.Array | pa.ChunkedArray, universe: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Index of every key in ``universe`` (-1 where absent)."""
    idx = pc.index_in(keys, value_set=pa.array(universe) if not isinstance(universe, pa.Array) else universe)
    return np.asarray(idx.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


def _level_keys(levels: pa.ChunkedArray | pa.Array, ids: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Composite "level/id" keys: community ids need only be unique within a level."""
    joined = pc.binary_join_element_wise(pc.cast(levels, pa.string()), pc.cast(ids, pa.string()), "\x1f")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def decode_embeddings(table: pa.Table) -> np.ndarray:
    """(n, dim) float32 from the binary column, fast when all rows share a dtype and dimension."""
    n = table.num_rows
    if n == 0:
        return np.zeros((0, 0), dtype=np.float32)
    dtypes = set(table.column("dtype").to_pylist())
    dims = set(table.column("dim").to_pylist())
    col = table.column("embedding").combine_chunks()
    if not (pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type)):
        col = col.cast(pa.large_binary())  # e.g. binary_view from newer readers: offsets needed below
    if len(dtypes) == 1 and len(dims) == 1 and col.null_count == 0:
        dtype = np.dtype(dtypes.pop()).newbyteorder("<")
        dim = int(dims.pop())
        offset_type = np.int64 if pa.types.is_large_binary(col.type) else np.int32
        offsets = np.frombuffer(col.buffers()[1], dtype=offset_type)[col.offset : col.offset + n + 1]
        data = np.frombuffer(col.buffers()[2], dtype=np.uint8)
        if np.all(np.diff(offsets) == dim * dtype.itemsize):
            raw = data[offsets[0] : offsets[-1]]
            return raw.view(dtype).reshape(n, dim).astype(np.float32)
    # Mixed storage: decode row by row (rare: an index appended with different settings).
    dim = max(int(d) for d in table.column("dim").to_pylist())
    out = np.zeros((n, dim), dtype=np.float32)
    for i, (blob, dt, d) in enumerate(
        zip(col.to_pylist(), table.column("dtype").to_pylist(), table.column("dim").to_pylist(), strict=True)
    ):
        if blob is not None:
            out[i, : int(d)] = np.frombuffer(blob, dtype=np.dtype(dt).newbyteorder("<"))
    return out


def _empty_table(names: list[str]) -> pa.Table:
    return pa.table({n: pa.array([], pa.string()) for n in names})


def build_snapshot(uri: str, versions: tuple, arrow: dict[str, pa.Table]) -> IndexSnapshot:
    """Turn the Arrow tables of an index into a snapshot (also used by tests with in-memory tables)."""
    chunks = arrow[tables.CHUNKS]
    n = chunks.num_rows
    chunk_ids_arr = chunks.column("chunk_id").combine_chunks() if n else pa.array([], pa.string())

    # -- embeddings, aligned with the chunks table
    emb = arrow[tables.CHUNK_EMBEDDINGS]
    vectors = decode_embeddings(emb)
    dim = vectors.shape[1] if vectors.size else 0
    embeddings = np.zeros((n, dim), dtype=np.float32)
    model = ""
    if emb.num_rows:
        pos = _positions(emb.column("chunk_id"), chunk_ids_arr)
        ok = pos >= 0
        embeddings[pos[ok]] = vectors[ok]
        model = str(emb.column("model")[0].as_py()) if "model" in emb.column_names else ""
        norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
        np.divide(embeddings, norms, out=embeddings, where=norms > 0)
    if n and not emb.num_rows:
        raise IndexStateError(f"index {uri} has chunks but no chunk embeddings; re-run `lazygraph index`")

    # -- communities (+ the synthetic level-0 community for chunks without any)
    comm = arrow.get(tables.COMMUNITIES)
    chunk_comm = arrow.get(tables.CHUNK_COMMUNITIES)
    if comm is None or comm.num_rows == 0:
        comm = pa.table(
            {
                "community_id": pa.array([], pa.string()),
                "level": pa.array([], pa.int32()),
                "parent_id": pa.array([], pa.string()),
                "top_concepts": pa.array([], pa.list_(pa.string())),
            }
        )
    n_real = comm.num_rows
    comm_keys = (
        _level_keys(comm.column("level"), comm.column("community_id"))
        if n_real
        else pa.array([], pa.string())
    )
    level = (
        np.asarray(comm.column("level").to_numpy(zero_copy_only=False), dtype=np.int32)
        if n_real
        else np.zeros(0, np.int32)
    )
    parent = np.full(n_real, -1, dtype=np.int64)
    if n_real:
        parent_keys = _level_keys(
            pc.subtract(comm.column("level"), 1), comm.column("parent_id").fill_null("")
        )
        parent = _positions(parent_keys, comm_keys)
        parent[level == 0] = -1
    top = [list(t or []) for t in comm.column("top_concepts").to_pylist()] if n_real else []
    community_ids = _strings(comm, "community_id") if n_real else np.zeros(0, dtype=object)
    n_levels = int(level.max()) + 1 if n_real else 1

    rows = np.zeros(0, np.int64)
    cols = np.zeros(0, np.int64)
    weights = np.zeros(0, np.float32)
    if chunk_comm is not None and chunk_comm.num_rows and n_real:
        rows = _positions(
            _level_keys(chunk_comm.column("level"), chunk_comm.column("community_id")), comm_keys
        )
        cols = _positions(chunk_comm.column("chunk_id"), chunk_ids_arr)
        weights = np.asarray(chunk_comm.column("weight").to_numpy(zero_copy_only=False), dtype=np.float32)
        ok = (rows >= 0) & (cols >= 0)
        rows, cols, weights = rows[ok], cols[ok], weights[ok]

    covered = np.zeros(n, dtype=bool)
    if len(rows):
        covered[cols[level[rows] == 0]] = True
    orphans = np.flatnonzero(~covered)
    n_comm = n_real
    if len(orphans):
        n_comm += 1
        community_ids = np.append(community_ids, UNASSIGNED_COMMUNITY)
        level = np.append(level, np.int32(0))
        parent = np.append(parent, -1)
        top.append([])
        rows = np.concatenate([rows, np.full(len(orphans), n_real, dtype=np.int64)])
        cols = np.concatenate([cols, orphans])
        weights = np.concatenate([weights, np.ones(len(orphans), dtype=np.float32)])
    community_chunks = CSR.build(rows, cols, n_comm, weights)
    has_parent = parent >= 0
    children = CSR.build(parent[has_parent], np.flatnonzero(has_parent), n_comm)

    # primary community of each chunk per level: the one with the largest weight
    primary = np.full((n_levels, n), -1, dtype=np.int64)
    if len(rows):
        order = np.lexsort((weights, rows))  # ascending weight: the last write per (level, chunk) wins
        primary[level[rows[order]], cols[order]] = rows[order]

    # -- concepts
    concepts = arrow.get(tables.CONCEPTS)
    if concepts is not None and concepts.num_rows and "kept" in concepts.column_names:
        concepts = concepts.filter(pc.equal(concepts.column("kept"), True))
    if concepts is None or concepts.num_rows == 0:
        concepts = _empty_table(["concept_id", "name"])
    concept_ids_arr = concepts.column("concept_id").combine_chunks()
    n_concepts = concepts.num_rows

    chunk_concepts = CSR.build(np.zeros(0, np.int64), np.zeros(0, np.int64), n)
    concept_chunks = CSR.build(np.zeros(0, np.int64), np.zeros(0, np.int64), n_concepts)
    mentions = arrow.get(tables.MENTIONS)
    if mentions is not None and mentions.num_rows and n_concepts:
        m_chunk = _positions(mentions.column("chunk_id"), chunk_ids_arr)
        m_concept = _positions(mentions.column("concept_id"), concept_ids_arr)
        ok = (m_chunk >= 0) & (m_concept >= 0)
        counts = np.asarray(mentions.column("count").to_numpy(zero_copy_only=False), dtype=np.float32)[ok]
        chunk_concepts = CSR.build(m_chunk[ok], m_concept[ok], n, counts)
        concept_chunks = CSR.build(m_concept[ok], m_chunk[ok], n_concepts, counts)

    adjacency = CSR.build(np.zeros(0, np.int64), np.zeros(0, np.int64), n_concepts)
    edges = arrow.get(tables.EDGES)
    if edges is not None and edges.num_rows and n_concepts:
        if "kept" in edges.column_names:
            edges = edges.filter(pc.equal(edges.column("kept"), True))
        src = _positions(edges.column("src"), concept_ids_arr)
        dst = _positions(edges.column("dst"), concept_ids_arr)
        w = np.asarray(edges.column("weight").to_numpy(zero_copy_only=False), dtype=np.float32)
        ok = (src >= 0) & (dst >= 0)
        src, dst, w = src[ok], dst[ok], w[ok]
        adjacency = CSR.build(
            np.concatenate([src, dst]), np.concatenate([dst, src]), n_concepts, np.concatenate([w, w])
        )

    concept_community = np.full((n_levels, n_concepts), -1, dtype=np.int64)
    cc = arrow.get(tables.CONCEPT_COMMUNITIES)
    if cc is not None and cc.num_rows and n_concepts and n_real:
        ci = _positions(cc.column("concept_id"), concept_ids_arr)
        cm = _positions(_level_keys(cc.column("level"), cc.column("community_id")), comm_keys)
        ok = (ci >= 0) & (cm >= 0)
        concept_community[level[cm[ok]], ci[ok]] = cm[ok]

    return IndexSnapshot(
        uri=uri,
        versions=versions,
        chunk_ids=_strings(chunks, "chunk_id") if n else np.zeros(0, dtype=object),
        chunk_doc_ids=_strings(chunks, "doc_id") if n else np.zeros(0, dtype=object),
        chunk_titles=_strings(chunks, "title") if n else np.zeros(0, dtype=object),
        chunk_texts=_strings(chunks, "text") if n else np.zeros(0, dtype=object),
        chunk_tokens=np.asarray(chunks.column("n_tokens").to_numpy(zero_copy_only=False), dtype=np.int64)
        if n
        else np.zeros(0, np.int64),
        embeddings=embeddings,
        embedding_model=model,
        community_ids=community_ids,
        community_level=level,
        community_parent=parent,
        community_top_concepts=top,
        community_children=children,
        community_chunks=community_chunks,
        n_levels=n_levels,
        concept_ids=_strings(concepts, "concept_id") if n_concepts else np.zeros(0, dtype=object),
        concept_names=_strings(concepts, "name") if n_concepts else np.zeros(0, dtype=object),
        chunk_concepts=chunk_concepts,
        concept_chunks=concept_chunks,
        concept_adjacency=adjacency,
        concept_community=concept_community,
        chunk_primary_community=primary,
    )
