"""The vector-RAG baselines (SS_8K, SS_64K): chunks by similarity to the question up to the context
limit, then one answer call over them as numbered passages.

No model is called before the answer, so the evaluation measures vector recall with the same
selection at no LLM cost. A search that scores chunks another way (e.g. a hybrid of BM25 and vector
similarity) returns its own ``PassageRetrieval`` and keeps this cut and answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lazygraph.llm.base import LLMClient
from lazygraph.llm.factory import LLMRoles
from lazygraph.llm.prompts import load_prompt, passage_block
from lazygraph.query.answer import Answer, answer_schema, structured_answer
from lazygraph.query.cost import CostRecorder
from lazygraph.query.search.base import Context, Plan, Search
from lazygraph.query.snapshot import IndexSnapshot
from lazygraph.settings import QuerySettings

# Chunks examined past the first one that does not fit, so a long chunk does not end the selection.
LOOKAHEAD = 64


@dataclass
class PassageRetrieval:
    """A score for every chunk (higher is better); the context takes the best that fit."""

    scores: np.ndarray


class VectorSearch(Search[PassageRetrieval]):
    calls_models = False
    selects = "top chunks by similarity"

    def retrieve(
        self, question: str, plan: Plan, roles: LLMRoles | None, recorder: CostRecorder
    ) -> PassageRetrieval:
        with recorder.stage("embed"):
            vector = self.engine.encode([question])[0]
        with recorder.stage("select"):
            return PassageRetrieval(self.snapshot.similarities(vector))

    def empty(self, question: str) -> PassageRetrieval:
        return PassageRetrieval(np.zeros(0, dtype=np.float32))

    def context(self, found: PassageRetrieval, limit: int, recorder: CostRecorder) -> Context:
        with recorder.stage("select"):
            chunks = select_passages(self.snapshot, found.scores, limit, self.engine.count_tokens)
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
            return vector_answer(question, self.snapshot, context.chunks, roles.synthesis, self.qs)

    def render_context(self, found: PassageRetrieval, context: Context) -> str:
        return render_passages(self.snapshot, context.chunks)


def render_passages(snapshot: IndexSnapshot, chunks: list[int]) -> str:
    """The chunks as the answer prompt quotes them: passages 1..n, each inside its tags."""
    return "\n\n".join(render_passage(snapshot, n, c) for n, c in enumerate(chunks, start=1))


def render_passage(snapshot: IndexSnapshot, number: int, chunk: int) -> str:
    """Passage ``number`` inside its tags (the number the answer cites), its text unable to close them."""
    return passage_block(number, snapshot.passage(chunk))


def select_passages(
    snapshot: IndexSnapshot, scores: np.ndarray, limit: int, count_tokens: Callable[[str], int]
) -> list[int]:
    """Chunks by descending score whose rendered passages fit in ``limit`` tokens together."""
    if snapshot.n_chunks == 0:
        return []
    # Only the head of the ranking can fit; partition instead of sorting the whole corpus.
    average = max(1.0, float(snapshot.chunk_tokens.mean()) if len(snapshot.chunk_tokens) else 1.0)
    head = min(snapshot.n_chunks, int(limit / average * 2) + LOOKAHEAD)
    top = (
        np.argpartition(-scores, head - 1)[:head]
        if head < snapshot.n_chunks
        else np.arange(snapshot.n_chunks)
    )
    top = top[np.argsort(-scores[top], kind="stable")]
    chosen: list[int] = []
    used, skipped = 0, 0
    for chunk in top.tolist():
        tokens = count_tokens(render_passage(snapshot, len(chosen) + 1, chunk))
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
    snapshot: IndexSnapshot,
    chunks: list[int],
    client: LLMClient,
    qs: QuerySettings,
) -> Answer:
    """One structured answer call over the selected passages; each sentence cites passages by number."""
    prompt = load_prompt("vector_answer", qs.prompts.vector_answer)
    messages = prompt.messages(
        passages=render_passages(snapshot, chunks),
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
        [str(snapshot.chunk_texts[c]) for c in chunks],
        snapshot,
        qs,
    )
