"""Inputs in object stores: judged by name before Spark starts, checked by Hadoop when read, and read by
byte range through a pyarrow filesystem built from the storage settings."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

from lazygraph.errors import InputError
from lazygraph.ingest import lines
from lazygraph.ingest.readers import input_kind, read_input
from lazygraph.runtime import storage
from lazygraph.settings import StorageSettings


@pytest.fixture()
def no_local_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any pathlib look at the file system fails the test."""

    def touched(self: Path, *args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"pathlib looked at {self}")

    for name in ("exists", "is_dir", "is_file", "stat", "resolve", "rglob", "iterdir", "expanduser"):
        monkeypatch.setattr(Path, name, touched)


@pytest.mark.parametrize(
    ("location", "kind"),
    [
        ("s3a://bucket/corpus/docs.jsonl", "jsonl"),
        ("s3://bucket/corpus/docs.ndjson", "jsonl"),
        ("gs://bucket/corpus/DOCS.JSON", "jsonl"),
        ("abfss://corpus@acct.dfs.core.windows.net/docs/", "folder"),
        ("hdfs://nn:8020/data/docs", "folder"),
        ("hdfs:///data/docs.jsonl", "jsonl"),
    ],
)
def test_a_remote_input_is_judged_by_its_name_without_touching_the_local_disk(
    no_local_checks: None, location: str, kind: str
) -> None:
    assert input_kind(location) == kind


def test_a_single_remote_text_file_is_refused_with_what_to_give(no_local_checks: None) -> None:
    with pytest.raises(InputError, match="single text file; give the folder that holds it"):
        input_kind("s3a://bucket/docs/one.txt")


def test_an_input_with_an_unsupported_scheme_is_refused_before_spark_starts() -> None:
    with pytest.raises(InputError, match="unsupported scheme ftp://.*s3a://"):
        input_kind("ftp://mirror/corpus.jsonl")


def test_local_inputs_are_still_checked_on_disk(tmp_path: Path) -> None:
    (tmp_path / "c.jsonl").write_text("{}\n")
    assert input_kind((tmp_path / "c.jsonl").as_uri()) == "jsonl"
    assert input_kind(f"file:{tmp_path}") == "folder"
    with pytest.raises(InputError, match="does not exist"):
        input_kind((tmp_path / "missing.jsonl").as_uri())


def _tricky_file(path: Path) -> None:
    long_line = json.dumps({"doc_id": "long", "text": "x" * 400}).encode()
    path.write_bytes(
        lines.BOM
        + b'{"doc_id": "a", "text": "first"}\r\n'
        + long_line
        + b"\n\n"
        + '{"doc_id": "b", "text": "caf\u00e9"}\n'.encode()
        + b'{"doc_id": "c", "text": "no break at the end"}'
    )


def test_remote_byte_ranges_read_the_same_lines_as_local_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bucket is a folder behind a pyarrow filesystem: what a task reads through the storage opener
    (seeks, bounded readlines, ranges split mid-line) is byte for byte what it reads from a local file."""
    (tmp_path / "bucket").mkdir()
    local = tmp_path / "bucket" / "docs.jsonl"
    _tricky_file(local)
    settings = StorageSettings(s3_endpoint="http://minio:9000", s3_path_style_access=True)
    seen: list[tuple[str, StorageSettings]] = []

    def bucket_as_folder(uri: str, given: StorageSettings) -> Any:
        seen.append((uri, given))
        return pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())

    monkeypatch.setattr(storage, "arrow_filesystem", bucket_as_folder)
    opener = partial(storage.open_input, storage=settings)
    size = local.stat().st_size
    for step in (7, 50, size):
        splits = [(start, min(start + step, size)) for start in range(0, size, step)]
        counts = [lines.count_line_breaks(str(local), *r) for r in splits]
        remote_counts = [
            lines.count_line_breaks("s3a://bucket/docs.jsonl", *r, opener=opener) for r in splits
        ]
        assert remote_counts == counts
        firsts = lines.first_line_numbers(counts)
        for (start, end), first in zip(splits, firsts, strict=True):
            expected = list(lines.read_lines(str(local), start, end, first, 100))
            got = list(lines.read_lines("s3a://bucket/docs.jsonl", start, end, first, 100, opener=opener))
            assert got == expected
    assert seen and all(given is settings for _, given in seen), "the reader's own storage settings"
    assert {uri for uri, _ in seen} == {"s3a://bucket/docs.jsonl"}


@pytest.mark.e2e
def test_a_remote_input_spark_cannot_reach_is_one_error_naming_the_location(settings, spark) -> None:
    """Local Spark has no s3a connector: Hadoop's own failure becomes one line with the location and
    what to do, before anything is written."""
    with pytest.raises(InputError) as caught:
        read_input(spark, settings, "s3://corpus-bucket/docs/corpus.jsonl", "run-1")
    message = str(caught.value)
    assert "\n" not in message
    assert "s3a://corpus-bucket/docs/corpus.jsonl" in message
    assert "storage.*" in message and "hadoop-aws" in message
