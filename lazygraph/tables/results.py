"""The batch results table: Delta I/O of `lazygraph batch`'s answers (``deltalake``, no JVM).

Appending in small commits (rather than writing once at the end) is what makes a batch resumable: a
killed job loses at most the answers not yet flushed, and a re-run skips every query_id already
``ok`` by the current index version. A query that failed, or was answered by an older version of the
index, is answered again on the next run, and its new row replaces the old one in the same commit
(``replace_rows``), so the table holds one row per query. The schema is ``schemas.RESULTS``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

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
    return {query_id: answer.status for query_id, answer in read_answered(uri, settings).items()}


class Answered(NamedTuple):
    """What the results table holds for one query: its status and the index version that answered."""

    status: str
    index_version: str | None


def read_answered(uri: str, settings: StorageSource = None) -> dict[str, Answered]:
    """query_id -> its row's status and index version (an ok row wins over an error row of the same query,
    in tables written before rows were replaced); empty when the table does not exist yet. Tables
    written before the index version was recorded give None."""
    if not _is_delta_table(uri, settings):
        return {}
    handle = _table(uri, settings)
    has_version = "index_version" in handle.schema().to_arrow().names
    columns = ["query_id", "status", *(["index_version"] if has_version else [])]
    table = read_table(handle, settings, columns=columns)
    versions = table["index_version"].to_pylist() if has_version else [None] * table.num_rows
    answered: dict[str, Answered] = {}
    for query_id, status, version in zip(
        table["query_id"].to_pylist(), table["status"].to_pylist(), versions, strict=True
    ):
        if query_id not in answered or answered[query_id].status != STATUS_OK:
            answered[query_id] = Answered(status, version)
    return answered


def append_rows(uri: str, rows: list[dict[str, Any]], settings: StorageSource = None) -> None:
    """One Delta commit with these rows (creates the table on first use; adds the columns a table written
    by an earlier version lacks)."""
    if not rows:
        return
    from deltalake import write_deltalake

    with reaching(uri):
        write_deltalake(
            delta_uri(uri),
            _arrow(rows),
            mode="append",
            schema_mode="merge",
            storage_options=storage_options(settings, uri) or None,
        )


def replace_rows(uri: str, rows: list[dict[str, Any]], settings: StorageSource = None) -> None:
    """One Delta commit that replaces the rows of these queries (an error retried, an answer of an older
    index version) by these, and inserts those it does not hold: the table keeps one row per query, and
    the old row stays until the new one is written."""
    if not rows:
        return
    if not _is_delta_table(uri, settings):
        append_rows(uri, rows, settings)
        return
    with reaching(uri):
        (
            _table(uri, settings)
            .merge(
                _arrow(rows), "t.query_id = s.query_id", source_alias="s", target_alias="t", merge_schema=True
            )
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )


def _arrow(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist([{"index_version": None, **row} for row in rows], schema=RESULTS.schema)


def delete_error_rows(uri: str, query_ids: Iterable[str], settings: StorageSource = None) -> int:
    """Delete the error rows of these queries (about to be retried); returns the rows deleted."""
    ids = sorted(set(query_ids))
    if not ids or not _is_delta_table(uri, settings):
        return 0
    quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in ids)
    with reaching(uri):
        metrics = _table(uri, settings).delete(f"status = '{STATUS_ERROR}' AND query_id IN ({quoted})")
    return int(metrics.get("num_deleted_rows", 0) or 0)
