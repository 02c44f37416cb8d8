"""The vector-RAG baselines (SS_8K, SS_64K): chunks by similarity to the question up to the context
limit, then one answer call over them as numbered passages.

No model is called before the answer, so the evaluation measures vector recall with the same
selection at no LLM cost. A search that scores chunks another way (e.g. a hybrid of BM25 and vector
similarity) returns its own ``PassageRetrieval`` and keeps this cut and answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from lazygraph.llm.base import LLMClient
from lazygraph.llm.factory import LLMRoles
from lazygraph.llm.prompts import load_prompt, passage_block
from lazygraph.query.answer import Answer, answer_schema, structured_answer
from lazygraph.query.cost import CostRecorder
from lazygraph.query.reader import ChunkRecord, ChunkRef, IndexReader, RankedChunks, top_chunks
from lazygraph.query.search.base import Context, Plan, Search
from lazygraph.settings import QuerySettings

# Chunks examined past the first one that does not fit, so a long chunk does not end the selection.
LOOKAHEAD = 64


class Ranking(Protocol):
    """Chunks ranked on demand, best first, as deep as asked (``NearestChunks``, or the hybrid
    search's fusion over the serving store)."""

    def ranked(self, k: int) -> RankedChunks: ...


@dataclass
class PassageRetrieval:
    """The chunks that may answer, best first, as deep as a context cut asks.

    A reader holding every vector gives every chunk a score (``scores``: chunk i at position i; the
    hybrid search fuses two such). A serving store ranks on demand: ``nearest`` fetches the chunks
    nearest the question's vector at the cut, so a query reads only the rows it quotes."""

    scores: np.ndarray
    nearest: NearestChunks | Ranking | None = None
    tie_keys: np.ndarray | None = None  # equal scores ranked by these, lowest first (``top_chunks``)

    @classmethod
    def near(cls, reader: IndexReader, vector: np.ndarray) -> PassageRetrieval:
        scores = reader.similarities(vector)
        if scores is not None:
            return cls(scores)
        return cls(np.zeros(0, dtype=np.float32), NearestChunks(reader, vector))

    def ranked(self, k: int) -> RankedChunks:
        """The ``k`` best chunks, best first."""
        if self.nearest is not None:
            return self.nearest.ranked(k)
        return top_chunks(self.scores, k, self.tie_keys)


class NearestChunks:
    """The chunks nearest one vector, fetched once as deep as asked: a cut to a smaller limit (the
    evaluation cuts one search to several) reads the head of what a deeper one fetched."""

    def __init__(self, reader: IndexReader, vector: np.ndarray) -> None:
        self.reader = reader
        self.vector = np.asarray(vector, dtype=np.float32)
        self._fetched: RankedChunks | None = None
        self._depth = 0

    def ranked(self, k: int) -> RankedChunks:
        if self._fetched is None or k > self._depth:
            self._fetched = self.reader.nearest_chunks(self.vector, k)
            self._depth = k
        return self._fetched.head(k)


class VectorSearch(Search[PassageRetrieval]):
    calls_models = False
    selects = "top chunks by similarity"
    serves_from_store = True

    def retrieve(
        self, question: str, plan: Plan, roles: LLMRoles | None, recorder: CostRecorder
    ) -> PassageRetrieval:
        with recorder.stage("embed"):
            vector = self.engine.encode([question])[0]
        with recorder.stage("select"):
            return PassageRetrieval.near(self.reader, vector)

    def empty(self, question: str) -> PassageRetrieval:
        return PassageRetrieval(np.zeros(0, dtype=np.float32))

    def context(self, found: PassageRetrieval, limit: int, recorder: CostRecorder) -> Context:
        with recorder.stage("select"):
            chunks = select_passages(self.reader, found, limit, self.engine.count_tokens)
        recorder.log(f"vector: {len(chunks)} chunks within {limit} tokens")
        return Context(chunks=chunks)

    def answer(
        self,
        question: str,
        found: PassageRetrieval,
        context: Context,
        roles: LLMRoles,
        recorder: CostRecorder,
    ) -> Answer:
        with recorder.stage("answer"):
            return vector_answer(question, self.reader, context.chunks, roles.synthesis, self.qs)

    def render_context(self, found: PassageRetrieval, context: Context) -> str:
        return render_passages(self.reader, context.chunks)


def render_passages(reader: IndexReader, chunks: Sequence[ChunkRef]) -> str:
    """The chunks as the answer prompt quotes them: passages 1..n, each inside its tags."""
    return render_records(reader.chunk_records(chunks))


def render_passage(reader: IndexReader, number: int, chunk: ChunkRef) -> str:
    """Passage ``number`` inside its tags (the number the answer cites), its text unable to close them."""
    return passage_block(number, reader.chunk_records([chunk])[0].passage)


def render_records(records: Sequence[ChunkRecord]) -> str:
    """Passages 1..n inside their tags (the numbers the answer cites), texts unable to close them."""
    return "\n\n".join(passage_block(n, r.passage) for n, r in enumerate(records, start=1))


def select_passages(
    reader: IndexReader, found: PassageRetrieval, limit: int, count_tokens: Callable[[str], int]
) -> list[ChunkRef]:
    """Chunks by descending score whose rendered passages fit in ``limit`` tokens together."""
    if reader.n_chunks == 0:
        return []
    # Only the head of the ranking can fit: about twice the chunks of average length that fill the limit.
    average = max(1.0, reader.average_chunk_tokens())
    head = min(reader.n_chunks, int(limit / average * 2) + LOOKAHEAD)
    ranked = found.ranked(head)
    chosen: list[ChunkRef] = []
    used, skipped = 0, 0
    for chunk, record in zip(ranked.chunks, reader.chunk_records(ranked.chunks), strict=True):
        tokens = count_tokens(passage_block(len(chosen) + 1, record.passage))
        if used + tokens <= limit:
            chosen.append(chunk)
            used += tokens
        else:
            skipped += 1
            if skipped > LOOKAHEAD:
                break
    return chosen


def vector_answer(
    question: str,
    reader: IndexReader,
    chunks: list[ChunkRef],
    client: LLMClient,
    qs: QuerySettings,
) -> Answer:
    """One structured answer call over the selected passages; each sentence cites passages by number."""
    records = reader.chunk_records(chunks)
    prompt = load_prompt("vector_answer", qs.prompts.vector_answer)
    messages = prompt.messages(
        passages=render_records(records),
        question=question,
        max_facts=str(qs.max_facts_per_sentence),
    )
    schema = answer_schema(
        len(chunks), qs.max_facts_per_sentence, qs.answer_max_sentences, qs.answer_sentence_max_chars
    )
    return structured_answer(
        client,
        messages,
        schema,
        qs.answer_max_tokens,
        [[c] for c in chunks],
        [r.text for r in records],
        reader,
        qs,
    )
