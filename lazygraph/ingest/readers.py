"""Read an input (JSON Lines file or folder of .txt/.md) into documents and rejections, with Spark.

Both kinds are validated from their raw bytes, so that only bytes that do not decode as UTF-8 are
``invalid_utf8`` (a document may well contain U+FFFD itself), and both are bounded before anything
is held in memory:

- JSON Lines: tasks read byte ranges of the file with ``lines.read_lines`` (why not Spark's text
  readers is explained there); a line over ``chunking.max_line_bytes`` is skipped and rejected as
  ``too_large`` without being held whole;
- folders: the ``binaryFile`` source, read twice so that a file over ``chunking.max_document_bytes``
  is listed (and rejected as ``too_large``) but its content is never loaded.

Validation runs per partition in Python (records.py); duplicates of an id are resolved in Spark
(the first occurrence wins).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from lazygraph.errors import InputError
from lazygraph.ingest import lines, records
from lazygraph.settings import Settings

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")


@dataclass
class IngestResult:
    documents: Any  # DataFrame: doc_id, title, text, text_hash, source, n_chars, run_id
    rejected: Any  # DataFrame: run_id, source, record, doc_id, reason, detail
    n_documents: int
    n_rejected: int
    rejected_by_reason: dict[str, int]
    cached: Any = None  # the validated records both frames are read from

    def unpersist(self) -> None:
        if self.cached is not None:
            self.cached.unpersist()


def input_kind(input_path: str) -> str:
    """'jsonl' or 'folder'; anything else is refused before Spark starts any work."""
    path = Path(input_path).expanduser()
    if not path.exists():
        raise InputError(
            f"input {input_path} does not exist; pass a JSON Lines file or a folder of .txt/.md files"
        )
    if path.is_dir():
        return "folder"
    if path.is_file() and path.name.lower().endswith(JSONL_SUFFIXES):
        return "jsonl"
    raise InputError(
        f"input {input_path} is neither a JSON Lines file (.jsonl/.json/.ndjson) nor a folder; "
        'give one document per line as {"doc_id","title","text"} or a folder of .txt/.md files'
    )


def _jsonl_records(spark: Any, path: Path, max_bytes: int, max_line_bytes: int) -> Any:
    """Records of a JSON Lines file, one task per byte range (see lines.py for why not textFile)."""
    local = str(path.resolve())
    sc = spark.sparkContext
    ranges = _line_ranges(sc, local, path.stat().st_size)
    parsed = sc.parallelize(ranges, max(1, len(ranges))).flatMap(
        lambda r: records.parse_json_lines(
            lines.read_lines(local, *r, max_line_bytes), max_bytes, max_line_bytes
        )
    )
    return spark.createDataFrame(parsed, schema=records.RECORD_SCHEMA)


def _line_ranges(sc: Any, local: str, size: int) -> list[tuple[int, int, int]]:
    """(start, end, number of the line at start) of every byte range the file is read in."""
    splits = lines.plan_splits(size, sc.defaultParallelism)
    counts = [0] * len(splits)
    if len(splits) > 1:  # a cheap first pass: the line breaks of each range give global line numbers
        counts = (
            sc.parallelize(splits, len(splits)).map(lambda r: lines.count_line_breaks(local, *r)).collect()
        )
    firsts = lines.first_line_numbers(counts)
    return [(start, end, first) for (start, end), first in zip(splits, firsts, strict=True)]


def _folder_batches(batches: Iterator[pd.DataFrame], root_uri: str, max_bytes: int) -> Iterator[pd.DataFrame]:
    prefix = root_uri.rstrip("/") + "/"
    for batch in batches:
        out = []
        for path, size, content in zip(batch["path"], batch["length"], batch["content"], strict=True):
            relative = _relative(path, prefix)
            data = None if content is None else bytes(content)
            out.append(records.parse_text_file(relative, data, max_bytes, int(size)))
        yield pd.DataFrame(out, columns=list(records.Record._fields))


def _relative(path: str, prefix: str) -> str:
    # binaryFile reports file:/abs/path while as_uri() gives file:///abs/path; compare paths only.
    path_only = path.split(":", 1)[-1].lstrip("/")
    prefix_only = prefix.split(":", 1)[-1].lstrip("/")
    return path_only[len(prefix_only) :] if path_only.startswith(prefix_only) else path_only


def _folder_records(spark: Any, path: Path, max_bytes: int) -> Any:
    from pyspark.sql import functions as F

    root_uri = path.resolve().as_uri()
    files = (
        spark.read.format("binaryFile")
        .option("recursiveFileLookup", "true")
        .option("ignoreCorruptFiles", "false")
        .load(root_uri)
    )
    # binaryFile applies a filter on length before it opens a file, and reads no content when the
    # content column is not selected: files over the limit are listed but never loaded.
    small = files.filter(F.col("length") <= max_bytes).select("path", "length", "content")
    large = files.filter(F.col("length") > max_bytes).select(
        "path", "length", F.lit(None).cast("binary").alias("content")
    )
    return small.unionByName(large).mapInPandas(
        lambda b: _folder_batches(b, root_uri, max_bytes), schema=records.RECORD_SCHEMA
    )


def read_input(spark: Any, settings: Settings, input_path: str, run_id: str) -> IngestResult:
    """Validated documents (cached) and rejections of one input; InputError if nothing is usable."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kind = input_kind(input_path)
    path = Path(input_path).expanduser()
    max_bytes = settings.chunking.max_document_bytes
    if kind == "folder" and not any(p.is_file() for p in path.rglob("*")):
        raise InputError(f"input folder {input_path} holds no files; put .txt or .md documents in it")
    if kind == "jsonl":
        raw = _jsonl_records(spark, path, max_bytes, settings.chunking.line_limit())
    else:
        raw = _folder_records(spark, path, max_bytes)
    first_of_id = Window.partitionBy("doc_id").orderBy("seq")
    flagged = (
        raw.withColumn(
            "_rank", F.when(F.col("reason").isNull(), F.row_number().over(first_of_id)).otherwise(F.lit(1))
        )
        .withColumn(
            "reason", F.when(F.col("_rank") > 1, F.lit(records.DUPLICATE_ID)).otherwise(F.col("reason"))
        )
        .withColumn(
            "detail",
            F.when(F.col("_rank") > 1, F.lit("an earlier record has this doc_id")).otherwise(F.col("detail")),
        )
        .drop("_rank")
        .withColumn("source", F.lit(str(path.resolve())))
        .withColumn("run_id", F.lit(run_id))
    )
    flagged = flagged.persist(StorageLevel.MEMORY_AND_DISK)
    by_reason = {row["reason"]: row["count"] for row in flagged.groupBy("reason").count().collect()}
    n_documents = by_reason.pop(None, 0)
    if n_documents == 0:
        flagged.unpersist()
        summary = ", ".join(f"{k}: {v}" for k, v in sorted(by_reason.items())) or "no records at all"
        raise InputError(
            f"input {input_path} holds no usable document ({summary}); the index was not changed"
        )
    documents = flagged.filter(F.col("reason").isNull()).select(
        "doc_id",
        "title",
        "text",
        F.sha2(F.concat_ws("\n", "title", "text"), 256).alias("text_hash"),
        "source",
        F.length("text").cast("int").alias("n_chars"),
        "run_id",
    )
    rejected = flagged.filter(F.col("reason").isNotNull()).select(
        "run_id", "source", "record", "doc_id", "reason", "detail"
    )
    return IngestResult(documents, rejected, n_documents, sum(by_reason.values()), by_reason, flagged)
