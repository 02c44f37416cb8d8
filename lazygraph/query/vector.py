"""The vector-RAG baselines (SS_8K, SS_64K): top chunks by similarity up to the context-token limit,
then one answer call. The same selection measures vector recall in the retrieval evaluation."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lazygraph.llm.base import LLMClient
from lazygraph.llm.prompts import load_prompt, passage_block
from lazygraph.query.reduce import Answer, cited_answer
from lazygraph.query.snapshot import IndexSnapshot
from lazygraph.settings import QuerySettings

# Chunks examined past the first one that does not fit, so a long chunk does not end the selection.
LOOKAHEAD = 64


def render_passage(snapshot: IndexSnapshot, number: int, chunk: int) -> str:
    """Passage ``number`` inside its tags (the number the answer cites), its text unable to close them."""
    return passage_block(number, snapshot.passage(chunk))


def select_chunks(
    snapshot: IndexSnapshot, query_vector: np.ndarray, limit: int, count_tokens: Callable[[str], int]
) -> list[int]:
    """Chunks by descending similarity whose rendered passages fit in ``limit`` tokens together."""
    if snapshot.n_chunks == 0:
        return []
    sims = snapshot.similarities(query_vector)
    # Only the head of the ranking can fit; partition instead of sorting the whole corpus.
    average = max(1.0, float(snapshot.chunk_tokens.mean()) if len(snapshot.chunk_tokens) else 1.0)
    head = min(snapshot.n_chunks, int(limit / average * 2) + LOOKAHEAD)
    top = (
        np.argpartition(-sims, head - 1)[:head] if head < snapshot.n_chunks else np.arange(snapshot.n_chunks)
    )
    top = top[np.argsort(-sims[top], kind="stable")]
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
    prompt = load_prompt("vector_answer")
    passages = "\n\n".join(render_passage(snapshot, n, c) for n, c in enumerate(chunks, start=1))
    messages = prompt.messages(passages=passages, question=question, max_facts=str(qs.max_facts_per_sentence))
    return cited_answer(
        client,
        messages,
        [[c] for c in chunks],
        [str(snapshot.chunk_texts[c]) for c in chunks],
        snapshot,
        max_tokens=qs.answer_max_tokens,
        max_facts=qs.max_facts_per_sentence,
        max_sentences=qs.answer_max_sentences,
        max_sources=qs.max_sources_per_sentence,
    )
