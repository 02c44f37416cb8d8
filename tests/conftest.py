"""Shared fixtures: one Spark session, one embedded LLM and one embedder per test run.

They use the real runtimes from LAZYGRAPH_HOME (jars and model file fetched by
cluster/bootstrap.sh), on small data, so the suite stays fast on two cores.
"""

from __future__ import annotations

import os

import pytest

from lazygraph.settings import Settings, load_settings

os.environ.setdefault("OMP_WAIT_POLICY", "passive")


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
