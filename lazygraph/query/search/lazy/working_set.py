"""The lazy search on the serving store: a snapshot of only the rows one query touches.

On the in-memory snapshot a subquery ranks every chunk. On the serving store (``query.index_source:
store``) the search first reads, for each subquery and for the question, the chunks a ranking could
put first: the ``serving.lazy_candidates`` nearest chunks (the store's vector index), the as many best
by BM25 (its postings) and the as many chunks mentioning each matched concept most. Those chunks, with
their vectors, community links, mentions, the communities above them and the kept edges between their
concepts, are read by id and assembled into an ``IndexSnapshot`` of their own (``WorkingSet``), which
the rest of the search reads exactly as it reads the whole index: the same ranking, relevance tests,
claims, fill and reduce code. Nothing index-sized is held; what a query holds is bounded by the
candidates it reads.

Where the candidates cover the index (an index of at most ``lazy_candidates`` chunks) the rankings,
tests and answers equal the in-memory snapshot's. On a larger one a community's chunks outside the
candidates are not tested: they rank below every candidate, further down than a budget of relevance
tests reaches, as on the approximate vector index (``lazygraph.query.ranking``). BM25 and term weights
are the whole index's (the store's postings and term directory), not the working set's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lazygraph import tables
from lazygraph.errors import StoreOutOfDateError
from lazygraph.lexical.terms import tokenize
from lazygraph.query.search.lazy.subqueries import LEXICAL_BONUS, name_candidates
from lazygraph.query.snapshot import IndexSnapshot, build_snapshot
from lazygraph.serving import ServingStore
from lazygraph.serving.reader import rebuild_hint
from lazygraph.serving.scores import RowScores
from lazygraph.settings import LexicalSettings, Settings


@dataclass
class WorkingSet(IndexSnapshot):
    """A snapshot of some of an index's chunks, read from its serving store for one query; BM25 and
    term weights are the whole index's, read from the store's postings."""

    store: Any = field(default=None, repr=False)  # the ServingStore the rows were read from
    chunk_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)

    @property
    def has_lexical(self) -> bool:
        return float(self.store.meta.get("lexical", {}).get("average_length", 0.0)) > 0

    def bm25(self, text: str, params: LexicalSettings | None = None) -> np.ndarray:
        """Okapi BM25 of each chunk of the set for ``text``, over the whole index's statistics."""
        params = params or LexicalSettings()
        out = np.zeros(self.n_chunks, dtype=np.float32)
        if not self.has_lexical or not self.n_chunks:
            return out
        scores = self.store.lexical_scores(tokenize(text), params.k1, params.b)
        if not len(scores):
            return out
        if isinstance(scores, RowScores):  # postings name chunks by row: no id lookup needed
            at = pc.index_in(pa.array(self.chunk_rows, pa.int32()), value_set=pa.array(scores.rows))
            at = np.asarray(pc.fill_null(at, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
        else:
            at = scores.positions(self.chunk_ids.tolist())
        held = at >= 0
        out[held] = scores.scores[at[held]]
        return out

    def term_weights(self, text: str) -> dict[str, float]:
        """The whole index's IDF of each distinct term of ``text`` it knows (the store's directory)."""
        if not self.has_lexical:
            return {}
        n = float(self.store.n_chunks)
        df = self.store.document_frequencies(list(dict.fromkeys(tokenize(text))))
        return {term: float(np.log(1.0 + (n - d + 0.5) / (d + 0.5))) for term, d in df.items()}


def require_lazy_store(store: ServingStore) -> None:
    """Refuse a store written before it held what the lazy search reads."""
    if not store.serves_lazy:
        raise StoreOutOfDateError(
            f"the serving store {store.uri} (format {store.meta.get('format')}) serves the vector and "
            f"hybrid methods only; for the lazy method {rebuild_hint(store.index_uri)} --force"
        )


def match_store_concepts(
    store: ServingStore, text: str, vector: np.ndarray, k: int, min_similarity: float
) -> list[str]:
    """The ids of the ``k`` concepts best matching a subquery, as ``match_concepts`` chooses them over
    every concept: the most similar names (at least ``min_similarity``) and, ahead of them, the names
    that are words of the subquery."""
    if k <= 0:
        return []
    scores: dict[str, float] = {
        hit.id: hit.score for hit in store.nearest_concepts(vector, k) if hit.score >= min_similarity
    }
    named = store.concepts_named(name_candidates(text))
    if named:
        columns = ["concept_id", "vector"] if store.meta.get("concept_vectors") else ["concept_id"]
        rows = store.concept_rows(named, columns)
        similarity = _similarities(rows, vector)
        for concept, sim in zip(rows.column("concept_id").to_pylist(), similarity, strict=True):
            base = sim if sim is not None and sim >= min_similarity else 0.0
            scores[concept] = max(base, 0.0) + LEXICAL_BONUS
    order = sorted(scores, key=lambda concept: -scores[concept])
    return order[:k]


def read_working_set(
    store: ServingStore,
    settings: Settings,
    vectors: np.ndarray,
    texts: Sequence[str],
    concept_ids: Sequence[str],
) -> WorkingSet:
    """The working set of a query: the candidates of each of ``vectors`` (nearest), ``texts`` (BM25)
    and ``concept_ids`` (their most-mentioning chunks), with every row the lazy search reads of them."""
    chunk_ids = candidate_chunks(store, settings, vectors, texts, concept_ids)
    chunks = store.chunk_rows(chunk_ids)
    ids = chunks.column("chunk_id").to_pylist()
    model = str(store.meta.get("embedding_model", ""))
    links = store.chunk_links(ids)
    communities = _communities_with_ancestors(store, links)
    mentions = store.concept_mentions(ids)
    # Ids and names only: a working set's tens of thousands of concepts need no vectors.
    mentioned = [*concept_ids, *mentions.column("concept_id").to_pylist()]
    concepts = store.concept_rows(mentioned, ["concept_id", "name"])
    concept_keys = concepts.column("concept_id").to_pylist()
    edges = store.concept_edges(concept_keys) if concept_keys else pa.table({})
    arrow = {
        tables.CHUNKS: chunks,
        # The vectors are set below, from the store's unit vectors (none are decoded here).
        tables.CHUNK_EMBEDDINGS: pa.table({"chunk_id": ids, "model": [model] * len(ids)}),
        tables.COMMUNITIES: communities,
        tables.CHUNK_COMMUNITIES: links,
        tables.CONCEPTS: concepts,
        tables.MENTIONS: mentions,
        tables.EDGES: _one_way(edges, concept_keys),
    }
    snapshot = build_snapshot(store.index_uri, (("serving_store", store.uri),), arrow)
    working = WorkingSet(**{name: getattr(snapshot, name) for name in _SNAPSHOT_FIELDS})
    working.store = store
    working.index_version = store.index_version
    working.chunk_rows = np.asarray(chunks.column("chunk_row").to_numpy(zero_copy_only=False), np.int64)
    working.embeddings = _aligned(store.chunk_vectors(ids), ids, int(store.meta.get("dimension") or 1))
    return working


def candidate_chunks(
    store: ServingStore,
    settings: Settings,
    vectors: np.ndarray,
    texts: Sequence[str],
    concept_ids: Sequence[str],
) -> list[str]:
    """The ids of every chunk a ranking of the query could reach first (see the module docstring)."""
    depth = settings.serving.lazy_candidates
    found: dict[str, None] = {}
    for vector in vectors:
        found.update(dict.fromkeys(hit.id for hit in store.nearest_chunks(vector, depth)))
    lexical = settings.lexical
    for text in texts:
        scores = store.lexical_scores(tokenize(text), lexical.k1, lexical.b)
        if len(scores):
            n = min(depth, len(scores))
            top = np.argpartition(-scores.scores, n - 1)[:n] if n < len(scores) else np.arange(n)
            found.update(dict.fromkeys(str(c) for c in scores.ids_at(top)))
    if concept_ids:
        mentioning = store.chunks_mentioning(concept_ids, depth)
        found.update(dict.fromkeys(mentioning.column("chunk_id").to_pylist()))
    return list(found)


# ---- pieces -------------------------------------------------------------------------------------------
_SNAPSHOT_FIELDS = [
    name for name, f in IndexSnapshot.__dataclass_fields__.items() if f.init and not name.startswith("_")
]


def _communities_with_ancestors(store: ServingStore, links: pa.Table) -> pa.Table:
    """The hierarchy rows of the linked communities and of every community above them."""
    keys = set(zip(links.column("level").to_pylist(), links.column("community_id").to_pylist(), strict=True))
    todo, rows = set(keys), []
    while todo:
        found = store.community_rows(sorted(todo))
        rows.append(found)
        parents = {
            (level - 1, parent)
            for level, parent in zip(
                found.column("level").to_pylist(), found.column("parent_id").to_pylist(), strict=True
            )
            if parent is not None and level > 0
        }
        todo = parents - keys
        keys |= todo
    if not rows:
        return store.community_rows([])
    return store.community_rows(sorted(keys)) if len(rows) > 1 else rows[0]


def _one_way(edges: pa.Table, concepts: Sequence[str]) -> pa.Table | None:
    """The kept edges between the set's concepts, each once (the store holds both directions; the
    snapshot adds the reverse of each itself)."""
    if not edges.num_rows:
        return None
    held = pc.and_(
        pc.is_in(edges.column("dst"), value_set=pa.array(list(concepts), pa.string())),
        pc.less(edges.column("src"), edges.column("dst")),
    )
    edges = edges.filter(held)
    return edges.append_column("kept", pa.array([True] * edges.num_rows, pa.bool_()))


def _aligned(vectors: dict[str, np.ndarray], ids: Sequence[str], dim: int) -> np.ndarray:
    """The vectors in the order of ``ids``; zeros for a chunk stored without one (it scores 0)."""
    out = np.zeros((len(ids), dim), dtype=np.float32)
    for i, chunk in enumerate(ids):
        vector = vectors.get(chunk)
        if vector is not None:
            out[i] = vector
    return out


def _similarities(rows: pa.Table, vector: np.ndarray) -> list[float | None]:
    """The cosine similarity of each concept row's name vector to ``vector`` (None without one)."""
    if "vector" not in rows.column_names or not rows.num_rows:
        return [None] * rows.num_rows
    flat = rows.column("vector").combine_chunks()
    matrix = np.asarray(flat.flatten().to_numpy(zero_copy_only=False), np.float32).reshape(rows.num_rows, -1)
    return (matrix @ np.asarray(vector, np.float32)).tolist()
