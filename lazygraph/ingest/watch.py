"""``lazygraph index --watch``: keep an index up to date from a landing folder or a Delta table.

Spark Structured Streaming finds what is new in the source and records what it has handed out in a
checkpoint; each micro-batch is then indexed exactly as ``lazygraph index --append`` would index those
documents (the same stages, the same manifest row written last). So:

- queries always read a complete version: a micro-batch becomes visible when its manifest row does;
- nothing is indexed twice: after an abrupt stop Spark replays the last micro-batch whose commit it
  had not recorded, and the documents of that batch that were already indexed are found in the
  documents table with the same text hash, so the replay only finishes what was left;
- a document that arrives again with other text replaces the earlier version, as with ``--append``.

Sources:

- a folder (local path or URI): new ``.jsonl``/``.json``/``.ndjson`` files (one document per line) and
  ``.txt``/``.md`` files (one document each, its id the path under the folder). Spark's file source
  skips names that start with ``_`` or ``.``, so a producer writes a file under such a name and
  renames it when it is complete;
- a Delta table with columns ``doc_id``, ``text`` and optionally ``title``: the rows appended to it
  (Delta's streaming source, which requires the table to be append-only).
"""

from __future__ import annotations

import hashlib
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from lazygraph.errors import InputError, LazyGraphError
from lazygraph.runtime import storage
from lazygraph.settings import Settings

DOCUMENT_COLUMNS = ("doc_id", "title", "text")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
POLL_SECONDS = 2
# Spark's binaryFile source, whose schema is fixed.
BINARY_FILE_SCHEMA = "path string, modificationTime timestamp, length long, content binary"


@dataclass
class WatchReport:
    """What one ``--watch`` process did: its micro-batches and the documents they brought."""

    source: str
    index: str
    checkpoint: str
    batches: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "index": self.index,
            "checkpoint": self.checkpoint,
            "batches": len(self.batches),
            "new_documents": sum(b.get("new_documents", 0) for b in self.batches),
            "runs": self.batches,
        }


def default_checkpoint(index_uri: str, source_uri: str) -> str:
    """<index>/_watch/<hash of the source>: one checkpoint per (index, source) pair."""
    digest = hashlib.sha256(source_uri.encode()).hexdigest()[:12]
    return f"{index_uri.rstrip('/')}/_watch/{digest}"


def check_source(input_path: str) -> str:
    """The source's normalised URI; InputError for a local source that is not a folder."""
    uri = storage.normalise(input_path)
    local = storage.local_path(uri)
    if local is not None and not Path(local).is_dir():
        raise InputError(
            f"--watch reads a landing folder or a Delta table of documents, and {input_path} is "
            + ("a file" if Path(local).exists() else "not there")
            + "; create the folder (or point --input at the table) and run the command again"
        )
    return uri


def watch_index(
    settings: Settings, input_path: str, index: str, console: Console, once: bool = False
) -> dict:
    """Index what arrives in ``input_path`` into ``index`` until stopped (Ctrl-C), or, with ``once``,
    what is there now. Returns the report of the micro-batches it ran."""
    from lazygraph import tables
    from lazygraph.runtime.spark import get_spark

    source_uri = check_source(input_path)
    spark = get_spark(settings, locations=(input_path, index))
    index_uri = tables.normalise_index_uri(index)
    checkpoint = settings.watch.checkpoint or default_checkpoint(index_uri, source_uri)
    stream, kind = _open_stream(spark, settings, source_uri)
    indexer = MicroBatchIndexer(spark, settings, index_uri, source_uri, kind, console)
    writer = stream.writeStream.foreachBatch(indexer).option(
        "checkpointLocation", storage.spark_uri(checkpoint)
    )
    if once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{settings.watch.trigger_seconds} seconds")
    what = "what is there now" if once else f"new documents every {settings.watch.trigger_seconds:g} s"
    console.print(f"[bold]watching[/] {source_uri} ({kind}): indexing {what} into {index_uri}")
    query = writer.start()
    try:
        _run_until_stopped(query, console)
    except Exception as exc:
        # The stream's exception wraps the batch's; the batch's own error says what to do.
        if indexer.error is not None:
            raise indexer.error from exc
        raise InputError(f"the stream over {source_uri} failed: {_first_line(exc)}") from exc
    if indexer.error is not None:
        raise indexer.error
    return WatchReport(source_uri, index_uri, checkpoint, indexer.reports).as_dict()


def _run_until_stopped(query: Any, console: Console) -> None:
    """Wait for the stream to end, or for SIGINT/SIGTERM; then let the micro-batch in progress finish
    before stopping (a second signal stops at once; an unfinished batch is redone on the next start).

    The signals only set a flag: an exception raised inside a blocking py4j call would leave the
    gateway connection in an unknown state, so the wait polls in short steps instead.
    """
    requests: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda signum, _frame: requests.append(signum)) for sig in STOP_SIGNALS
    }
    try:
        while not query.awaitTermination(POLL_SECONDS):
            if not requests:
                continue
            console.print("stopping after the micro-batch in progress (signal again to stop now)")
            while len(requests) == 1 and query.isActive and query.status.get("isTriggerActive"):
                time.sleep(POLL_SECONDS)
            query.stop()
            return
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _open_stream(spark: Any, settings: Settings, source_uri: str) -> tuple[Any, str]:
    """The streaming DataFrame of a source and its kind ("delta" or "folder")."""
    from delta.tables import DeltaTable

    location = storage.spark_uri(source_uri)
    limit = settings.watch.max_files_per_batch
    if DeltaTable.isDeltaTable(spark, location):
        stream = spark.readStream.format("delta").option("maxFilesPerTrigger", limit).load(location)
        missing = {"doc_id", "text"} - set(stream.columns)
        if missing:
            raise InputError(
                f"the Delta table {source_uri} has no column {', '.join(sorted(missing))}; --watch reads "
                "documents as rows (doc_id, text, optional title)"
            )
        return stream, "delta"
    stream = (
        spark.readStream.format("binaryFile")
        .schema(BINARY_FILE_SCHEMA)  # a streaming source is never inferred
        .option("recursiveFileLookup", "true")
        .option("maxFilesPerTrigger", limit)
        .load(location)
        .select("path", "length")  # the content is read per file type by the batch reader
    )
    return stream, "folder"


class MicroBatchIndexer:
    """The ``foreachBatch`` function: one micro-batch becomes one incremental index run."""

    def __init__(
        self, spark: Any, settings: Settings, index_uri: str, source_uri: str, kind: str, console: Console
    ) -> None:
        self.spark, self.settings, self.console = spark, settings, console
        self.index_uri, self.source_uri, self.kind = index_uri, source_uri, kind
        self.reports: list[dict[str, Any]] = []
        self.error: LazyGraphError | None = None

    def __call__(self, batch: Any, batch_id: int) -> None:
        try:
            self._index(batch, batch_id)
        except LazyGraphError as exc:
            self.error = exc
            raise

    def _index(self, batch: Any, batch_id: int) -> None:
        from lazygraph.pipeline import index_records
        from lazygraph.run_context import RunContext, RunLog
        from lazygraph.tables.store import IndexStore

        started = time.perf_counter()
        raw, items = self._records(batch)
        if items == 0:
            return
        self.console.print(f"[bold]micro-batch {batch_id}[/]: {items:,} {self._unit()}")
        ctx = RunContext(
            self.spark,
            self.settings,
            IndexStore(self.spark, self.index_uri, settings=self.settings),
            RunLog(self.console),
            f"{self.source_uri} (watch batch {batch_id})",
            input_records=raw,
        )
        try:
            report = index_records(ctx)
        except InputError as exc:
            # Nothing usable in this batch (every record rejected): say so, keep watching.
            self.console.print(f"[yellow]micro-batch {batch_id}[/]: {exc}")
            report = {"mode": "rejected", "new": {}, "rejected": items}
        summary = {
            "batch_id": batch_id,
            self._unit(): items,
            "mode": report.get("mode"),
            "new_documents": report.get("new", {}).get("documents", 0),
            "rejected": report.get("rejected", 0),
            "serving_store": report.get("serving_store"),
            "seconds": round(time.perf_counter() - started, 1),
        }
        self.reports.append(summary)
        self.console.print(
            f"[bold green]micro-batch {batch_id} indexed[/]: {summary['new_documents']:,} new or changed "
            f"documents ({summary['mode']}), {summary['rejected']:,} rejected, {summary['seconds']} s"
        )

    def _unit(self) -> str:
        return "rows" if self.kind == "delta" else "files"

    def _records(self, batch: Any) -> tuple[Any, int]:
        """The micro-batch as parsed records (the reader's schema) and how many rows or files it held."""
        from lazygraph.ingest.readers import file_records

        if self.kind == "folder":
            files = [(row["path"], int(row["length"])) for row in batch.collect()]
            root = storage.spark_uri(self.source_uri)
            return file_records(self.spark, self.settings, files, root), len(files)
        count = batch.count()
        return (table_records(batch, self.settings) if count else None), count


def table_records(rows: Any, settings: Settings) -> Any:
    """Rows of a documents table as parsed records: each row is validated as the JSON line it would be
    in a JSON Lines input, so both sources accept and reject the same documents."""
    from pyspark.sql import functions as F

    from lazygraph.ingest import records

    max_bytes = settings.chunking.max_document_bytes
    columns = [c for c in DOCUMENT_COLUMNS if c in rows.columns]
    # seq orders the rows (the first of a duplicated id wins) and names a rejected one.
    as_json = rows.select(
        F.monotonically_increasing_id().alias("seq"), F.to_json(F.struct(*columns)).alias("line")
    )

    def parse(batches: Any) -> Any:
        import pandas as pd

        for frame in batches:
            out = []
            for seq, line in zip(frame["seq"], frame["line"], strict=True):
                record = records.parse_json_line(line.encode("utf-8"), int(seq), max_bytes)
                if record is not None:
                    out.append(record._replace(record=f"row {int(seq)}"))
            yield pd.DataFrame(out, columns=list(records.Record._fields))

    return as_json.mapInPandas(parse, schema=records.RECORD_SCHEMA)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:400] if text else type(exc).__name__
