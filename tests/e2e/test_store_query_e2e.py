"""The vector method on the bundled sample corpus (Spark, spaCy, MiniLM, the embedded LLM) through the
public API, once over the in-memory snapshot and once over the serving store (``query.index_source:
store``): the same contexts and the same answers. The LLM cache is off, so each source's answers come
from the model itself (temperature 0), and short contexts keep the answer calls quick on two cores."""

from __future__ import annotations

import pytest

from lazygraph import api
from lazygraph.settings import Settings

pytestmark = pytest.mark.e2e

QUESTIONS = [
    "Which fishers use the old harbour?",
    "What did the survey after Storm Isolde find in the eelgrass?",
    "Who sponsors the Lantern Tide Festival?",
]
CONTEXT_TOKENS = 700  # two or three passages


@pytest.fixture(scope="module")
def sample_index(settings, spark, tmp_path_factory) -> str:
    from rich.console import Console

    from lazygraph.demo_data import sample_corpus_path
    from lazygraph.pipeline import build_index

    index = str(tmp_path_factory.mktemp("store-query") / "sample-index")
    report = build_index(settings, str(sample_corpus_path()), index, False, Console(stderr=True))
    assert report["counts"]["chunks"] == 30
    assert api.build_store(index, settings=settings)["built"]
    return index


def source_settings(settings: Settings, source: str) -> Settings:
    query = settings.query.model_copy(
        update={
            "index_source": source,
            "llm_cache": settings.query.llm_cache.model_copy(update={"enabled": False}),
            "answer_max_tokens": 128,
        }
    )
    return settings.model_copy(update={"query": query})


def test_the_store_and_the_snapshot_answer_alike(sample_index, settings) -> None:
    assert settings.llm.synthesis.temperature == 0.0  # answers are deterministic
    answers = {}
    for source in ("snapshot", "store"):
        index = api.open_index(sample_index, settings=source_settings(settings, source))
        answers[source] = [index.query(q, method="vector", context_tokens=CONTEXT_TOKENS) for q in QUESTIONS]
        assert index.engine().has_snapshot == (source == "snapshot")
    for by_snapshot, by_store in zip(answers["snapshot"], answers["store"], strict=True):
        assert by_store.context_text == by_snapshot.context_text  # the same prompt
        assert by_store.context_chunk_ids == by_snapshot.context_chunk_ids and by_store.context_chunk_ids
        assert by_store.text == by_snapshot.text and by_store.text
        assert by_store.sources == by_snapshot.sources
        assert by_store.cost.llm_calls == by_snapshot.cost.llm_calls == 1
