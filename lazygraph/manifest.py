"""The manifest: which version of every table makes up an index, as of its last complete run.

The pipeline writes its manifest row (status "complete") last, with the Delta version of every table
it left behind. Readers open each table at exactly that version (``open_complete``), so that a query
running while an append writes never mixes old and new tables, and an index whose first build never
finished is refused with what to do rather than served half-built. Reading needs only ``deltalake``
(no JVM).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from lazygraph import tables
from lazygraph.errors import IndexNotFoundError, IndexStateError


def last_complete_run(index_uri: str) -> dict[str, Any] | None:
    """The manifest row of the most recent complete run, or None."""
    table = tables.open_delta(tables.table_uri(index_uri, tables.MANIFEST))
    if table is None:
        return None
    manifest = table.to_pyarrow_table().to_pylist()
    complete = [row for row in manifest if row["status"] == "complete"]
    return max(complete, key=lambda row: row["finished_at"]) if complete else None


def run_versions(run: dict[str, Any], index_uri: str) -> dict[str, int]:
    """table name -> Delta version recorded by a complete run (``versions_json["tables"]``)."""
    try:
        recorded = json.loads(run["versions_json"] or "{}")["tables"]
        return {name: int(facts[0]) for name, facts in recorded.items()}
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise IndexStateError(
            f"the manifest of {index_uri} records no table versions for run {run.get('run_id')}; "
            "rebuild the index in a new directory with `lazygraph index`"
        ) from exc


def complete_versions(index_uri: str) -> tuple[dict[str, Any], dict[str, int]]:
    """The last complete run and its table versions; a clear error when there is none."""
    run = last_complete_run(index_uri)
    if run is None:
        raise _no_complete_run(index_uri)
    return run, run_versions(run, index_uri)


def open_complete(index_uri: str, names: Iterable[str], versions: dict[str, int]) -> dict[str, Any]:
    """deltalake handles of ``names`` at the given versions; tables the run did not have are left out."""
    opened = {}
    for name in names:
        if name in versions:
            opened[name] = _open_at(index_uri, name, versions[name])
    return opened


def _open_at(index_uri: str, name: str, version: int) -> Any:
    from deltalake.exceptions import DeltaError

    uri = tables.table_uri(index_uri, name)
    try:
        table = tables.open_delta(uri, version)
    except DeltaError as exc:  # log entries expired or data files vacuumed since that run
        raise IndexStateError(
            f"table {name} of {index_uri} can no longer be read at version {version}, the one its last "
            f"complete run recorded ({exc}); run `lazygraph index` on the index again to record a new one"
        ) from exc
    if table is None:
        raise IndexStateError(
            f"table {name} of {index_uri} is missing although its last complete run wrote it; "
            "rebuild the index in a new directory with `lazygraph index`"
        )
    return table


def _no_complete_run(index_uri: str) -> Exception:
    """'nothing here' and 'a first build that never finished' call for different actions."""
    present = [n for n in tables.ALL_TABLES if tables.open_delta(tables.table_uri(index_uri, n)) is not None]
    if not present:
        return IndexNotFoundError(
            f"no lazygraph index at {index_uri}; build one with "
            f"`lazygraph index --input DOCS --index {index_uri}`"
        )
    return IndexStateError(
        f"the index at {index_uri} has tables ({', '.join(present)}) but its first build never completed; "
        f"run `lazygraph index --input DOCS --index {index_uri}` again to finish it"
    )
