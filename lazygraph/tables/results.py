"""The batch results table: Delta I/O of `lazygraph batch`'s answers (``deltalake``, no JVM).

Appending in small commits (rather than writing once at the end) is what makes a batch resumable: a
killed job loses at most the answers not yet flushed, and a re-run skips every query_id already
``ok``. A query that failed is tried again on the next run, which first deletes its error row, so
the table holds at most one row per query. The schema is ``schemas.RESULTS``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lazygraph.errors import InputError
from lazygraph.runtime.storage import delta_uri
from lazygraph.tables import local_path, normalise_index_uri, reaching, storage_options
from lazygraph.tables.read import read_table
from lazygraph.tables.schemas import RESULTS

if TYPE_CHECKING:
    from lazygraph.tables import StorageSource

STATUS_OK = "ok"
STATUS_ERROR = "error"


def results_uri(out: str) -> str:
    """The canonical URI of ``--out`` (see ``tables.normalise_index_uri``)."""
    return normalise_index_uri(out)


def _table(uri: str, settings: StorageSource) -> Any:
    from deltalake import DeltaTable

    with reaching(uri):
        return DeltaTable(delta_uri(uri), storage_options=storage_options(settings, uri) or None)


def _is_delta_table(uri: str, settings: StorageSource) -> bool:
    from deltalake import DeltaTable

    with reaching(uri):
        if DeltaTable.is_deltatable(delta_uri(uri), storage_options=storage_options(settings, uri) or None):
            return True
    local = local_path(uri)
    if local is not None:  # a remote prefix holding other objects is left alone: it cannot be listed cheaply
        path = Path(local)
        if path.exists() and (path.is_file() or any(path.iterdir())):
            raise InputError(
                f"--out {local} exists but is not a Delta table; "
                "choose a new directory or the output of an earlier batch"
            )
    return False


def read_statuses(uri: str, settings: StorageSource = None) -> dict[str, str]:
    """query_id -> "ok" when any row of it is ok, else "error"; empty when the table does not exist yet.

    ``settings`` (here and below) reach the table's storage; None: this process's settings.
    """
    if not _is_delta_table(uri, settings):
        return {}
    table = read_table(_table(uri, settings), settings, columns=["query_id", "status"])
    statuses: dict[str, str] = {}
    for query_id, status in zip(table["query_id"].to_pylist(), table["status"].to_pylist(), strict=True):
        if statuses.get(query_id) != STATUS_OK:
            statuses[query_id] = status
    return statuses


def append_rows(uri: str, rows: list[dict[str, Any]], settings: StorageSource = None) -> None:
    """One Delta commit with these rows (creates the table on first use)."""
    if not rows:
        return
    from deltalake import write_deltalake

    with reaching(uri):
        write_deltalake(
            delta_uri(uri),
            pa.Table.from_pylist(rows, schema=RESULTS.schema),
            mode="append",
            storage_options=storage_options(settings, uri) or None,
        )


def delete_error_rows(uri: str, query_ids: Iterable[str], settings: StorageSource = None) -> int:
    """Delete the error rows of these queries (about to be retried); returns the rows deleted."""
    ids = sorted(set(query_ids))
    if not ids or not _is_delta_table(uri, settings):
        return 0
    quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in ids)
    with reaching(uri):
        metrics = _table(uri, settings).delete(f"status = '{STATUS_ERROR}' AND query_id IN ({quoted})")
    return int(metrics.get("num_deleted_rows", 0) or 0)
