"""One query engine answering several queries at once in threads, as a query actor does with
``ray.queries_per_actor`` above 1: each query gets the answer, context and cost record it gets alone.

The lazy method on the serving store (its working sets) and on the snapshot, with the fake model; the
LLM cache is off so that every query calls the model as it would alone, and each query's cost record
must count its own calls only (the model's clients are shared by the threads)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from test_query_lazy_on_store import QUESTIONS, open_engine
from test_query_lazy_on_store import embedder as embedder  # noqa: F401 (fixtures)
from test_query_lazy_on_store import index as index  # noqa: F401

from lazygraph.query.engine import QueryEngine
from lazygraph.settings import load_settings

COST = ("llm_calls", "prompt_tokens", "completion_tokens", "relevance_tests")


def record(engine: QueryEngine, question: str) -> dict[str, Any]:
    """What a query gives that must not depend on the queries beside it (timings excepted)."""
    result = engine.answer(question, method="lazy", budget=6)
    data = result.to_json()
    cost = {key: data["cost"][key] for key in COST}
    return {"answer": data["answer"], "chunks": data["context_chunk_ids"], "cost": cost}


@pytest.mark.parametrize("source", ["snapshot", "store"])
def test_queries_at_once_in_threads_answer_as_they_do_one_by_one(index, embedder, tmp_path, source) -> None:  # noqa: F811
    def fresh_engine(home: Path) -> QueryEngine:
        cfg = load_settings(home=home, query={"index_source": source, "llm_cache": {"enabled": False}})
        return open_engine(cfg, index, embedder)

    alone = fresh_engine(tmp_path / "alone")
    one_by_one = [record(alone, q) for q in QUESTIONS]
    assert all(r["cost"]["llm_calls"] > 1 for r in one_by_one), "each query called the model"
    assert len({r["cost"]["prompt_tokens"] for r in one_by_one}) > 1, "the queries cost differently"

    shared = fresh_engine(tmp_path / "shared")  # its models, caches and store opened by the threads
    with ThreadPoolExecutor(4) as pool:
        at_once = list(pool.map(lambda q: record(shared, q), QUESTIONS * 3))
    assert at_once == one_by_one * 3
