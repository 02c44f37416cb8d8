"""The lexical part of a snapshot: BM25 statistics of the chunks, from the chunk_terms table.

Terms are indexed by their position in a sorted vocabulary (looked up by binary search, no dict);
``term_chunks`` is the inverted index, term -> the chunks containing it with the term's count, so a
query touches only the postings of its own terms. An index without a chunk_terms table (built before
the table existed) gets an empty vocabulary: every BM25 score is 0, and the hybrid search ranks by
vector similarity alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.sparse import csr_array

from lazygraph.query.snapshot.columns import numbers, positions
from lazygraph.query.snapshot.sparse import csr, empty_csr


class LexicalColumns(NamedTuple):
    """The snapshot fields about terms (named as in ``IndexSnapshot``)."""

    # Sorted terms as UTF-8 bytes (a fixed-width numpy bytes array: no Python object per term, so the
    # vocabulary is shared between processes without a copy); term i is row i of term_chunks.
    term_vocabulary: np.ndarray
    term_chunks: csr_array  # term -> chunks containing it; data: the term's count in the chunk
    chunk_lexical_length: np.ndarray  # float32 (n_chunks,): the chunk's number of terms, repeats counted
    average_lexical_length: float  # over every chunk of the snapshot (0 without terms)


def empty_lexical(n_chunks: int) -> LexicalColumns:
    """No lexical signal: no terms, every chunk of length 0."""
    return LexicalColumns(
        np.zeros(0, dtype="S1"), empty_csr((0, n_chunks)), np.zeros(n_chunks, np.float32), 0.0
    )


def build_lexical(table: pa.Table | None, chunk_keys: pa.Array) -> LexicalColumns:
    """The inverted index and chunk lengths, from the chunk_terms rows of the snapshot's chunks."""
    n_chunks = len(chunk_keys)
    if table is None or table.num_rows == 0 or n_chunks == 0:
        return empty_lexical(n_chunks)
    chunks = positions(table.column("chunk_id"), chunk_keys)
    known = chunks >= 0  # rows of chunks outside the snapshot (a replaced chunk's leftovers) are ignored
    table, chunks = table.filter(pa.array(known)), chunks[known]
    if table.num_rows == 0:
        return empty_lexical(n_chunks)
    vocabulary = _sorted_vocabulary(table.column("term"))
    terms = positions(table.column("term"), vocabulary)
    counts = numbers(table, "count", np.float32)
    lengths = np.bincount(chunks, weights=counts, minlength=n_chunks).astype(np.float32)
    return LexicalColumns(
        term_vocabulary=np.asarray([t.encode() for t in vocabulary.to_pylist()], dtype=bytes),
        term_chunks=csr(terms, chunks, (len(vocabulary), n_chunks), counts),
        chunk_lexical_length=lengths,
        average_lexical_length=float(lengths.mean()),
    )


def _sorted_vocabulary(terms: pa.ChunkedArray) -> pa.Array:
    """The distinct terms in UTF-8 byte order (Arrow sorts strings bytewise), the order in which
    ``np.searchsorted`` finds their encoded bytes in the vocabulary array."""
    distinct = pc.unique(terms)
    return distinct.take(pc.sort_indices(distinct))


def term_positions(vocabulary: np.ndarray, terms: Sequence[str]) -> dict[str, int]:
    """The vocabulary row of each distinct term of ``terms`` that the vocabulary holds."""
    if not len(vocabulary) or not terms:
        return {}
    distinct = sorted(set(terms))
    wanted = np.asarray([t.encode() for t in distinct], dtype=bytes)
    found = np.searchsorted(vocabulary, wanted)
    return {
        term: int(at)
        for term, word, at in zip(distinct, wanted, found, strict=True)
        if at < len(vocabulary) and vocabulary[at] == word
    }


def term_rows(vocabulary: np.ndarray, terms: Sequence[str]) -> np.ndarray:
    """The vocabulary index of each distinct term of ``terms`` that the vocabulary holds."""
    return np.asarray(sorted(term_positions(vocabulary, terms).values()), dtype=np.int64)


def bm25_scores(lexical: LexicalColumns, terms: Sequence[str], k1: float, b: float) -> np.ndarray:
    """Okapi BM25 of every chunk for the query ``terms`` (float32; 0 for a chunk with none of them).

    The formula of Robertson & Zaragoza (2009), "The Probabilistic Relevance Framework: BM25 and
    Beyond", section 3, summed over the distinct query terms t (query-term frequency ignored):

        idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

    with tf the term's count in the chunk, dl the chunk's length in terms, avgdl the mean length over
    all N chunks, and idf(t) = log(1 + (N - df + 0.5) / (df + 0.5)), df the number of chunks holding
    t. The "1 +" keeps idf positive for terms in more than half of the chunks, where the plain
    Robertson-Sparck Jones weight would turn negative and push matching chunks below non-matching ones.
    """
    lengths = lexical.chunk_lexical_length
    scores = np.zeros(len(lengths), dtype=np.float64)
    if lexical.average_lexical_length <= 0:
        return scores.astype(np.float32)
    n_chunks = len(lengths)
    postings = lexical.term_chunks
    for term in term_rows(lexical.term_vocabulary, terms).tolist():
        start, end = postings.indptr[term], postings.indptr[term + 1]
        chunks = postings.indices[start:end]
        tf = postings.data[start:end].astype(np.float64)
        df = end - start
        idf = np.log1p((n_chunks - df + 0.5) / (df + 0.5))
        norm = k1 * (1.0 - b + b * lengths[chunks] / lexical.average_lexical_length)
        scores[chunks] += idf * tf * (k1 + 1.0) / (tf + norm)  # a term lists each chunk once
    return scores.astype(np.float32)
