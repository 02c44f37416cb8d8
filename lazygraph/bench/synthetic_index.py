"""A synthetic lazygraph index of N chunks: the Delta tables ``lazygraph index`` writes, with the
schemas of ``lazygraph.tables.schemas``, a manifest row of a complete run, and the serving store built
from them by ``lazygraph.serving.build_store``. For measuring the serving store at sizes the real index
job cannot reach on one small machine.

    lazygraph bench synthetic-index --chunks 100000 --out DIR [--seed 0]

Tables are written with deltalake (no Spark), chunk batch by chunk batch (one Delta commit per batch
and table), so memory stays flat in N except for a few arrays of one number per concept or community
(16 concepts a chunk: at 1,000,000 chunks the chunk batches ran in about 0.7 GB and the concept tables,
written last, took the peak to 2.0 GB).

How each distribution was chosen. Measured with ``lazygraph bench corpus-stats`` (the index's own
tokenizer and spaCy concept extraction, one chunk per paragraph):

    hotpotqa100 (994 paragraphs, mean 93 words): 44 distinct terms a chunk (p10 21, p90 73); 23.5
        distinct concepts a chunk (p10 11, p90 38); 16,345 concepts, 2,211 of them in 2+ chunks;
        rank-frequency slope of those 2,211: 0.61.
    wiki2mh_corpus (first 2,000 paragraphs, mean 73 words): 35 distinct terms a chunk (p10 9, p90 70);
        19.2 distinct concepts a chunk (p10 5, p90 40); 24,233 concepts, 3,881 of them in 2+ chunks;
        rank-frequency slope of those: 0.66.

- Mentions: ``MENTIONS_PER_CHUNK`` = 20 distinct concepts a chunk (measured 23.5 on hotpotqa100
  paragraphs), Poisson-spread. Three quarters are drawn from the chunk's topic (its level-2 community),
  the rest from the whole vocabulary, both Zipf: rank r drawn with probability proportional to
  r^-``CONCEPT_ZIPF`` (0.9; chosen so that the rank-frequency slope of the concepts in 2+ chunks of a
  generated index, which ``stats`` reports, comes near the measured 0.61 and 0.66: it gives 0.77).
  More concepts reach 2+ chunks than in hotpotqa100 (about 44% against 14%), so more are kept.
  The vocabulary holds ``CONCEPTS_PER_CHUNK`` = 16 concepts per chunk (hotpotqa100: 16,345 concepts
  in 994 chunks), so many concepts are rare, as there (86% of its concepts in one chunk only).
- Terms: ``TERMS_PER_CHUNK`` = 100 distinct terms a chunk: the measured 44 are for 93-word paragraphs,
  and a 300-token chunk (``chunking.chunk_tokens``) is about 2.5 times longer. Terms are drawn Zipf
  (exponent 1, Zipf's law for words) over ``VOCABULARY`` pseudo-words, as many draws as give 100
  distinct ones on average; the chunk's text is its terms, repeated by their counts.
- Communities: NOT measured (they come from the Spark community stage, not run here). Chosen: a
  level-2 community per ``CHUNKS_PER_LEAF`` = 200 chunks, 8 children per parent at each level, and
  chunks spread over their topics by a Dirichlet(1) share, so community sizes are uneven. A chunk is
  linked to the communities of the concepts it mentions, weighted by their share of its mentions,
  as ``lazygraph.communities.chunks`` does, so every chunk is in at least one community per level.
  Unlike the real stage, concepts later flagged not kept (in one chunk only) still count in the links.
- Embeddings: 384-d, a Gaussian mixture around the community centroids, normalised: a level-0 centroid
  is a random direction plus a shared component (real sentence embeddings of unrelated texts have a
  small positive cosine), each child centroid its parent moved by noise, a chunk its topic's centroid
  moved by noise (cosine about 0.7 to its centroid). Chosen, not measured.
- Documents: 1 to 4 chunks each (uniform); chosen (hotpotqa100's paragraphs are one chunk each).
- Edges and pair counts: NOT derived from the mentions (that would need every pair in memory): each
  kept concept is paired with a few concepts of its own topic, with NPMI-like weights.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lazygraph import tables
from lazygraph.errors import ConfigError
from lazygraph.settings import Settings
from lazygraph.tables import schemas

DIM = 384
MODEL = "synthetic-gaussian-mixture-384"
SYNTHETIC_MARK = "SYNTHETIC_INDEX"  # a file in every generated index: what the generator may replace
MENTIONS_PER_CHUNK = 20
TERMS_PER_CHUNK = 100
CONCEPT_ZIPF = 0.9
TERM_ZIPF = 1.0
TOPIC_SHARE = 0.75  # of a chunk's mentions drawn from its topic's concepts
CONCEPTS_PER_CHUNK = 16
VOCABULARY = 200_000
CHUNKS_PER_LEAF = 200
BRANCHING = 8
LEVELS = 3
BATCH_CHUNKS = 20_000
# Noise per dimension: a vector x + N(0, s^2 I) over 384 dimensions has cosine 1/sqrt(1 + 384 s^2)
# to x; 0.05 gives about 0.7 (chunk to its topic), 0.03 about 0.85 (child centroid to its parent).
CHUNK_NOISE = 0.05
CENTROID_NOISE = 0.03
SHARED_COMPONENT = 0.35

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_SYLLABLES = [c + v for c in _CONSONANTS for v in _VOWELS]


def pseudo_word(number: int, min_syllables: int = 2) -> str:
    """A pronounceable word spelling ``number`` (one syllable per base-70 digit)."""
    syllables = []
    while number or len(syllables) < min_syllables:
        number, digit = divmod(number, len(_SYLLABLES))
        syllables.append(_SYLLABLES[digit])
    return "".join(syllables)


def word_number(word: str) -> int:
    """The number ``pseudo_word`` spelled (inverse, for concept names)."""
    digits = [_SYLLABLES.index(word[i : i + 2]) for i in range(0, len(word), 2)]
    return sum(d * len(_SYLLABLES) ** k for k, d in enumerate(digits))


def zipf_ranks(rng: np.random.Generator, exponent: float, n: int, size: int) -> np.ndarray:
    """0-based ranks in [0, n) drawn with P(rank r) ~ (r + 1)^-exponent (inverse of the continuous CDF)."""
    u = rng.random(size)
    if abs(exponent - 1.0) < 1e-9:
        ranks = np.exp(u * math.log(n + 1.0)) - 1.0
    else:
        a = 1.0 - exponent
        ranks = ((((n + 1.0) ** a - 1.0) * u + 1.0) ** (1.0 / a)) - 1.0
    return np.minimum(ranks.astype(np.int64), n - 1)


def draws_for_distinct(exponent: float, n: int, target: float) -> int:
    """The number of Zipf draws whose expected count of distinct values is ``target``."""
    p = np.arange(1, n + 1, dtype=np.float64) ** -exponent
    p /= p.sum()
    low, high = int(target), int(target * 20)
    while low < high:
        mid = (low + high) // 2
        if np.sum(1.0 - (1.0 - p) ** mid) < target:
            low = mid + 1
        else:
            high = mid
    return low


def unit(vectors: np.ndarray) -> np.ndarray:
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


@dataclass
class Shape:
    """The sizes of an index of ``chunks`` chunks and its community tree (level 0 the coarsest)."""

    chunks: int
    leaves: int = 0
    per_level: list[int] = field(default_factory=list)
    concepts: int = 0

    def __post_init__(self) -> None:
        self.leaves = max(BRANCHING**2, self.chunks // CHUNKS_PER_LEAF)
        self.per_level = [
            max(1, math.ceil(self.leaves / BRANCHING**2)),
            max(1, math.ceil(self.leaves / BRANCHING)),
            self.leaves,
        ]
        self.concepts = max(1_000, CONCEPTS_PER_CHUNK * self.chunks)

    def ancestor(self, leaf: np.ndarray, level: int) -> np.ndarray:
        """The level-``level`` community of each leaf (children are numbered parent by parent)."""
        return leaf // BRANCHING ** (LEVELS - 1 - level)


def community_id(level: int, number: int | np.ndarray) -> Any:
    if isinstance(number, np.ndarray):
        return pc.binary_join_element_wise(f"L{level}-", pc.cast(pa.array(number), pa.string()), "")
    return f"L{level}-{number}"


CONCEPT_NOISE_KEY = 31_337  # the seed of every concept's own noise (``Mixture.around_concepts``)


class Mixture:
    """The centroids of every community, and vectors drawn around them."""

    def __init__(self, shape: Shape, rng: np.random.Generator) -> None:
        shared = unit(rng.standard_normal((1, DIM)))
        roots = unit(unit(rng.standard_normal((shape.per_level[0], DIM))) + SHARED_COMPONENT * shared)
        self.centroids = [roots]
        for n in shape.per_level[1:]:
            parents = self.centroids[-1][np.arange(n) // BRANCHING]
            self.centroids.append(unit(parents + CENTROID_NOISE * rng.standard_normal((n, DIM))))
        self.rng = rng

    def around_leaves(self, leaves: np.ndarray) -> np.ndarray:
        centres = self.centroids[-1][leaves]
        return unit(centres + CHUNK_NOISE * self.rng.standard_normal(centres.shape))

    def around_concepts(self, concepts: np.ndarray, shape: Shape) -> np.ndarray:
        """Concept name vectors: the centroid of the concept's topic, moved by noise drawn from the
        concept's own number (not from the shared stream), so that a store rebuilt later from the same
        tables (``rebuild_store``) holds the same vectors."""
        centres = self.centroids[-1][concepts % shape.leaves]
        noise = np.zeros(centres.shape)
        for row, concept in enumerate(concepts):
            noise[row] = np.random.default_rng([CONCEPT_NOISE_KEY, int(concept)]).standard_normal(DIM)
        return unit(centres + CHUNK_NOISE * noise)


@dataclass
class Totals:
    """What is accumulated over the chunk batches: one number per concept, community and table."""

    shape: Shape
    chunk_frequency: np.ndarray = field(init=False)
    frequency: np.ndarray = field(init=False)
    community_chunks: list[np.ndarray] = field(init=False)
    rows: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.chunk_frequency = np.zeros(self.shape.concepts, np.int32)
        self.frequency = np.zeros(self.shape.concepts, np.int32)
        self.community_chunks = [np.zeros(n, np.int64) for n in self.shape.per_level]

    def add_rows(self, name: str, n: int) -> None:
        self.rows[name] = self.rows.get(name, 0) + n


# ---- one batch of chunks ------------------------------------------------------------------------------
def chunk_ids(numbers: np.ndarray, seed: int) -> pa.Array:
    """16-hex-digit ids in no particular order (the index's are content hashes)."""
    salt = np.uint64(seed * 0x9E3779B97F4A7C15 % 2**64)
    with np.errstate(over="ignore"):  # multiplication modulo 2^64 is the point
        x = (numbers.astype(np.uint64) + salt) * np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(31)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(29)
    return pa.array([f"{v:016x}" for v in x.tolist()], pa.string())


def grouped_counts(groups: np.ndarray, values: np.ndarray, n_values: int) -> tuple[np.ndarray, ...]:
    """Distinct (group, value) pairs with how often each occurs, grouped in order."""
    keys, counts = np.unique(groups.astype(np.int64) * n_values + values, return_counts=True)
    return keys // n_values, keys % n_values, counts


def draw_mentions(
    rng: np.random.Generator, shape: Shape, leaves: np.ndarray, draws: int
) -> tuple[np.ndarray, ...]:
    """(chunk, concept, count) rows: each chunk's draws, from its topic or the whole vocabulary."""
    per_chunk = rng.poisson(draws, len(leaves)).clip(1)
    chunk = np.repeat(np.arange(len(leaves)), per_chunk)
    total = len(chunk)
    per_leaf = shape.concepts // shape.leaves
    topical = zipf_ranks(rng, CONCEPT_ZIPF, per_leaf, total) * shape.leaves + leaves[chunk]
    general = zipf_ranks(rng, CONCEPT_ZIPF, shape.concepts, total)
    concept = np.where(rng.random(total) < TOPIC_SHARE, topical, general)
    return grouped_counts(chunk, concept, shape.concepts)


def draw_terms(rng: np.random.Generator, n_chunks: int, draws: int) -> tuple[np.ndarray, ...]:
    per_chunk = rng.poisson(draws, n_chunks).clip(1)
    chunk = np.repeat(np.arange(n_chunks), per_chunk)
    return grouped_counts(chunk, zipf_ranks(rng, TERM_ZIPF, VOCABULARY, len(chunk)), VOCABULARY)


def texts_of(
    chunk: np.ndarray, term: np.ndarray, count: np.ndarray, n_chunks: int, vocabulary: pa.Array
) -> pa.Array:
    """Each chunk's text: its terms, each as often as it occurs (the rows are grouped by chunk)."""
    words = vocabulary.take(pa.array(np.repeat(term, count)))
    ends = np.cumsum(np.bincount(np.repeat(chunk, count), minlength=n_chunks))
    offsets = pa.array(np.concatenate([[0], ends]).astype(np.int32))
    return pc.binary_join(pa.ListArray.from_arrays(offsets, words), " ")


def community_links(
    chunk: np.ndarray, concept: np.ndarray, count: np.ndarray, shape: Shape, level: int
) -> tuple[np.ndarray, ...]:
    """(chunk, community, weight) at one level: the share of the chunk's mentions in the community."""
    community = shape.ancestor(concept % shape.leaves, level)
    n = shape.per_level[level]
    keys, inverse = np.unique(chunk.astype(np.int64) * n + community, return_inverse=True)
    summed = np.bincount(inverse, weights=count)
    link_chunk = keys // n
    totals = np.bincount(chunk, weights=count)
    return link_chunk, keys % n, summed / totals[link_chunk]


def binary_vectors(vectors: np.ndarray) -> pa.Array:
    """float32 rows as the little-endian bytes chunk_embeddings stores."""
    n, dim = vectors.shape
    data = pa.py_buffer(np.ascontiguousarray(vectors, dtype="<f4").tobytes())
    offsets = pa.py_buffer(np.arange(0, (n + 1) * dim * 4, dim * 4, dtype=np.int32).tobytes())
    return pa.Array.from_buffers(pa.binary(), n, [None, offsets, data])


@dataclass
class Generator:
    out: Path
    shape: Shape
    seed: int
    mixture: Mixture
    totals: Totals
    vocabulary: pa.Array
    mention_draws: int
    term_draws: int
    leaf_share: np.ndarray

    @classmethod
    def create(cls, out: Path, chunks: int, seed: int) -> Generator:
        shape = Shape(chunks)
        rng = np.random.default_rng([seed, 0])
        per_leaf = shape.concepts // shape.leaves
        return cls(
            out=out,
            shape=shape,
            seed=seed,
            mixture=Mixture(shape, rng),
            totals=Totals(shape),
            vocabulary=pa.array([pseudo_word(j) for j in range(VOCABULARY)], pa.string()),
            # The topic's concepts dominate the repeats: draws are sized for them.
            mention_draws=draws_for_distinct(CONCEPT_ZIPF, per_leaf, MENTIONS_PER_CHUNK),
            term_draws=draws_for_distinct(TERM_ZIPF, VOCABULARY, TERMS_PER_CHUNK),
            leaf_share=rng.dirichlet(np.ones(shape.leaves)),
        )

    def write(self, name: str, table: pa.Table) -> None:
        from deltalake import write_deltalake

        table = table.cast(schemas.SPECS[name].schema)
        write_deltalake(str(self.out / name), table, mode="append")
        self.totals.add_rows(name, table.num_rows)

    # ---- the tables written chunk batch by chunk batch ------------------------------------------
    def chunk_batch(self, batch: int, start: int, end: int) -> None:
        rng = np.random.default_rng([self.seed, 1, batch])
        n = end - start
        doc_of_chunk, doc_leaves, doc_ord = self.documents_of(rng, n)
        leaves = doc_leaves[doc_of_chunk]
        ids = chunk_ids(np.arange(start, end), self.seed)
        doc_ids = pc.binary_join_element_wise(
            "d",
            pa.array([batch] * len(doc_leaves)).cast(pa.string()),
            pa.array(np.arange(len(doc_leaves))).cast(pa.string()),
            "-",
        )
        titles = self.vocabulary.take(pa.array(doc_leaves % VOCABULARY))
        t_chunk, t_term, t_count = draw_terms(rng, n, self.term_draws)
        texts = texts_of(t_chunk, t_term, t_count, n, self.vocabulary)
        words = np.bincount(np.repeat(t_chunk, t_count), minlength=n)
        self.write_chunks(
            ids,
            doc_ids.take(pa.array(doc_of_chunk)),
            titles.take(pa.array(doc_of_chunk)),
            doc_ord,
            texts,
            words,
        )
        self.write_documents(doc_ids, titles, doc_of_chunk, texts, batch)
        self.write_terms(ids, t_chunk, t_term, t_count)
        self.write(tables.CHUNK_EMBEDDINGS, self.embeddings(ids, leaves))
        m_chunk, m_concept, m_count = draw_mentions(rng, self.shape, leaves, self.mention_draws)
        self.write_mentions(ids, m_chunk, m_concept, m_count)
        self.write_links(ids, m_chunk, m_concept, m_count)

    def documents_of(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each chunk's document (1 to 4 chunks a document), each document's topic, each chunk's ord."""
        lengths = rng.integers(1, 5, size=n)
        ends = np.cumsum(lengths)
        lengths = lengths[: np.searchsorted(ends, n) + 1]
        lengths[-1] -= int(lengths.sum()) - n
        doc_of_chunk = np.repeat(np.arange(len(lengths)), lengths)
        ord_ = np.arange(n) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        doc_leaves = rng.choice(self.shape.leaves, size=len(lengths), p=self.leaf_share)
        return doc_of_chunk, doc_leaves, ord_

    def write_chunks(
        self,
        ids: pa.Array,
        doc_ids: pa.Array,
        titles: pa.Array,
        ord_: np.ndarray,
        texts: pa.Array,
        words: np.ndarray,
    ) -> None:
        tokens = np.minimum(300, np.round(words * 1.3)).astype(np.int32)
        self.write(
            tables.CHUNKS,
            pa.table(
                {
                    "chunk_id": ids,
                    "doc_id": doc_ids,
                    "title": titles,
                    "ord": ord_.astype(np.int32),
                    "text": texts,
                    "n_tokens": tokens,
                }
            ),
        )

    def write_documents(
        self, doc_ids: pa.Array, titles: pa.Array, doc_of_chunk: np.ndarray, texts: pa.Array, batch: int
    ) -> None:
        offsets = np.concatenate([[0], np.cumsum(np.bincount(doc_of_chunk))]).astype(np.int32)
        doc_texts = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), texts), "\n")
        self.write(
            tables.DOCUMENTS,
            pa.table(
                {
                    "doc_id": doc_ids,
                    "title": titles,
                    "text": doc_texts,
                    "text_hash": doc_ids,
                    "source": pa.array(["synthetic"] * len(doc_ids)),
                    "n_chars": pc.utf8_length(doc_texts).cast(pa.int32()),
                    "run_id": pa.array(["synthetic"] * len(doc_ids)),
                }
            ),
        )

    def write_terms(self, ids: pa.Array, chunk: np.ndarray, term: np.ndarray, count: np.ndarray) -> None:
        self.write(
            tables.CHUNK_TERMS,
            pa.table(
                {
                    "chunk_id": ids.take(pa.array(chunk)),
                    "term": self.vocabulary.take(pa.array(term)),
                    "count": count.astype(np.int32),
                }
            ),
        )

    def embeddings(self, ids: pa.Array, leaves: np.ndarray) -> pa.Table:
        n = len(ids)
        return pa.table(
            {
                "chunk_id": ids,
                "embedding": binary_vectors(self.mixture.around_leaves(leaves)),
                "dtype": pa.array(["float32"] * n),
                "dim": pa.array(np.full(n, DIM, np.int32)),
                "model": pa.array([MODEL] * n),
            }
        )

    def write_mentions(
        self, ids: pa.Array, chunk: np.ndarray, concept: np.ndarray, count: np.ndarray
    ) -> None:
        self.totals.chunk_frequency += np.bincount(concept, minlength=self.shape.concepts).astype(np.int32)
        self.totals.frequency += np.bincount(concept, weights=count, minlength=self.shape.concepts).astype(
            np.int32
        )
        self.write(
            tables.MENTIONS,
            pa.table(
                {
                    "chunk_id": ids.take(pa.array(chunk)),
                    "concept_id": concept_ids(concept),
                    "count": count.astype(np.int32),
                }
            ),
        )

    def write_links(self, ids: pa.Array, chunk: np.ndarray, concept: np.ndarray, count: np.ndarray) -> None:
        for level in range(LEVELS):
            link_chunk, community, weight = community_links(chunk, concept, count, self.shape, level)
            self.totals.community_chunks[level] += np.bincount(
                community, minlength=self.shape.per_level[level]
            )
            self.write(
                tables.CHUNK_COMMUNITIES,
                pa.table(
                    {
                        "chunk_id": ids.take(pa.array(link_chunk)),
                        "level": pa.array(np.full(len(link_chunk), level, np.int32)),
                        "community_id": community_id(level, community),
                        "weight": weight,
                    }
                ),
            )

    # ---- the tables written once the chunks are -------------------------------------------------
    def kept_concepts(self) -> tuple[np.ndarray, np.ndarray, pa.Table]:
        """Which concepts are kept (in 2+ chunks, at most 5% of them, paired with a kept one), each
        concept's degree, and the edges: each concept in 2+ chunks paired with up to three more
        frequent concepts of its topic."""
        frequent = (self.totals.chunk_frequency >= 2) & (
            self.totals.chunk_frequency <= 0.05 * self.shape.chunks
        )
        rng = np.random.default_rng([self.seed, 2])
        src = np.repeat(np.flatnonzero(frequent), 3)
        rank = src // self.shape.leaves
        partner_rank = (rng.random(len(src)) * rank).astype(np.int64)
        dst = partner_rank * self.shape.leaves + src % self.shape.leaves
        keep = (rank > 0) & frequent[dst]
        pairs = np.unique(np.stack([np.minimum(src, dst), np.maximum(src, dst)])[:, keep], axis=1)
        degree = np.bincount(pairs.reshape(-1), minlength=self.shape.concepts)
        kept = frequent & (degree > 0)
        n = pairs.shape[1]
        edges = pa.table(
            {
                "src": concept_ids(pairs[0]),
                "dst": concept_ids(pairs[1]),
                "cooccurrence": rng.integers(1, 20, size=n),
                "weight": rng.uniform(0.05, 0.9, size=n),
                "kept": pa.array(np.ones(n, bool)),
            }
        )
        return kept, degree, edges

    def write_concepts(self, kept: np.ndarray, degree: np.ndarray) -> None:
        seen = np.flatnonzero(self.totals.chunk_frequency > 0)
        for part in np.array_split(seen, max(1, len(seen) // 500_000)):
            ids = concept_ids(part)
            frequency = self.totals.frequency[part].astype(np.int64)
            chunk_frequency = self.totals.chunk_frequency[part].astype(np.int64)
            counts = {
                "concept_id": ids,
                "name": pa.array([concept_name(c) for c in part.tolist()], pa.string()),
                "kind": pa.array(["phrase"] * len(part)),
                "frequency": frequency,
                "chunk_frequency": chunk_frequency,
                "doc_frequency": chunk_frequency,
            }
            self.write(tables.CONCEPT_COUNTS, pa.table(counts))
            self.write(
                tables.CONCEPTS,
                pa.table({**counts, "degree": degree[part].astype(np.int64), "kept": kept[part]}),
            )

    def write_communities(self, kept: np.ndarray) -> None:
        """Every community with its parent, its kept concepts' count and its chunks' count, and the
        community of each kept concept at every level."""
        kept_ids = np.flatnonzero(kept)
        for level, n in enumerate(self.shape.per_level):
            numbers = np.arange(n)
            concepts_in = self.shape.ancestor(kept_ids % self.shape.leaves, level)
            parents = community_id(level - 1, numbers // BRANCHING) if level else pa.nulls(n, pa.string())
            self.write(
                tables.COMMUNITIES,
                pa.table(
                    {
                        "community_id": community_id(level, numbers),
                        "level": pa.array(np.full(n, level, np.int32)),
                        "parent_id": parents,
                        "size": np.bincount(concepts_in, minlength=n),
                        "n_chunks": self.totals.community_chunks[level],
                        "top_concepts": self.top_concepts(level, numbers),
                    }
                ),
            )
            self.write(
                tables.CONCEPT_COMMUNITIES,
                pa.table(
                    {
                        "concept_id": concept_ids(kept_ids),
                        "level": pa.array(np.full(len(kept_ids), level, np.int32)),
                        "community_id": community_id(level, concepts_in),
                    }
                ),
            )

    def top_concepts(self, level: int, numbers: np.ndarray) -> pa.Array:
        """The names of the three most frequent topical concepts of the community's first leaf."""
        first_leaf = numbers * BRANCHING ** (LEVELS - 1 - level)
        names = [[concept_name(r * self.shape.leaves + int(leaf)) for r in range(3)] for leaf in first_leaf]
        return pa.array(names, pa.list_(pa.string()))

    def write_manifest(self, started: datetime) -> None:
        from deltalake import DeltaTable, write_deltalake

        versions = {
            name: [DeltaTable(str(self.out / name)).version(), rows]
            for name, rows in self.totals.rows.items()
        }
        row = {
            "run_id": f"synthetic-{self.seed}",
            "mode": "create",
            "input": f"synthetic:{self.shape.chunks}",
            "status": "complete",
            "started_at": started,
            "finished_at": datetime.now(UTC),
            "settings_json": "{}",
            "counts_json": json.dumps({"tables": self.totals.rows}),
            "versions_json": json.dumps(
                {"packages": {}, "tables": versions, "index_id": f"synthetic-{self.seed}"}
            ),
            "timings_json": "{}",
        }
        table = pa.Table.from_pylist([row], schema=schemas.MANIFEST.schema)
        write_deltalake(str(self.out / tables.MANIFEST), table, mode="append")

    def encode(self, names: list[str]) -> np.ndarray:
        """The store's concept vectors: each name's concept placed in its topic (see ``Mixture``)."""
        concepts = np.array([word_number(name) - 1 for name in names], np.int64)
        return self.mixture.around_concepts(concepts, self.shape)


def concept_ids(numbers: np.ndarray) -> pa.Array:
    return chunk_ids(np.asarray(numbers), seed=7_777)


def concept_name(number: int) -> str:
    # +1 keeps names of the first concepts at 2 syllables; ``encode`` undoes it.
    return pseudo_word(number + 1, min_syllables=3)


# ---- the whole index ------------------------------------------------------------------------------------
def generate(
    out: Path, chunks: int, seed: int = 0, *, store: bool = True, settings: Settings | None = None
) -> dict[str, Any]:
    """Write the index of ``chunks`` chunks in ``out`` (replacing it) and build its serving store;
    returns the sizes written, the generated statistics and the seconds taken."""
    from lazygraph.serving import build_store

    _clear(out)
    out.mkdir(parents=True)
    (out / SYNTHETIC_MARK).write_text("written by lazygraph bench synthetic-index\n")
    started, clock = datetime.now(UTC), time.perf_counter()
    generator = Generator.create(out, chunks, seed)
    for batch, start in enumerate(range(0, chunks, BATCH_CHUNKS)):
        generator.chunk_batch(batch, start, min(chunks, start + BATCH_CHUNKS))
    kept, degree, edges = generator.kept_concepts()
    generator.write(tables.EDGES, edges)
    generator.write(tables.PAIR_COUNTS, edges.select(["src", "dst", "cooccurrence"]))
    generator.write_concepts(kept, degree)
    generator.write_communities(kept)
    generator.write(tables.REJECTED, schemas.REJECTED.schema.empty_table())
    generator.write_manifest(started)
    tables_s = time.perf_counter() - clock
    report = {"chunks": chunks, "seed": seed, "rows": generator.totals.rows, "stats": stats(generator, kept)}
    report["tables_s"] = round(tables_s, 1)
    if store:
        meta = build_store(str(out), settings or Settings(), encode=generator.encode)
        report |= {
            "store": meta["store"],
            "vector_indexes": meta["vector_indexes"],
            "full_text": meta["full_text"],
        }
        report["store_s"] = round(time.perf_counter() - clock - tables_s, 1)
    return report


def rebuild_store(out: Path, chunks: int, seed: int, settings: Settings | None = None) -> dict[str, Any]:
    """Rewrite the serving store of the synthetic index in ``out`` (its tables kept), with the concept
    vectors of the generator that wrote it; returns the store's metadata and the seconds taken."""
    from lazygraph.serving import build_store

    if not (out / SYNTHETIC_MARK).exists():
        raise ConfigError(f"{out} holds no synthetic index; generate one with --chunks N --out {out}")
    generator = Generator.create(out, chunks, seed)
    clock = time.perf_counter()
    meta = build_store(str(out), settings or Settings(), encode=generator.encode, force=True)
    return {
        "store": meta["store"],
        "format": meta["format"],
        "store_s": round(time.perf_counter() - clock, 1),
    }


def _clear(out: Path) -> None:
    """Remove an earlier synthetic index at ``out``; refuse to touch any other non-empty directory (a
    real index given by mistake must never be deleted by a benchmark)."""
    if not out.exists():
        return
    if any(out.iterdir()) and not (out / SYNTHETIC_MARK).exists():
        raise ConfigError(
            f"{out} is not empty and holds no synthetic index; "
            "give the generator a new or empty directory (it replaces only indexes it wrote)"
        )
    shutil.rmtree(out)


def stats(generator: Generator, kept: np.ndarray) -> dict[str, Any]:
    """The generated index's own statistics, to compare with the measured ones (module doc)."""
    from lazygraph.bench.corpus_stats import zipf_exponent

    rows, shape = generator.totals.rows, generator.shape
    frequencies = generator.totals.chunk_frequency
    seen = frequencies[frequencies > 0]
    return {
        "mentions_per_chunk": round(rows[tables.MENTIONS] / shape.chunks, 2),
        "terms_per_chunk": round(rows[tables.CHUNK_TERMS] / shape.chunks, 2),
        "concepts": int(len(seen)),
        "concepts_in_2_plus_chunks": int(np.sum(seen >= 2)),
        "kept_concepts": int(kept.sum()),
        "concept_zipf_exponent": round(zipf_exponent(dict(enumerate(seen.tolist()))), 3),
        "communities_per_level": shape.per_level,
        "chunk_links_per_level": round(rows[tables.CHUNK_COMMUNITIES] / shape.chunks / LEVELS, 2),
    }


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(
        prog="lazygraph bench synthetic-index", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--chunks", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-store", action="store_true", help="Write the Delta tables only.")
    parser.add_argument(
        "--store-only",
        action="store_true",
        help="Rebuild only the serving store of the synthetic index already in --out (same --chunks and "
        "--seed it was generated with), e.g. in a new store format.",
    )
    args = parser.parse_args(argv)
    if args.store_only:
        print(json.dumps(rebuild_store(args.out, args.chunks, args.seed, settings)))
        return 0
    report = generate(args.out, args.chunks, args.seed, store=not args.no_store, settings=settings)
    print(json.dumps(report))
    return 0
