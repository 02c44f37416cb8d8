"""Shared fixtures: one Spark session, one embedded LLM and one embedder per test run, and fresh
deterministic fakes (``hash_embedder``, ``fake_llm``) per test.

The session fixtures use the real runtimes from LAZYGRAPH_HOME (jars and model file fetched by
cluster/bootstrap.sh), on small data, so the suite stays fast on two cores. The fakes come from
``tests/support/fakes.py``; build them there directly when a test needs non-default arguments.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from lazygraph.settings import Settings, load_settings

if TYPE_CHECKING:
    from support.fakes import FakeLLM, HashEmbedder

os.environ.setdefault("OMP_WAIT_POLICY", "passive")


@pytest.fixture(autouse=True)
def published_relevance_rule_with_fakes(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tests with fakes judge relevance by P(yes) alone (the method as published): the default
    combined rule's weights are fitted to the embedded assessor and embedder, whose scores a fake's
    fixed P(yes) and hashed vectors do not resemble. End-to-end tests keep the defaults."""
    if request.node.get_closest_marker("e2e") is None:
        monkeypatch.setenv("LAZYGRAPH_QUERY__RELEVANCE__RULE", "p_yes")
        monkeypatch.setenv("LAZYGRAPH_QUERY__RELEVANCE__CASCADE", "false")


@pytest.fixture(scope="session")
def settings() -> Settings:
    return load_settings(
        spark={"master": "local[2]", "shuffle_partitions": 2, "driver_memory": "2g"},
        ray={"query_actors": 1, "actor_num_cpus": 0.5},
    )


@pytest.fixture(scope="session")
def spark(settings: Settings):
    from lazygraph.runtime.spark import get_spark

    session = get_spark(settings)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def embedded_llm(settings: Settings):
    """The real embedded model (llama.cpp, Qwen2.5-Coder-1.5B Q4_K_M) as the relevance role."""
    from lazygraph.llm import make_client

    return make_client("relevance", settings.llm.relevance, settings)


@pytest.fixture(scope="session")
def embedder(settings: Settings):
    from lazygraph.embed import get_embedder

    return get_embedder(settings.embedding)


@pytest.fixture()
def hash_embedder() -> HashEmbedder:
    """A fresh hashed bag-of-words embedder (the default dimension), one per test."""
    from support.fakes import HashEmbedder

    return HashEmbedder()


@pytest.fixture()
def fake_llm() -> FakeLLM:
    """A fresh default fake LLM (relevant when the passage holds "REL"), one per test: it records
    the tasks and relevance batches it served, so a test may assert on them."""
    from support.fakes import FakeLLM

    return FakeLLM()
