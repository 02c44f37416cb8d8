"""The batch results table: Delta I/O of `lazygraph batch`'s answers (``deltalake``, no JVM).

Appending in small commits (rather than writing once at the end) is what makes a batch resumable: a
killed job loses at most the answers not yet flushed, and a re-run skips every query_id already
``ok``. A query that failed is tried again on the next run, which first deletes its error row, so
the table holds at most one row per query. The schema is ``schemas.RESULTS``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from lazygraph.errors import InputError
from lazygraph.tables import arrow_dataset, normalise_index_uri
from lazygraph.tables.schemas import RESULTS

STATUS_OK = "ok"
STATUS_ERROR = "error"


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

    table = arrow_dataset(DeltaTable(uri)).to_table(columns=["query_id", "status"])
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

    write_deltalake(uri, pa.Table.from_pylist(rows, schema=RESULTS.schema), mode="append")


def delete_error_rows(uri: str, query_ids: Iterable[str]) -> int:
    """Delete the error rows of these queries (about to be retried); returns the rows deleted."""
    ids = sorted(set(query_ids))
    if not ids or not _is_delta_table(uri):
        return 0
    from deltalake import DeltaTable

    quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in ids)
    metrics = DeltaTable(uri).delete(f"status = '{STATUS_ERROR}' AND query_id IN ({quoted})")
    return int(metrics.get("num_deleted_rows", 0) or 0)
