"""The approximate vector index through the real command line: `lazygraph index` builds it with Spark
(threshold 0, so a dozen documents are enough), `lazygraph query` searches through it, and an append
builds the index of the new embeddings version."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.corpus import DOCS, write_jsonl

from lazygraph import tables
from lazygraph.query.snapshot import clear_cache, load_snapshot
from lazygraph.settings import load_settings
from lazygraph.vectors import store

pytestmark = pytest.mark.e2e

CLI = str(Path(sys.executable).parent / "lazygraph")
ANN_ENV = {"LAZYGRAPH_VECTORS__ANN_MIN_CHUNKS": "0", "LAZYGRAPH_VECTORS__CANDIDATES": "8"}


def run_cli(*args: str, timeout: int = 1200) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        **ANN_ENV,
        "OMP_WAIT_POLICY": "passive",
        "LAZYGRAPH_SPARK__MASTER": "local[2]",
        "LAZYGRAPH_SPARK__SHUFFLE_PARTITIONS": "2",
        "LAZYGRAPH_CHUNKING__CHUNK_TOKENS": "32",
        "LAZYGRAPH_CHUNKING__OVERLAP_TOKENS": "4",
    }
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


def _embeddings_version(index: str) -> int:
    return tables.open_delta(tables.table_uri(index, tables.CHUNK_EMBEDDINGS)).version()


def test_index_builds_and_query_uses_the_approximate_index(tmp_path: Path) -> None:
    index = str(tmp_path / "index")
    corpus = write_jsonl(tmp_path / "corpus.jsonl", DOCS)
    built = run_cli("index", "--input", str(corpus), "--index", index)
    assert built.returncode == 0, built.stderr[-3000:]
    n_chunks = json.loads(built.stdout)["counts"]["chunk_embeddings"]
    first = store.build_uri(index, _embeddings_version(index))
    meta = store.read_meta(first)
    assert meta is not None and meta["vectors"] == n_chunks and meta["code_bytes"] > meta["dim"]

    settings = load_settings(vectors={"ann_min_chunks": 0})
    clear_cache()
    snapshot = load_snapshot(index, settings)
    assert snapshot.vector_index is not None and snapshot.vector_index.ntotal == n_chunks
    assert snapshot.embeddings.size == 0

    asked = run_cli("query", "--index", index, "--budget", "4", "--json", "Who walked on the Moon?")
    assert asked.returncode == 0, asked.stderr[-3000:]
    answer = json.loads(asked.stdout)
    assert answer["cost"]["relevance_tests"] <= 4 and answer["subqueries"]

    extra = write_jsonl(
        tmp_path / "more.jsonl",
        [("saturn", "Saturn", "Saturn has rings of ice. NASA sent the Cassini probe to Saturn.")],
    )
    appended = run_cli("index", "--input", str(extra), "--index", index, "--append")
    assert appended.returncode == 0, appended.stderr[-3000:]
    second = store.build_uri(index, _embeddings_version(index))
    assert second != first
    assert store.read_meta(second)["vectors"] == json.loads(appended.stdout)["counts"]["chunk_embeddings"]
    assert store.list_builds(index) == [first, second]  # the previous build is kept for pinned readers
    clear_cache()
