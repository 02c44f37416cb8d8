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

The input is a local path or a URI (s3a:// or s3://, abfss://, gs://, hdfs://). Nothing checks a remote
input before Spark starts: Hadoop reads its status on the driver (with the session's storage settings),
and its failure is one InputError naming the location. Folders are read by Spark's ``binaryFile`` source
through Hadoop; the byte ranges of a remote JSON Lines file are read in the tasks through a pyarrow
filesystem built from the same storage settings (``runtime.storage.open_input``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pandas as pd

from lazygraph.errors import InputError
from lazygraph.ingest import lines, records
from lazygraph.runtime import storage
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
    """'jsonl' or 'folder'; anything else is refused before Spark starts any work.

    A remote input is judged by its name alone (a JSON Lines suffix, else a folder): it is checked
    when Spark reads it, with the session's credentials (``_remote_status``).
    """
    uri = storage.normalise(input_path)  # InputError for an unsupported scheme
    if not storage.is_local(uri):
        return _kind_by_name(input_path, uri)
    path = Path(storage.local_path(uri) or input_path)
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


def _kind_by_name(input_path: str, uri: str) -> str:
    name = uri.rsplit("/", 1)[-1].lower()
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(records.TEXT_SUFFIXES):
        raise InputError(
            f"input {input_path} is a single text file; give the folder that holds it, or a JSON Lines file"
        )
    return "folder"


def _remote_status(spark: Any, uri: str, kind: str) -> tuple[str, str, int]:
    """(kind, qualified URI, size in bytes) of a remote input, as Hadoop sees it with the session's
    storage settings; one InputError naming the location when it is missing or cannot be reached."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(storage.spark_uri(uri))
    try:
        filesystem = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        status = filesystem.getFileStatus(path)
    except Exception as exc:  # py4j errors carry the Java exception's text
        raise _unreachable(uri, exc) from exc
    qualified = str(status.getPath().toString())  # hdfs:///x comes back with its name node
    if status.isDirectory():
        return "folder", qualified, 0
    if kind != "jsonl":
        raise InputError(
            f"input {uri} is neither a JSON Lines file (.jsonl/.json/.ndjson) nor a folder; "
            'give one document per line as {"doc_id","title","text"} or a folder of .txt/.md files'
        )
    return "jsonl", qualified, int(status.getLen())


# What Spark needs on its classpath to reach each remote scheme.
_CONNECTORS = {
    "s3a": "hadoop-aws for s3a:// (fetched on first use; under spark-submit, `lazygraph setup --s3a`'s jars "
    "in --jars)",
    "abfss": "hadoop-azure for abfss://",
    "gs": "the GCS connector (gcs-connector-hadoop3) for gs://",
    "hdfs": "a reachable name node for hdfs://",
}


def _unreachable(uri: str, exc: Exception) -> InputError:
    text = str(exc)
    if "FileNotFoundException" in text:
        return InputError(f"input {uri} does not exist; check the location (the index was not changed)")
    first = next((ln.strip() for ln in text.splitlines() if "Exception" in ln), text.strip())
    first = first.lstrip(": ")[:300]
    return InputError(
        f"input {uri} cannot be read: {first}. Check the storage.* settings (endpoint, credentials) and "
        f"that Spark has {_CONNECTORS.get(storage.scheme(uri), 'the connector for this scheme')}"
    )


def _jsonl_records(
    spark: Any, source: str, size: int, opener: lines.Opener, max_bytes: int, max_line_bytes: int
) -> Any:
    """Records of a JSON Lines file (a local path, or a URI that ``opener`` reads), one task per byte
    range (see lines.py for why not textFile)."""
    sc = spark.sparkContext
    ranges = _line_ranges(sc, source, size, opener)
    parsed = sc.parallelize(ranges, max(1, len(ranges))).flatMap(
        lambda r: records.parse_json_lines(
            lines.read_lines(source, *r, max_line_bytes, opener=opener), max_bytes, max_line_bytes
        )
    )
    return spark.createDataFrame(parsed, schema=records.RECORD_SCHEMA)


def _line_ranges(sc: Any, source: str, size: int, opener: lines.Opener) -> list[tuple[int, int, int]]:
    """(start, end, number of the line at start) of every byte range the file is read in."""
    splits = lines.plan_splits(size, sc.defaultParallelism)
    counts = [0] * len(splits)
    if len(splits) > 1:  # a cheap first pass: the line breaks of each range give global line numbers
        counts = (
            sc.parallelize(splits, len(splits))
            .map(lambda r: lines.count_line_breaks(source, *r, opener=opener))
            .collect()
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


def _folder_records(spark: Any, root_uri: str, max_bytes: int, paths: list[str] | None = None) -> Any:
    """Records of every file under ``root_uri`` (or of ``paths`` only, files under it)."""
    from pyspark.sql import functions as F

    files = (
        spark.read.format("binaryFile")
        .option("recursiveFileLookup", "true")
        .option("ignoreCorruptFiles", "false")
        .load(paths if paths is not None else root_uri)
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


def _raw_records(spark: Any, settings: Settings, input_path: str) -> tuple[Any, str]:
    """The parsed records of an input and its ``source`` (a local input's absolute path, else its URI)."""
    kind = input_kind(input_path)
    uri = storage.normalise(input_path)
    max_bytes, max_line_bytes = settings.chunking.max_document_bytes, settings.chunking.line_limit()
    if not storage.is_local(uri):
        kind, qualified, size = _remote_status(spark, uri, kind)
        if kind == "folder":
            return _folder_records(spark, qualified, max_bytes), uri
        opener = partial(storage.open_input, storage=settings.storage)
        return _jsonl_records(spark, qualified, size, opener, max_bytes, max_line_bytes), uri
    path = Path(storage.local_path(uri) or input_path)
    if kind == "folder":
        if not any(p.is_file() for p in path.rglob("*")):
            raise InputError(f"input folder {input_path} holds no files; put .txt or .md documents in it")
        return _folder_records(spark, storage.spark_uri(path.as_uri()), max_bytes), str(path)
    size = path.stat().st_size
    return _jsonl_records(spark, str(path), size, lines.open_local, max_bytes, max_line_bytes), str(path)


def read_input(
    spark: Any, settings: Settings, input_path: str, run_id: str, raw_records: Any | None = None
) -> IngestResult:
    """Validated documents (cached) and rejections of one input; InputError if nothing is usable.

    ``raw_records`` (records already parsed, e.g. one micro-batch of ``index --watch``) replaces
    reading ``input_path``, which then only names the source.
    """
    if raw_records is None:
        raw, source = _raw_records(spark, settings, input_path)
    else:
        raw, source = raw_records, input_path
    return _validated(raw, source, input_path, run_id)


def file_records(spark: Any, settings: Settings, files: list[tuple[str, int]], root_uri: str) -> Any:
    """The parsed records of some files of a folder (``(uri, size)`` pairs): JSON Lines files line by
    line, .txt/.md files as one document each. A line's record names its file, and its position
    orders it after every line of the files listed before it (the first occurrence of an id wins)."""
    from pyspark.sql import functions as F

    max_bytes, max_line_bytes = settings.chunking.max_document_bytes, settings.chunking.line_limit()
    jsonl = [(uri, size) for uri, size in files if uri.lower().endswith(JSONL_SUFFIXES)]
    others = [uri for uri, _ in files if not uri.lower().endswith(JSONL_SUFFIXES)]
    parts = []
    for number, (uri, size) in enumerate(jsonl):
        # Spark lists local files as file:/abs/path (one slash), which urlparse reads as well.
        local = unquote(urlparse(uri).path) if uri.startswith("file:") else None
        source, opener = (
            (local, lines.open_local)
            if local is not None
            else (uri, partial(storage.open_input, storage=settings.storage))
        )
        name = _relative(uri, root_uri.rstrip("/") + "/")
        parts.append(
            _jsonl_records(spark, source, size, opener, max_bytes, max_line_bytes)
            .withColumn("seq", F.col("seq") + F.lit(number << 40))
            .withColumn("record", F.concat(F.lit(f"{name} "), F.col("record")))
        )
    if others:
        parts.append(_folder_records(spark, root_uri, max_bytes, paths=others))
    if not parts:
        return spark.createDataFrame([], schema=records.RECORD_SCHEMA)
    combined = parts[0]
    for part in parts[1:]:
        combined = combined.unionByName(part)
    return combined


def _validated(raw: Any, source: str, input_path: str, run_id: str) -> IngestResult:
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

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
        .withColumn("source", F.lit(source))
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
