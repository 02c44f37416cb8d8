"""The lazy search on the serving store: a snapshot of only the rows one query touches.

On the in-memory snapshot a subquery ranks every chunk. On the serving store (``query.index_source:
store``) the search first reads, for each subquery and for the question, the chunks a ranking could
put first: the ``serving.lazy_candidates`` nearest chunks (the store's vector index), the as many best
by BM25 (its postings) and the as many chunks mentioning each matched concept most. Those chunks, with
their vectors, community links, the communities above them and their mentions of the matched concepts,
are read by id and assembled into an ``IndexSnapshot`` of their own (``WorkingSet``), which the rest of
the search reads exactly as it reads the whole index: the same ranking, relevance tests, claims, fill
and reduce code. The concept subgraph that names a map group's topics (the group's mentions, names and
kept edges) is read for the few chunks of that group when the map step asks, not for every candidate.
Nothing index-sized is held; what a query holds is bounded by the candidates it reads.

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
from lazygraph.query.search.lazy.subqueries import name_candidates, named_score
from lazygraph.query.snapshot import IndexSnapshot, build_snapshot
from lazygraph.query.snapshot.model import ConceptSubgraph
from lazygraph.serving import ServingStore
from lazygraph.serving.reader import most_mentioning, rebuild_hint
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
            at = _positions(pa.array(self.chunk_rows, pa.int32()), pa.array(scores.rows))
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

    def concept_subgraphs(self, groups: Sequence[Sequence[int]]) -> list[ConceptSubgraph]:
        """The concept subgraph of each group of chunks, read from the store for those chunks alone
        (one read of their kept mentions, of those concepts' names in the index's order and of the
        kept edges among them, for every group at once)."""
        ids = [[str(self.chunk_ids[c]) for c in chunks] for chunks in groups]
        mentions = self.store.concept_mentions([chunk for group in ids for chunk in group])
        concepts = self.store.concept_rows(mentions.column("concept_id").to_pylist(), ["concept_id", "name"])
        keys = concepts.column("concept_id")
        names = concepts.column("name").to_pylist()
        edges = self.store.concept_edges(keys.to_pylist()) if concepts.num_rows else None
        src = _positions(edges.column("src"), keys) if edges is not None else np.zeros(0, np.int64)
        dst = _positions(edges.column("dst"), keys) if edges is not None else np.zeros(0, np.int64)
        chunk = mentions.column("chunk_id")
        concept = _positions(mentions.column("concept_id"), keys)
        return [_subgraph(group, chunk, concept, names, src, dst) for group in ids]


def _subgraph(
    group: list[str],
    chunk: pa.ChunkedArray,
    concept: np.ndarray,
    names: list[str],
    src: np.ndarray,
    dst: np.ndarray,
) -> ConceptSubgraph:
    """One group's subgraph out of the mentions and edges read for every group: its concepts in the
    index's order (the order of ``names``), the group's chunks mentioning each (one row a pair), and
    each one's kept edges to the others (the store holds each edge both ways, as the snapshot's
    adjacency does)."""
    mine = np.asarray(pc.is_in(chunk, value_set=pa.array(group, pa.string())), dtype=bool) & (concept >= 0)
    counts = np.bincount(concept[mine], minlength=len(names))
    present = np.flatnonzero(counts)
    in_set = np.zeros(len(names), dtype=bool)
    in_set[present] = True
    among = (src >= 0) & (dst >= 0)
    among[among] = in_set[src[among]] & in_set[dst[among]]
    degree = np.bincount(src[among], minlength=len(names))
    return ConceptSubgraph([names[i] for i in present], counts[present], degree[present].astype(np.int64))


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
    that are words of the subquery (``named_score``); equal scores in the index's concept order."""
    if k <= 0:
        return []
    scores: dict[str, float] = {
        hit.id: float(np.float32(hit.score))
        for hit in store.nearest_concepts(vector, k)
        if hit.score >= min_similarity
    }
    named = store.concepts_named(name_candidates(text))
    if named:
        columns = ["concept_id", "vector"] if store.meta.get("concept_vectors") else ["concept_id"]
        rows = store.concept_rows(named, columns)
        similarity = _similarities(rows, vector)
        for concept, sim in zip(rows.column("concept_id").to_pylist(), similarity, strict=True):
            scores[concept] = named_score(sim)
    # Equal scores go in the concepts' places in the store (the index's order), as on the snapshot;
    # their places are read only when two scores are equal.
    place: dict[str, int] = {}
    if len(set(scores.values())) < len(scores):
        stored = store.concept_rows(list(scores), ["concept_id"]).column("concept_id").to_pylist()
        place = {concept: i for i, concept in enumerate(stored)}
    order = sorted(scores, key=lambda concept: (-scores[concept], place.get(concept, 0)))
    return order[:k]


def read_working_set(
    store: ServingStore,
    settings: Settings,
    vectors: np.ndarray,
    texts: Sequence[str],
    concept_ids: Sequence[str],
) -> WorkingSet:
    """The working set of a query: the candidates of each of ``vectors`` (nearest), ``texts`` (BM25)
    and ``concept_ids`` (their most-mentioning chunks), with every row the lazy search reads of them.

    Of the concepts, only the matched ones and their mentions among the candidates are read (the
    ranking's concept bonus); the concepts of the few chunks a map step groups are read when it asks
    (``WorkingSet.concept_subgraphs``), not for every candidate."""
    matched = store.concept_chunk_rows(concept_ids)
    chunk_ids = candidate_chunks(store, settings, vectors, texts, matched)
    chunks = store.chunk_rows(chunk_ids)
    ids = chunks.column("chunk_id").to_pylist()
    model = str(store.meta.get("embedding_model", ""))
    links = store.chunk_links(ids, chunks.column("chunk_row").to_numpy())
    held = pc.is_in(matched.column("chunk_id"), value_set=pa.array(ids, pa.string()))
    arrow = {
        tables.CHUNKS: chunks,
        # The vectors are set below, from the store's unit vectors (none are decoded here).
        tables.CHUNK_EMBEDDINGS: pa.table({"chunk_id": ids, "model": [model] * len(ids)}),
        tables.COMMUNITIES: _communities_with_ancestors(store, links),
        tables.CHUNK_COMMUNITIES: links,
        # Ids and names only: the matched concepts need no vectors here.
        tables.CONCEPTS: store.concept_rows(concept_ids, ["concept_id", "name"]),
        tables.MENTIONS: matched.filter(held),
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
    mentions: pa.Table,
) -> list[str]:
    """The ids of every chunk a ranking of the query could reach first (see the module docstring);
    ``mentions`` are the matched concepts' rows (``ServingStore.concept_chunk_rows``)."""
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
    found.update(dict.fromkeys(most_mentioning(mentions, depth).column("chunk_id").to_pylist()))
    return list(found)


# ---- pieces -------------------------------------------------------------------------------------------
_SNAPSHOT_FIELDS = [
    name for name, f in IndexSnapshot.__dataclass_fields__.items() if f.init and not name.startswith("_")
]


def _communities_with_ancestors(store: ServingStore, links: pa.Table) -> pa.Table:
    """The hierarchy rows of the linked communities and of every community above them."""
    # The distinct communities first, in Arrow: a working set has hundreds of thousands of links.
    distinct = links.select(["level", "community_id"]).group_by(["level", "community_id"]).aggregate([])
    levels, ids = distinct.column("level").to_pylist(), distinct.column("community_id").to_pylist()
    keys = set(zip(levels, ids, strict=True))
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


def _positions(values: pa.Array | pa.ChunkedArray, among: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Each value's position in ``among``, -1 where it is not there."""
    among = among.combine_chunks() if isinstance(among, pa.ChunkedArray) else among
    at = pc.index_in(values, value_set=among)
    return np.asarray(pc.fill_null(at, -1).to_numpy(zero_copy_only=False), dtype=np.int64)


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
