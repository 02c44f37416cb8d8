"""Sentence-level focus: the sentences of a chunk that bear on a subquery, within a token budget.

A relevance test on the embedded CPU model costs about one second per hundred prompt tokens, and a
300-token chunk usually answers a subquery in one or two of its sentences. So the assessor reads the
chunk's title and its sentences that bear most on the subquery, in the chunk's own order and marked
with "…" where sentences were left out, up to ``query.focus_tokens`` tokens; the map step then
extracts claims from those same sentences, so the context holds facts rather than whole paragraphs.

A sentence bears on the subquery by its embedding cosine plus ``query.focus_lexical_weight`` times
the IDF-weighted share of the subquery's terms it contains: the sentence that names the exact person
or place of a bridge question often reads as less similar to the question than a generic one.

Sentence vectors are computed on first use and kept for the life of the snapshot's process (a chunk
tested by one query is often tested by the next). ``focus_tokens = 0`` turns the focus off: the
whole chunk is read, as before.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence

import numpy as np

from lazygraph.lexical.terms import tokenize
from lazygraph.query.snapshot import IndexSnapshot

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
# Abbreviations that a name or a number follows: titles ("Hon. Winnie Kiiza", "Gen. Lee"), "c." and
# "ca." before a year, "e.g."/"i.e.", and numbering ("Op. 27", "Vol. 2"). Company suffixes ("Inc.",
# "Ltd.") are left out: they end sentences as often as not.
_ABBREVIATION_END = re.compile(
    r"(?:\b(?:Dr|Mr|Mrs|Ms|Prof|St|Sr|Jr|Mt|No|Nos|vs|Hon|Gen|Col|Lt|Capt|Sgt|Cpl|Maj|Brig|Adm|Cmdr|Rev|"
    r"Fr|Msgr|Gov|Sen|Rep|Mme|Mlle|Op|Vol|pp|ca|c|e\.g|i\.e)|\b[A-Z])\.$"
)
GAP = "…"


def split_sentences(text: str) -> list[str]:
    """Sentences of a chunk: end punctuation followed by a capital or a digit, except after a title
    or an initial ("Dr. Wren", "J. Smith"), which would cut a name in two."""
    sentences: list[str] = []
    for piece in _SENTENCE_END.split(text):
        piece = piece.strip()
        if not piece:
            continue
        if sentences and _ABBREVIATION_END.search(sentences[-1]):
            sentences[-1] = f"{sentences[-1]} {piece}"
        else:
            sentences.append(piece)
    return sentences


class SentenceFocus:
    """Per chunk: its sentences and their vectors; per (chunk, subquery vector): the focused passage."""

    def __init__(
        self,
        snapshot: IndexSnapshot,
        encode: Callable[[Sequence[str]], np.ndarray],
        count_tokens: Callable[[str], int],
        max_tokens: int,
        lexical_weight: float = 0.0,
    ) -> None:
        self.snapshot = snapshot
        self.encode = encode
        self.count_tokens = count_tokens
        self.max_tokens = max_tokens
        self.lexical_weight = lexical_weight
        # chunk -> its sentences, their vectors, their token counts, and their terms
        self._sentences: dict[int, tuple[list[str], np.ndarray, list[int], list[set[str]]]] = {}
        self._lock = threading.Lock()

    def passages(
        self,
        chunks: Sequence[int],
        query_vector: np.ndarray,
        query_text: str = "",
        max_tokens: int | None = None,
    ) -> list[str]:
        """The focused passage of each chunk for one subquery (the whole chunk when it already fits).

        ``max_tokens`` overrides the focus length for this call (the assessor reads fewer tokens than
        the map step quotes); the sentences' vectors are shared either way."""
        limit = self.max_tokens if max_tokens is None else max_tokens
        if limit <= 0:
            return [self.snapshot.passage(c) for c in chunks]
        self._prepare(chunks)
        weights = self.snapshot.term_weights(query_text) if self.lexical_weight > 0 and query_text else {}
        vector = np.asarray(query_vector, dtype=np.float32)
        return [self._focus(c, vector, weights, limit) for c in chunks]

    def _prepare(self, chunks: Sequence[int]) -> None:
        """Split and embed, in one batch, the chunks not seen before."""
        with self._lock:
            todo = [c for c in dict.fromkeys(chunks) if c not in self._sentences]
        if not todo:
            return
        split = {c: split_sentences(str(self.snapshot.chunk_texts[c])) for c in todo}
        flat = [s for c in todo for s in split[c]]
        vectors = self.encode(flat) if flat else np.zeros((0, 1), dtype=np.float32)
        start = 0
        with self._lock:
            for c in todo:
                n = len(split[c])
                tokens = [self.count_tokens(s) for s in split[c]]
                terms = [set(tokenize(s)) for s in split[c]]
                self._sentences[c] = (split[c], np.asarray(vectors[start : start + n]), tokens, terms)
                start += n

    def _focus(self, chunk: int, query_vector: np.ndarray, term_weights: dict[str, float], limit: int) -> str:
        sentences, vectors, tokens, terms = self._sentences[chunk]
        title = str(self.snapshot.chunk_titles[chunk] or "")
        if sum(tokens) <= limit or len(sentences) <= 1:
            return self.snapshot.passage(chunk)
        scores = vectors @ query_vector
        total = sum(term_weights.values())
        if total > 0:
            overlap = [sum(term_weights.get(t, 0.0) for t in sentence) / total for sentence in terms]
            scores = scores + self.lexical_weight * np.asarray(overlap, dtype=np.float32)
        order = np.argsort(-scores, kind="stable")
        chosen: list[int] = []
        used = self.count_tokens(title) if title else 0
        for i in order.tolist():
            if used + tokens[i] <= limit or not chosen:
                chosen.append(i)
                used += tokens[i]
        return _join(title, sentences, sorted(chosen))


def _join(title: str, sentences: list[str], chosen: list[int]) -> str:
    """The chosen sentences in chunk order, with a gap mark wherever sentences were left out."""
    parts: list[str] = []
    previous = -1
    for i in chosen:
        if i != previous + 1:
            parts.append(GAP)
        parts.append(sentences[i])
        previous = i
    if previous != len(sentences) - 1:
        parts.append(GAP)
    body = " ".join(parts)
    return f"{title}\n{body}" if title else body
