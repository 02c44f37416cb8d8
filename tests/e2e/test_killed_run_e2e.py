"""A `lazygraph index --append` killed (SIGKILL) after it wrote chunks, followed by an append of a *different*
input: the killed run's rows are never published and are undone by the next run, so no chunk, mention,
embedding or term of the killed input is in the index, and every chunk's document is in documents."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lazygraph import tables
from lazygraph.demo_data import sample_corpus_path
from lazygraph.manifest import complete_versions
from lazygraph.tables.commits import commit_author

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CHUNK_TABLES = (tables.CHUNKS, tables.MENTIONS, tables.CHUNK_EMBEDDINGS, tables.CHUNK_TERMS)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZYGRAPH_") or k == "LAZYGRAPH_HOME"}
    env.update(
        PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        OMP_WAIT_POLICY="passive",
        LAZYGRAPH_SPARK__MASTER="local[2]",
        LAZYGRAPH_SPARK__SHUFFLE_PARTITIONS="2",
        LAZYGRAPH_SPARK__CHECKPOINT_DIR=str(tmp_path / "checkpoints"),
    )
    return env


def _docs(path: Path, lines: range) -> tuple[Path, set[str]]:
    import json

    source = sample_corpus_path().read_text().splitlines()
    path.write_text("".join(source[i] + "\n" for i in lines))
    return path, {json.loads(source[i])["doc_id"] for i in lines}


def _index(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lazygraph", "index", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )


def _published(index: Path, name: str) -> list[dict]:
    _, versions = complete_versions(str(index))
    return DeltaTable(str(index / name), version=versions[name]).to_pyarrow_table().to_pylist()


def test_a_killed_append_is_never_published_by_the_append_of_another_input(tmp_path: Path) -> None:
    env = _env(tmp_path)
    index = tmp_path / "index"
    first, first_ids = _docs(tmp_path / "a.jsonl", range(0, 8))
    killed, killed_ids = _docs(tmp_path / "b.jsonl", range(8, 14))
    other, other_ids = _docs(tmp_path / "c.jsonl", range(14, 18))
    built = _index(["--input", str(first), "--index", str(index)], env)
    assert built.returncode == 0, built.stderr[-3000:]
    chunks_version = DeltaTable(str(index / tables.CHUNKS)).version()

    # The append of b.jsonl, killed once its chunks are committed (its documents are written last).
    command = ["index", "--append", "--input", str(killed), "--index", str(index)]
    run = subprocess.Popen(
        [sys.executable, "-m", "lazygraph", *command],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 900
    while DeltaTable(str(index / tables.CHUNKS)).version() == chunks_version:
        assert run.poll() is None, "the append ended before it was killed"
        assert time.monotonic() < deadline
        time.sleep(0.2)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait(timeout=60)
    author = commit_author(DeltaTable(str(index / tables.CHUNKS)))
    assert author and author.startswith("lazygraph:"), "the killed run's commit carries its run id"
    unpublished = {
        row["doc_id"] for row in DeltaTable(str(index / tables.CHUNKS)).to_pyarrow_table().to_pylist()
    }
    assert unpublished & killed_ids, "the killed run did write chunks"

    recovered = _index(["--append", "--input", str(other), "--index", str(index)], env)
    assert recovered.returncode == 0, recovered.stderr[-3000:]
    assert "undid the unpublished writes of" in recovered.stderr

    documents = {row["doc_id"] for row in _published(index, tables.DOCUMENTS)}
    assert documents == first_ids | other_ids
    chunks = _published(index, tables.CHUNKS)
    chunk_ids = {row["chunk_id"] for row in chunks}
    assert {row["doc_id"] for row in chunks} == documents, "every chunk's document is in documents"
    for name in CHUNK_TABLES[1:]:
        assert {row["chunk_id"] for row in _published(index, name)} <= chunk_ids, f"orphan rows in {name}"
    assert {row["chunk_id"] for row in _published(index, tables.CHUNK_EMBEDDINGS)} == chunk_ids
    # Nor are the killed run's rows left in the tables' latest versions, for a later run to build on.
    for name in CHUNK_TABLES:
        latest = DeltaTable(str(index / name)).to_pyarrow_table()
        assert set(latest["chunk_id"].to_pylist()) <= chunk_ids, name
