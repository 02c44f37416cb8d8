"""Several writers on one index at once: two `lazygraph index --append` processes of different inputs, a
`--watch --once` over a landing folder and a `--delete`, all started together, each waiting for the writer
lease. Every run completes one after the other, a run started with no patience is refused in one line naming
the holder, and the index they leave equals a fresh build of the union of their documents: every chunk's
document is in documents, and every table (up to community labels) matches. Long: marked ``slow``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lazygraph import tables
from lazygraph.demo_data import sample_corpus_path
from lazygraph.manifest import complete_versions
from lazygraph.tables.lease import WriterLease
from lazygraph.tables.read import read_table

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DELETED = ("s03", "s05")


def _env(tmp_path: Path, wait_s: float = 1800) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZYGRAPH_") or k == "LAZYGRAPH_HOME"}
    env.update(
        PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        OMP_WAIT_POLICY="passive",
        LAZYGRAPH_SPARK__MASTER="local[2]",
        LAZYGRAPH_SPARK__SHUFFLE_PARTITIONS="2",
        LAZYGRAPH_SPARK__DRIVER_MEMORY="1g",
        LAZYGRAPH_SPARK__CHECKPOINT_DIR=str(tmp_path / "checkpoints"),
        LAZYGRAPH_WRITER__WAIT_S=str(wait_s),
        LAZYGRAPH_WRITER__POLL_S="0.5",
        # Communities detected afresh by every run, as a fresh build detects them.
        LAZYGRAPH_COMMUNITIES__REDETECT_DRIFT="0",
    )
    return env


def _lines(lines: range) -> list[str]:
    source = sample_corpus_path().read_text().splitlines()
    return [source[i] + "\n" for i in lines]


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("w") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "lazygraph", "index", *args], env=env, stdout=sink, stderr=sink
        )


def _published(index: Path) -> dict[str, list[dict[str, Any]]]:
    from lazygraph.manifest import open_complete

    _, versions = complete_versions(str(index))
    names = [n for n in tables.ALL_TABLES if n != tables.MANIFEST]
    return {name: read_table(t).to_pylist() for name, t in open_complete(str(index), names, versions).items()}


def _partitions(rows: list[dict[str, Any]]) -> dict[int, set[frozenset[str]]]:
    members: dict[tuple[int, str], set[str]] = {}
    for row in rows:
        members.setdefault((row["level"], row["community_id"]), set()).add(row["concept_id"])
    levels: dict[int, set[frozenset[str]]] = {}
    for (level, _), concepts in members.items():
        levels.setdefault(level, set()).add(frozenset(concepts))
    return levels


def _comparable(published: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    def rows(name: str, *columns: str, digits: int | None = None) -> set[tuple]:
        return {
            tuple(round(r[c], digits) if digits and isinstance(r[c], float) else r[c] for c in columns)
            for r in published[name]
        }

    return {
        "documents": rows("documents", "doc_id", "text_hash"),
        "chunks": rows("chunks", "chunk_id", "doc_id", "ord", "text"),
        "mentions": rows("mentions", "chunk_id", "concept_id", "count"),
        "chunk_embeddings": rows("chunk_embeddings", "chunk_id", "dim"),
        "chunk_terms": rows("chunk_terms", "chunk_id", "term", "count"),
        "concept_counts": rows(
            "concept_counts", "concept_id", "frequency", "chunk_frequency", "doc_frequency"
        ),
        "pair_counts": rows("pair_counts", "src", "dst", "cooccurrence"),
        "concepts": rows(
            "concepts", "concept_id", "frequency", "chunk_frequency", "doc_frequency", "degree", "kept"
        ),
        "edges": rows("edges", "src", "dst", "cooccurrence", "weight", "kept", digits=9),
        "communities": _partitions(published["concept_communities"]),
    }


def test_concurrent_appends_watch_and_delete_equal_a_fresh_build_of_their_union(tmp_path: Path) -> None:
    index = tmp_path / "index"
    base = tmp_path / "base.jsonl"
    base.write_text("".join(_lines(range(0, 8))))
    built = subprocess.run(
        [sys.executable, "-m", "lazygraph", "index", "--input", str(base), "--index", str(index)],
        env=_env(tmp_path), capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]

    (tmp_path / "b.jsonl").write_text("".join(_lines(range(8, 12))))
    (tmp_path / "c.jsonl").write_text("".join(_lines(range(12, 16))))
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "d.jsonl").write_text("".join(_lines(range(16, 19))))
    (tmp_path / "gone.txt").write_text("\n".join(DELETED) + "\n")
    runs = {
        "append-b": ["--append", "--input", str(tmp_path / "b.jsonl"), "--index", str(index)],
        "append-c": ["--append", "--input", str(tmp_path / "c.jsonl"), "--index", str(index)],
        "watch-d": ["--watch", "--once", "--input", str(landing), "--index", str(index)],
        "delete": ["--delete", str(tmp_path / "gone.txt"), "--index", str(index)],
    }
    started = {name: _start(args, _env(tmp_path), tmp_path / f"{name}.log") for name, args in runs.items()}

    # While they run, one without patience is refused, naming the run that holds the index. (Its input is
    # part of the union: should it find the lease free between two runs, it changes nothing.)
    refusal = None
    deadline = time.monotonic() + 600
    while refusal is None and time.monotonic() < deadline:
        holder = WriterLease(str(index), "observer", _settings()).holder()
        if holder is None or holder.state != "held":
            time.sleep(0.2)
            continue
        impatient = subprocess.run(
            [sys.executable, "-m", "lazygraph", "index", "--append", "--input", str(tmp_path / "b.jsonl"),
             "--index", str(index)],
            env=_env(tmp_path, wait_s=0), capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        if impatient.returncode == 2:
            refusal = impatient.stderr
    assert refusal is not None, "no run was refused while the index was held"
    lines = [line for line in refusal.splitlines() if line.strip()]
    assert len(lines) == 1 and "is being written by run" in lines[0] and "writer.wait_s" in lines[0], refusal

    for name, process in started.items():
        assert process.wait(timeout=3600) == 0, (tmp_path / f"{name}.log").read_text()[-4000:]
    modes = _manifest_modes(index)
    assert modes[0] == "create" and modes.count("delete") == 1 and len(modes) >= 5, modes

    published = _published(index)
    documents = {r["doc_id"] for r in published["documents"]}
    union = {json.loads(line)["doc_id"] for line in _lines(range(0, 19))} - set(DELETED)
    assert documents == union
    assert {r["doc_id"] for r in published["chunks"]} == documents, "every chunk's document is in documents"

    fresh = tmp_path / "fresh"
    union_file = tmp_path / "union.jsonl"
    union_file.write_text(
        "".join(line for line in _lines(range(0, 19)) if json.loads(line)["doc_id"] in union)
    )
    rebuilt = subprocess.run(
        [sys.executable, "-m", "lazygraph", "index", "--input", str(union_file), "--index", str(fresh)],
        env=_env(tmp_path), capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    concurrent, expected = _comparable(published), _comparable(_published(fresh))
    for name in expected:
        assert concurrent[name] == expected[name], name


def _settings():
    from lazygraph.settings import load_settings

    return load_settings()


def _manifest_modes(index: Path) -> list[str]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(index / tables.MANIFEST)).to_pyarrow_table().to_pylist()
    return [r["mode"] for r in sorted(rows, key=lambda r: r["finished_at"]) if r["status"] == "complete"]
