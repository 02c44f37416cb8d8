"""`lazygraph maintain`: compact an index's tables and remove the files no live run needs.

Every index run rewrites the derived tables (concepts, edges, communities: every few seconds under
`--watch`), appends small files to the others, and leaves the files of the versions it replaced; a killed
run leaves files no version ever referenced. Nothing else removes them. `maintain`, under the writer lease
(``lease``), with deltalake (no JVM):

1. undoes the unpublished writes of a run that never completed, as the next index run would
   (Delta RESTORE to the last complete run's versions);
2. **OPTIMIZE**: compacts every table whose files average less than ``maintenance.target_file_mb``
   into files of about that size; the result is published as a manifest row of mode ``maintain`` with
   the same rows, so queries read the compacted files from then on (and batch results stay current: the
   row keeps the index version of the run it compacted);
3. **VACUUM**: deletes every data file of an index table that none of the *live* runs' versions
   references: the last ``maintenance.keep_runs`` complete runs and every complete run that finished
   within ``maintenance.keep_hours``. A query, or a batch that pinned one of those runs, keeps every
   file it reads; a version no live run pinned (the intermediate versions of a run) may become
   unreadable. Files younger than ``maintenance.min_file_age_hours`` are never deleted. Vector index
   builds no live run uses go too, and so do serving stores no live run names
   (``serving.retention``). The LLM cache and the lease table are vacuumed by Delta's own rule
   (files removed more than ``keep_hours`` ago).

Before the vacuum, the serving store of the versions the index now names is built if it is missing
(compaction publishes new versions, and with them a store of its own), as after every index run
(``serving.publish``, ``serving.build_on_index``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lazygraph import tables
from lazygraph.errors import IndexNotFoundError
from lazygraph.manifest import index_version, run_versions
from lazygraph.runtime import storage
from lazygraph.tables.lease import LEASE_TABLE, writer_lease
from lazygraph.tables.read import read_table
from lazygraph.tables.store import commit_tag

if TYPE_CHECKING:
    from rich.console import Console

    from lazygraph.settings import Settings

MODE = "maintain"


@dataclass
class TableReport:
    files_before: int = 0
    bytes_before: int = 0
    compacted: bool = False
    removed_files: int = 0
    removed_bytes: int = 0
    kept_files: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class MaintainReport:
    index: str
    run_id: str
    dry_run: bool
    live_runs: list[str] = field(default_factory=list)
    undone: list[str] = field(default_factory=list)
    tables: dict[str, TableReport] = field(default_factory=dict)
    vector_builds_removed: list[str] = field(default_factory=list)
    serving_store: dict[str, Any] | None = None
    serving_stores_removed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        removed = sum(t.removed_bytes for t in self.tables.values())
        return {
            "index": self.index,
            "run_id": self.run_id,
            "dry_run": self.dry_run,
            "live_runs": self.live_runs,
            "undone": self.undone,
            "compacted": sorted(name for name, t in self.tables.items() if t.compacted),
            "removed_files": sum(t.removed_files for t in self.tables.values()),
            "removed_bytes": removed,
            "tables": {name: t.as_dict() for name, t in self.tables.items()},
            "vector_builds_removed": self.vector_builds_removed,
            "serving_store": self.serving_store,
            "serving_stores_removed": self.serving_stores_removed,
            "seconds": self.seconds,
        }


def complete_runs(index_uri: str, settings: Settings) -> list[dict[str, Any]]:
    """Every complete run of the index, newest first."""
    table = tables.open_delta(tables.table_uri(index_uri, tables.MANIFEST), settings=settings)
    if table is None:
        return []
    rows = [row for row in read_table(table, settings).to_pylist() if row["status"] == "complete"]
    return sorted(rows, key=lambda row: row["finished_at"], reverse=True)


def live_runs(
    runs: list[dict[str, Any]], settings: Settings, now: datetime | None = None
) -> list[dict[str, Any]]:
    """The runs whose versions stay readable: the newest ``keep_runs`` index runs (with the maintenance
    runs between them, which only rewrote their files) and every run within ``keep_hours``."""
    cfg = settings.maintenance
    cutoff = (now or datetime.now(UTC)) - timedelta(hours=cfg.keep_hours)
    live, counted = [], 0
    for run in runs:  # newest first
        if counted < cfg.keep_runs or run["finished_at"] >= cutoff:
            live.append(run)
        counted += run["mode"] != MODE
    return live


def maintain_index(
    settings: Settings, index: str, console: Console, dry_run: bool = False, run_id: str | None = None
) -> dict[str, Any]:
    """Compact and vacuum ``index`` (see the module doc); the report of what was done (or, with
    ``dry_run``, would be removed: a dry run changes nothing)."""
    # The serving store is derived data one layer up; imported here so tables never loads Lance.
    from lazygraph.run_context import new_run_id
    from lazygraph.serving.publish import build_after_publish
    from lazygraph.serving.retention import remove_unpinned_stores

    started = time.perf_counter()
    index_uri = tables.normalise_index_uri(index)
    run_id = run_id or new_run_id()
    report = MaintainReport(index_uri, run_id, dry_run)
    with writer_lease(settings, index_uri, run_id, console) as lease:
        runs = complete_runs(index_uri, settings)
        if not runs:
            raise IndexNotFoundError(
                f"no complete lazygraph index at {index_uri} to maintain; build one with `lazygraph index`"
            )
        last = runs[0]
        recorded = run_versions(last, index_uri)
        if not dry_run:
            report.undone = _undo_unpublished(index_uri, recorded, run_id, settings)
            compacted = _compact(index_uri, recorded, run_id, settings, report)
            if compacted:
                lease.check()
                last = _record(index_uri, last, compacted, run_id, settings)
                runs = [last, *runs]
            report.serving_store = build_after_publish(settings, index_uri, console, lease=lease)
        live = live_runs(runs, settings)
        report.live_runs = [run["run_id"] for run in live]
        pinned = _pinned(live, index_uri)
        for name in tables.ALL_TABLES:
            report.tables.setdefault(name, TableReport())
            _vacuum_table(index_uri, name, pinned.get(name, set()), settings, report.tables[name], dry_run)
        report.vector_builds_removed = _drop_vector_builds(index_uri, pinned, settings, dry_run)
        report.serving_stores_removed = remove_unpinned_stores(index_uri, live, settings, dry_run)
        # Appended by query processes that hold no lease: Delta's own rule, by the age of removed files.
        _vacuum_by_age(f"{index_uri}/llm_cache", settings.maintenance.keep_hours, settings, dry_run)
        _vacuum_by_age(
            f"{index_uri}/{LEASE_TABLE}", settings.maintenance.min_file_age_hours, settings, dry_run
        )
    report.seconds = round(time.perf_counter() - started, 3)
    return report.as_dict()


def _undo_unpublished(index_uri: str, recorded: dict[str, int], run_id: str, settings: Settings) -> list[str]:
    undone = []
    for name, version in recorded.items():
        table = tables.open_delta(tables.table_uri(index_uri, name), settings=settings)
        if table is not None and table.version() != version:
            table.restore(version, commit_properties=_tagged(run_id))
            undone.append(name)
    return undone


def _tagged(run_id: str) -> Any:
    from deltalake import CommitProperties

    return CommitProperties(custom_metadata={"userMetadata": commit_tag(run_id)})


def _compact(
    index_uri: str, recorded: dict[str, int], run_id: str, settings: Settings, report: MaintainReport
) -> dict[str, int]:
    """Compact the last complete run's tables of small files; table -> its new version."""
    target = settings.maintenance.target_file_mb * 1024 * 1024
    changed = {}
    for name in recorded:
        table = tables.open_delta(tables.table_uri(index_uri, name), settings=settings)
        if table is None:
            continue
        sizes = _file_sizes(table)
        entry = report.tables.setdefault(name, TableReport())
        entry.files_before, entry.bytes_before = len(sizes), sum(sizes)
        if len(sizes) < 2 or sum(sizes) / len(sizes) >= target:
            continue
        metrics = table.optimize.compact(target_size=target, commit_properties=_tagged(run_id))
        if int(metrics.get("numFilesRemoved", 0) or 0):
            changed[name] = table.version()
            entry.compacted = True
    return changed


def _file_sizes(table: Any) -> list[int]:
    actions = table.get_add_actions(flatten=True)
    column = actions.column("size_bytes") if "size_bytes" in actions.column_names else None
    if column is None:
        return [0] * actions.num_rows
    return [int(v) for v in column.to_pylist()]


def _record(
    index_uri: str, last: dict[str, Any], compacted: dict[str, int], run_id: str, settings: Settings
) -> dict[str, Any]:
    """A manifest row of mode ``maintain``: the last run's rows in the compacted files."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from lazygraph.tables.schemas import MANIFEST

    versions = json.loads(last["versions_json"] or "{}")
    for name, version in compacted.items():
        versions["tables"][name][0] = version
    # Same rows, so the same index version for batch results, and the same identity.
    versions["content_version"] = index_version(last)
    versions["index_id"] = versions.get("index_id") or last["run_id"]
    now = datetime.now(UTC)
    row = {
        **last,
        "run_id": run_id,
        "mode": MODE,
        "input": "",
        "started_at": now,
        "finished_at": now,
        "versions_json": json.dumps(versions),
        "timings_json": "{}",
    }
    uri = tables.table_uri(index_uri, tables.MANIFEST)
    write_deltalake(
        storage.delta_uri(uri),
        pa.Table.from_pylist([row], schema=MANIFEST.schema),
        mode="append",
        storage_options=tables.storage_options(settings, uri) or None,
        commit_properties=_tagged(run_id),
    )
    return row


def _pinned(runs: list[dict[str, Any]], index_uri: str) -> dict[str, set[int]]:
    pinned: dict[str, set[int]] = {}
    for run in runs:
        for name, version in run_versions(run, index_uri).items():
            pinned.setdefault(name, set()).add(version)
    return pinned


def _vacuum_table(
    index_uri: str, name: str, versions: set[int], settings: Settings, entry: TableReport, dry_run: bool
) -> None:
    """Delete the table's data files no pinned version references (and old enough)."""
    import pyarrow.fs as pafs

    uri = tables.table_uri(index_uri, name)
    latest = tables.open_delta(uri, settings=settings)
    if latest is None:
        return
    referenced = set()
    for version in {*versions, latest.version()}:
        table = tables.open_delta(uri, version, settings)
        if table is not None:
            referenced.update(_relative(uri, file) for file in table.file_uris())
    fs, root = storage.arrow_filesystem(uri, tables.storage_settings(settings)), storage.arrow_path(uri)
    cutoff = time.time() - settings.maintenance.min_file_age_hours * 3600
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        relative = info.path[len(root) :].lstrip("/")
        if info.type != pafs.FileType.File or _hidden(relative):
            continue
        if relative in referenced:
            entry.kept_files += 1
            continue
        modified = info.mtime.timestamp() if info.mtime is not None else 0.0
        if modified > cutoff:
            entry.kept_files += 1
            continue
        entry.removed_files += 1
        entry.removed_bytes += int(info.size or 0)
        if not dry_run:
            fs.delete_file(info.path)


def _relative(table_uri: str, file_uri: str) -> str:
    from urllib.parse import unquote

    base = storage.arrow_path(table_uri).rstrip("/")
    path = unquote(storage.arrow_path(file_uri))
    return path[len(base) :].lstrip("/") if path.startswith(base) else path


def _hidden(relative: str) -> bool:
    """The log, and what Delta and Spark keep beside the data (names starting with _ or .)."""
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


def _drop_vector_builds(
    index_uri: str, pinned: dict[str, set[int]], settings: Settings, dry_run: bool
) -> list[str]:
    from lazygraph.vectors import store

    latest = tables.open_delta(tables.table_uri(index_uri, tables.CHUNK_EMBEDDINGS), settings=settings)
    keep = {*pinned.get(tables.CHUNK_EMBEDDINGS, set()), *([latest.version()] if latest is not None else [])}
    removed = []
    for build in store.list_builds(index_uri, settings):
        meta = store.read_meta(build, settings)
        version = int(meta["embeddings_version"]) if meta else int(build.rsplit("-v", 1)[-1])
        if version not in keep:
            removed.append(build)
            if not dry_run:
                store.delete_build(build, settings)
    return removed


def _vacuum_by_age(uri: str, hours: float, settings: Settings, dry_run: bool) -> None:
    table = tables.open_delta(uri, settings=settings)
    if table is None:
        return
    table.vacuum(retention_hours=int(hours), dry_run=dry_run, enforce_retention_duration=False)
