"""The query engine with the real embedded LLM and the real embedder, on a tiny index written as Delta
tables (real embeddings). Kept to a handful of model calls: budget 4, short answers."""

from __future__ import annotations

import pytest
from rich.console import Console
from support.fakes import TinyIndex

from lazygraph.llm.factory import LLMRoles
from lazygraph.query.engine import QueryEngine
from lazygraph.settings import load_settings

pytestmark = pytest.mark.e2e

DOCS = [
    (
        "Harbor Lighthouse",
        "The Harbor Lighthouse was built in 1871 by the engineer Maria Velasco. "
        "It stands on the northern cliff of Port Allen and its lamp can be seen 30 kilometres out at sea.",
    ),
    (
        "Port Allen",
        "Port Allen is a fishing town on the Serra coast. Its economy depends on sardine fishing "
        "and a small ferry service to the islands.",
    ),
    (
        "Sourdough",
        "Sourdough bread is leavened by wild yeast and lactic acid bacteria kept in a starter "
        "that bakers feed with flour and water.",
    ),
    (
        "Alpine glaciers",
        "Alpine glaciers retreat when summer melting exceeds winter snowfall; most Alpine "
        "glaciers have lost mass since 1850.",
    ),
    (
        "Maria Velasco",
        "Maria Velasco was a Spanish civil engineer known for coastal lighthouses and for the "
        "iron pier at Cadiz.",
    ),
]


@pytest.fixture(scope="module")
def real_engine(tmp_path_factory):
    settings = load_settings(
        query={
            "cache_dir": tmp_path_factory.mktemp("cache"),
            "max_subqueries": 2,
            "min_subqueries": 1,
            "refine_max_tokens": 96,
            "map_max_tokens": 160,
            "answer_max_tokens": 96,
            "max_chunks_per_map_group": 4,
        },
    )
    from lazygraph.embed import get_embedder
    from lazygraph.llm import make_client

    embedder = get_embedder(settings.embedding)
    index = TinyIndex(
        texts=[t for _, t in DOCS], titles=[t for t, _ in DOCS], doc_ids=[f"doc{i}" for i in range(5)]
    )
    index.communities = {"coast": (0, None), "other": (0, None)}
    index.memberships = [(0, 0, "coast"), (1, 0, "coast"), (4, 0, "coast"), (2, 0, "other"), (3, 0, "other")]
    index.concepts = {"lighthouse": [0, 4], "port allen": [0, 1], "maria velasco": [0, 4], "glacier": [3]}
    index.edges = [("lighthouse", "port allen"), ("lighthouse", "maria velasco")]
    root = tmp_path_factory.mktemp("index")
    uri = index.write_delta(root, embedder)
    client = make_client("relevance", settings.llm.relevance, settings)
    return QueryEngine.open(
        settings,
        uri,
        Console(quiet=True),
        roles=LLMRoles(relevance=client, synthesis=client),
        embedder=embedder,
    )


def test_lazy_answer_with_the_real_model(real_engine) -> None:
    result = real_engine.answer("Who built the Harbor Lighthouse?", budget=4, trace=True)
    data = result.to_json()
    assert data["cost"]["relevance_tests"] <= 4
    assert "doc0" in data["context_doc_ids"]  # the lighthouse paragraph was judged relevant and used
    assert "[Data: Sources (" in data["answer"]
    assert data["cost"]["per_role"]["relevance"]["calls"] >= data["cost"]["relevance_tests"]
    assert data["cost"]["llm_seconds"] > data["cost"]["non_llm_seconds"]
    assert result.trace


def test_the_default_preset_answers_with_no_relevance_test_and_names_the_builder(real_engine) -> None:
    """Z0_Lite, the embedded default: no relevance tests, the lighthouse paragraph read through its
    focused passage, and the answer names who built it."""
    result = real_engine.answer("Who built the Harbor Lighthouse?")
    data = result.to_json()
    assert real_engine.settings.query.preset == "Z0_Lite"
    assert data["cost"]["relevance_tests"] == 0 and data["cost"]["per_role"]["relevance"]["calls"] >= 1
    assert "doc0" in data["context_doc_ids"]
    assert "Velasco" in data["answer"]


def test_vector_answer_with_the_real_model(real_engine) -> None:
    result = real_engine.answer("Who built the Harbor Lighthouse?", preset="SS_8K")
    assert result.context_doc_ids[0] == "doc0"
    assert result.answer and result.to_json()["cost"]["relevance_tests"] == 0
