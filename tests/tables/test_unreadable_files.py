"""A missing or corrupt data file of an index table is one line that names the table, its version, the file
and what to do, from every reader and through the command line (exit status 2, no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable
from support.fakes import TinyIndex

from lazygraph import tables
from lazygraph.errors import IndexFileError
from lazygraph.query.snapshot import clear_cache, load_snapshot
from lazygraph.run_context import readable_error
from lazygraph.stats import index_stats
from lazygraph.tables.read import spark_read_failure

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def index(tmp_path: Path) -> Path:
    root = tmp_path / "index"
    TinyIndex(
        texts=["the tide turns at noon", "bread needs yeast"],
        concepts={"tide": [0], "bread": [1]},
        edges=[("tide", "bread")],
    ).write_delta(root)
    clear_cache()
    return root


def _data_file(index: Path, name: str) -> Path:
    [uri] = DeltaTable(str(index / name)).file_uris()
    return Path(uri.removeprefix("file://"))


def _damage(index: Path, name: str, how: str) -> Path:
    path = _data_file(index, name)
    if how == "missing":
        path.unlink()
    else:
        path.write_bytes(b"not parquet at all")
    return path


@pytest.mark.parametrize(
    ("how", "problem"), [("missing", "is missing"), ("corrupt", "not a readable Parquet")]
)
def test_the_query_snapshot_names_table_version_and_file(index: Path, how: str, problem: str) -> None:
    path = _damage(index, tables.CHUNKS, how)
    with pytest.raises(IndexFileError) as info:
        load_snapshot(str(index))
    message = str(info.value)
    assert "table chunks of the index" in message and "at version 0" in message
    assert path.name in message and problem in message
    assert "lazygraph index --input DOCS --index NEW_DIR" in message
    assert "\n" not in message


def test_stats_and_the_manifest_report_the_same(index: Path, settings) -> None:
    _damage(index, tables.EDGES, "corrupt")
    with pytest.raises(IndexFileError, match="table edges of the index"):
        index_stats(settings, str(index))
    _damage(index, tables.MANIFEST, "missing")
    with pytest.raises(IndexFileError, match="table manifest of the index"):
        load_snapshot(str(index))


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return subprocess.run(
        [sys.executable, "-m", "lazygraph", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_the_command_line_exits_2_with_one_line(index: Path) -> None:
    path = _damage(index, tables.CHUNKS, "missing")
    for args in (["stats", "--index", str(index)], ["query", "--index", str(index), "When is high tide?"]):
        done = _cli(*args)
        assert done.returncode == 2, done.stderr[-2000:]
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert lines[0].startswith("error: table chunks of the index") and path.name in lines[0]


def test_a_spark_stage_reading_a_missing_file_names_the_table() -> None:
    text = (
        "An error occurred while calling o123.count.\n: org.apache.spark.SparkException: "
        "[FAILED_READ_FILE.FILE_NOT_EXIST] Encountered error while reading file "
        "file:///data/idx/mentions/part-00001-abc.c000.snappy.parquet. File does not exist. SQLSTATE: 42K03"
    )
    error = readable_error("graph", RuntimeError(text))
    assert isinstance(error, IndexFileError)
    assert "table mentions of the index file:///data/idx" in str(error)
    assert "part-00001-abc.c000.snappy.parquet is missing" in str(error)
    corrupt = "Caused by: java.lang.RuntimeException: s3a://b/i/chunks/part-0.parquet is not a Parquet file."
    assert "not a readable Parquet file" in str(spark_read_failure(corrupt))
    assert spark_read_failure("java.lang.OutOfMemoryError: Java heap space") is None
