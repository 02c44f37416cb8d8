"""`lazygraph index --watch`: files dropped into a landing folder while the stream runs are indexed
exactly once, queries in between see complete versions, and an abrupt stop (SIGKILL in the middle of a
micro-batch) loses and duplicates nothing after a restart. Real Spark Structured Streaming, Delta,
spaCy and the embedding model, through the real CLI in a child process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from support.corpus import DOCS, write_jsonl

from lazygraph import tables
from lazygraph.manifest import complete_versions
from lazygraph.query.engine import QueryEngine
from lazygraph.query.snapshot import clear_cache
from lazygraph.settings import load_settings

pytestmark = pytest.mark.e2e

BATCHES = (DOCS[0:3], DOCS[3:6], DOCS[6:9])
ENV = {
    "LAZYGRAPH_WATCH__TRIGGER_SECONDS": "2",
    "LAZYGRAPH_SPARK__MASTER": "local[2]",
    "LAZYGRAPH_SPARK__SHUFFLE_PARTITIONS": "2",
    "LAZYGRAPH_SPARK__DRIVER_MEMORY": "2g",
    "LAZYGRAPH_CHUNKING__CHUNK_TOKENS": "32",
    "LAZYGRAPH_CHUNKING__OVERLAP_TOKENS": "4",
    "PYTHONUNBUFFERED": "1",
}


class Watcher:
    """One `lazygraph index --watch` child process and its log."""

    def __init__(self, landing: Path, index: Path, log: Path) -> None:
        self.log = log
        self.handle = log.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lazygraph",
                "index",
                "--watch",
                "--input",
                str(landing),
                "--index",
                str(index),
            ],
            stdout=self.handle,
            stderr=subprocess.STDOUT,
            env={**os.environ, **ENV},
            start_new_session=True,  # SIGKILL reaches the JVM and Python workers it started too
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, what: str, predicate: Callable[[], bool], timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            if self.proc.poll() is not None:
                pytest.fail(
                    f"the watch process exited ({self.proc.returncode}) before {what}:\n{self.text()[-3000:]}"
                )
            time.sleep(1)
        pytest.fail(f"timed out waiting for {what}:\n{self.text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the whole process group: no shutdown hook, no checkpoint commit."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)
        self.handle.close()

    def interrupt(self) -> int:
        """Ctrl-C: the stream stops between micro-batches and the command prints its report."""
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=120)
        finally:
            self.kill()


def drop(landing: Path, name: str, docs: list[tuple[str, str, str]]) -> None:
    """Write under a hidden name, then rename: the file source never sees half a file."""
    hidden = write_jsonl(landing / f".{name}.partial", docs)
    hidden.rename(landing / name)


def complete_documents(index: Path) -> int:
    """Documents of the last complete version (what a query sees), 0 before the first one."""
    try:
        _, versions = complete_versions(str(index))
    except Exception:  # no manifest yet
        return 0
    table = DeltaTable(str(index / tables.DOCUMENTS), version=versions[tables.DOCUMENTS])
    return table.to_pyarrow_dataset().count_rows()


def cited_documents(index: Path, question: str) -> set[str]:
    """Documents in a vector-search context (a real query path that needs no LLM)."""
    clear_cache()
    engine = QueryEngine.open(load_settings(), str(index))
    with engine.search(question, "vector", answering=False) as outcome:
        chunks = outcome.context(2000).chunks
    return {str(engine.snapshot.chunk_doc_ids[c]) for c in chunks}


@pytest.fixture()
def watchers():
    started: list[Watcher] = []
    yield started
    for watcher in started:  # also on failure: no stray JVM
        watcher.kill()


def test_files_dropped_while_the_stream_runs_are_indexed_exactly_once(tmp_path: Path, watchers) -> None:
    landing, index, log = tmp_path / "landing", tmp_path / "index", tmp_path / "watch.log"
    landing.mkdir()
    watchers.append(Watcher(landing, index, log))
    first = watchers[-1]

    drop(landing, "batch-0.jsonl", BATCHES[0])
    first.wait_for("the first micro-batch", lambda: complete_documents(index) == 3)
    assert cited_documents(index, "Who walked on the Moon?") <= {d[0] for d in BATCHES[0]}
    # The batch is published with its manifest row, then builds its serving store: it is over (and the
    # next file may be dropped) once it has said so.
    first.wait_for("the first micro-batch's summary", lambda: "micro-batch 0 indexed" in first.text())

    # The second file: kill the process once that batch has merged its chunks but not its documents.
    drop(landing, "batch-1.jsonl", BATCHES[1])
    marker = first.text().count("micro-batch 0 indexed")
    assert marker == 1

    def merged_second_batch() -> bool:
        after = first.text().split("micro-batch 0 indexed", 1)[1]
        return "micro-batch 1" in after and "\nwrite " in after.split("micro-batch 1", 1)[1]

    first.wait_for("the second micro-batch's writes", merged_second_batch)
    first.kill()
    assert complete_documents(index) == 3  # the killed batch is invisible

    watchers.append(Watcher(landing, index, log))
    second = watchers[-1]
    second.wait_for("the replayed micro-batch", lambda: complete_documents(index) == 6, timeout=900)
    drop(landing, "batch-2.jsonl", BATCHES[2])
    second.wait_for("the third file", lambda: complete_documents(index) == 9, timeout=900)
    assert second.interrupt() == 0, second.text()[-3000:]

    documents = DeltaTable(str(index / tables.DOCUMENTS)).to_pyarrow_table()
    doc_ids = documents.column("doc_id").to_pylist()
    assert sorted(doc_ids) == sorted(d[0] for batch in BATCHES for d in batch)  # each exactly once
    chunks = DeltaTable(str(index / tables.CHUNKS)).to_pyarrow_table()
    assert chunks.num_rows == len(set(chunks.column("chunk_id").to_pylist()))
    assert set(chunks.column("doc_id").to_pylist()) == set(doc_ids)
    embeddings = DeltaTable(str(index / tables.CHUNK_EMBEDDINGS)).to_pyarrow_table()
    assert sorted(embeddings.column("chunk_id").to_pylist()) == sorted(chunks.column("chunk_id").to_pylist())
    mentions = DeltaTable(str(index / tables.MENTIONS)).to_pyarrow_table()
    assert set(pc.unique(mentions.column("chunk_id")).to_pylist()) <= set(
        chunks.column("chunk_id").to_pylist()
    )
    late = {d[0] for d in BATCHES[2]}
    assert cited_documents(index, BATCHES[2][0][2][:80]) & late  # the last file is searchable


def test_rows_appended_to_a_delta_table_are_indexed_once_each_run(tmp_path: Path, settings) -> None:
    """The Delta source with --once (a scheduled job): each run indexes the rows appended since the last
    one, and a row the JSON Lines reader would reject is rejected here too."""
    import pyarrow as pa
    from deltalake import write_deltalake
    from rich.console import Console

    from lazygraph.ingest.watch import watch_index

    source, index = tmp_path / "documents", tmp_path / "index"

    def append(rows: list[tuple[str, str, str]]) -> None:
        ids, titles, texts = (list(c) for c in zip(*rows, strict=True))
        write_deltalake(str(source), pa.table({"doc_id": ids, "title": titles, "text": texts}), mode="append")

    append([*DOCS[0:2], ("blank", "Blank", "   ")])
    console = Console(quiet=True)
    first = watch_index(settings, str(source), str(index), console, once=True)
    assert first["new_documents"] == 2 and first["runs"][0]["rejected"] == 1
    again = watch_index(settings, str(source), str(index), console, once=True)
    assert again["batches"] == 0  # nothing new since the checkpoint
    append([DOCS[2]])
    second = watch_index(settings, str(source), str(index), console, once=True)
    assert second["new_documents"] == 1 and second["runs"][0]["mode"] == "append"
    assert complete_documents(index) == 3
