"""Rows of the batch results table, buffered and flushed in small commits as answers arrive.

The table's schema and its Delta I/O live with the other tables (``lazygraph.tables.results``);
this module shapes one row per answered (or failed) query and decides when to commit.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from lazygraph.tables import StorageSource
from lazygraph.tables.results import STATUS_ERROR, STATUS_OK, append_rows, replace_rows


def result_row(
    query_id: str,
    question: str,
    *,
    answer: str | None = None,
    result_json: str | None = None,
    error: str | None = None,
    seconds: float = 0.0,
    index_version: str | None = None,
) -> dict[str, Any]:
    """One row of the results table; a row with an error has status "error"."""
    return {
        "index_version": index_version,
        "query_id": query_id,
        "question": question,
        "answer": answer,
        "result_json": result_json,
        "status": STATUS_ERROR if error is not None else STATUS_OK,
        "error": error,
        "seconds": float(seconds),
        "finished_at": datetime.now(UTC),
    }


class ResultWriter:
    """Buffers rows and commits them every ``flush_every`` rows or ``flush_interval_s`` seconds to the
    table at ``uri`` reached with ``settings``: appended, or replacing the row of a query in ``existing``
    (the queries the table held a row of at start)."""

    def __init__(
        self,
        uri: str,
        flush_every: int,
        flush_interval_s: float,
        settings: StorageSource = None,
        existing: Iterable[str] = (),
        index_version: str | None = None,
    ) -> None:
        self.uri = uri
        self.settings = settings
        self.existing = set(existing)
        # Recorded in rows whose engine could not tell its index version.
        self.index_version = index_version
        self.flush_every = flush_every
        self.flush_interval_s = flush_interval_s
        self.buffer: list[dict[str, Any]] = []
        self.commits = 0
        self.rows_written = 0
        self._last_flush = time.monotonic()

    def add(self, row: dict[str, Any]) -> None:
        if row.get("index_version") is None:
            row = {**row, "index_version": self.index_version}
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
            fresh = [row for row in self.buffer if row["query_id"] not in self.existing]
            again = [row for row in self.buffer if row["query_id"] in self.existing]
            for write, rows in ((append_rows, fresh), (replace_rows, again)):
                if rows:
                    write(self.uri, rows, self.settings)
                    self.commits += 1
            self.rows_written += len(self.buffer)
            self.buffer = []
        self._last_flush = time.monotonic()
