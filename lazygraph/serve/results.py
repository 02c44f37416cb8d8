"""The batch results table: one Delta table, appended in small commits as answers arrive.

Appending (rather than writing once at the end) is what makes a batch resumable: a killed job
loses at most the answers not yet flushed, and a re-run skips every query_id already ``ok``.
A query that failed is tried again on the next run, which first deletes its error row, so the
table holds at most one row per query.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from lazygraph.errors import InputError
from lazygraph.tables import normalise_index_uri

RESULT_SCHEMA = pa.schema(
    [
        pa.field("query_id", pa.string(), nullable=False),
        pa.field("question", pa.string(), nullable=False),
        pa.field("answer", pa.string()),
        pa.field("result_json", pa.string()),
        pa.field("status", pa.string(), nullable=False),  # "ok" or "error"
        pa.field("error", pa.string()),
        pa.field("seconds", pa.float64(), nullable=False),
        pa.field("finished_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
STATUS_OK = "ok"
STATUS_ERROR = "error"


def result_row(
    query_id: str,
    question: str,
    *,
    answer: str | None = None,
    result_json: str | None = None,
    error: str | None = None,
    seconds: float = 0.0,
) -> dict[str, Any]:
    """One row of the results table; a row with an error has status "error"."""
    return {
        "query_id": query_id,
        "question": question,
        "answer": answer,
        "result_json": result_json,
        "status": STATUS_ERROR if error is not None else STATUS_OK,
        "error": error,
        "seconds": float(seconds),
        "finished_at": datetime.now(UTC),
    }


def results_uri(out: str) -> str:
    return normalise_index_uri(out)


def _is_delta_table(uri: str) -> bool:
    from deltalake import DeltaTable

    if DeltaTable.is_deltatable(uri):
        return True
    if uri.startswith("file://"):
        local = Path(uri.removeprefix("file://"))
        if local.exists() and (local.is_file() or any(local.iterdir())):
            raise InputError(
                f"--out {local} exists but is not a Delta table; "
                "choose a new directory or the output of an earlier batch"
            )
    return False


def read_statuses(uri: str) -> dict[str, str]:
    """query_id -> "ok" when any row of it is ok, else "error"; empty when the table does not exist yet."""
    if not _is_delta_table(uri):
        return {}
    from deltalake import DeltaTable

    table = DeltaTable(uri).to_pyarrow_table(columns=["query_id", "status"])
    statuses: dict[str, str] = {}
    for query_id, status in zip(table["query_id"].to_pylist(), table["status"].to_pylist(), strict=True):
        if statuses.get(query_id) != STATUS_OK:
            statuses[query_id] = status
    return statuses


def append_rows(uri: str, rows: list[dict[str, Any]]) -> None:
    """One Delta commit with these rows (creates the table on first use)."""
    if not rows:
        return
    from deltalake import write_deltalake

    write_deltalake(uri, pa.Table.from_pylist(rows, schema=RESULT_SCHEMA), mode="append")


def delete_error_rows(uri: str, query_ids: Iterable[str]) -> int:
    """Delete the error rows of these queries (about to be retried); returns the rows deleted."""
    ids = sorted(set(query_ids))
    if not ids or not _is_delta_table(uri):
        return 0
    from deltalake import DeltaTable

    quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in ids)
    metrics = DeltaTable(uri).delete(f"status = '{STATUS_ERROR}' AND query_id IN ({quoted})")
    return int(metrics.get("num_deleted_rows", 0) or 0)


class ResultWriter:
    """Buffers rows and appends them every ``flush_every`` rows or ``flush_interval_s`` seconds."""

    def __init__(self, uri: str, flush_every: int, flush_interval_s: float) -> None:
        self.uri = uri
        self.flush_every = flush_every
        self.flush_interval_s = flush_interval_s
        self.buffer: list[dict[str, Any]] = []
        self.commits = 0
        self.rows_written = 0
        self._last_flush = time.monotonic()

    def add(self, row: dict[str, Any]) -> None:
        self.buffer.append(row)
        if len(self.buffer) >= self.flush_every:
            self.flush()
        else:
            self.flush_if_due()

    def flush_if_due(self) -> None:
        if time.monotonic() - self._last_flush >= self.flush_interval_s:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            append_rows(self.uri, self.buffer)
            self.commits += 1
            self.rows_written += len(self.buffer)
            self.buffer = []
        self._last_flush = time.monotonic()
