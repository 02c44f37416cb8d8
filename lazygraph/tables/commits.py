"""How a run's writes become the index: tagged commits, a clean start, and the run's own versions.

With the writer lease (``lease``) held, a run

1. **tags** every Delta commit it makes with its run id (the commit's ``userMetadata``, ``commit_tag``),
   so the history of a table tells which run wrote each version;
2. **starts from the last complete run** (``begin_run``): a table whose latest version is not the one
   the last complete run recorded holds writes of a run that never completed (killed, failed, or one
   that lost its lease); it is restored to the recorded version (Delta RESTORE), and a table no complete
   run recorded is emptied. Those writes were never published and now never will be, whatever the new
   run's input; the files they left are removed by `lazygraph maintain`;
3. **publishes what it wrote** (``publish_versions``): the manifest records, for every table this run
   wrote, the version of its own last commit, and for every other table the version the last complete
   run left; if any table moved past those versions (a writer that ignored the lease), or the lease was
   lost, nothing is published.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lazygraph import tables
from lazygraph.errors import IndexStateError
from lazygraph.tables.store import USER_METADATA, commit_author, commit_tag

if TYPE_CHECKING:
    from lazygraph.run_context import RunContext

__all__ = ["USER_METADATA", "begin_run", "commit_author", "commit_tag", "publish_versions"]


def begin_run(
    ctx: RunContext, last_run: dict[str, Any] | None, recorded: dict[str, int]
) -> dict[str, list[str]]:
    """Tag this run's commits and undo what runs that never completed wrote; sets ``ctx.baseline`` (the
    version at which each table holds the last complete run's rows) and ``ctx.index_id``. ``recorded``:
    the table versions ``last_run`` recorded (``manifest.run_versions``; empty before the first run).
    Returns the undone writes: table -> the runs whose commits were undone."""
    # Rows of a watch micro-batch come from the stream's own session: its writes are tagged too.
    sessions = {
        id(s): s for s in (ctx.spark, getattr(ctx.input_records, "sparkSession", None)) if s is not None
    }
    for session in sessions.values():
        session.conf.set(USER_METADATA, commit_tag(ctx.run_id))
    ctx.store.run_id = ctx.run_id
    ctx.index_id = _index_id(last_run, ctx.run_id)
    ctx.baseline = {}
    undone: dict[str, list[str]] = {}
    for name in tables.ALL_TABLES:
        if name == tables.MANIFEST:
            continue
        table = tables.open_delta(ctx.store.uri(name), settings=ctx.settings)
        if table is None:
            continue
        target = recorded.get(name)
        if table.version() == target:
            ctx.baseline[name] = target
            continue
        undone[name] = _authors(table, target)
        if target is not None:
            ctx.baseline[name] = ctx.store.restore(name, target)
        else:
            ctx.store.truncate(name)
    if undone:
        runs = sorted({run for authors in undone.values() for run in authors})
        ctx.console.print(
            f"[yellow]undid the unpublished writes of {', '.join(runs) or 'an unknown run'} to "
            f"{', '.join(sorted(undone))}[/]",
            highlight=False,
        )
    return undone


def _index_id(last_run: dict[str, Any] | None, run_id: str) -> str:
    """The index's identity: the run that created it, carried by every later run (an index recorded
    before identities were gets its last run's id)."""
    import json

    if last_run is None:
        return run_id
    return json.loads(last_run.get("versions_json") or "{}").get("index_id") or last_run["run_id"]


def _authors(table: Any, since: int | None) -> list[str]:
    """The runs whose tagged commits came after version ``since``."""
    found = []
    try:
        history = table.history()
    except Exception:  # noqa: BLE001
        return found
    for entry in history:
        version = entry.get("version")
        tag = entry.get("userMetadata") or ""
        if (since is None or (version is not None and version > since)) and tag.startswith("lazygraph:"):
            found.append(tag.removeprefix("lazygraph:"))
    return sorted(set(found))


def publish_versions(ctx: RunContext) -> dict[str, int]:
    """The table versions the run's manifest row records: its own last commit of every table it wrote,
    the last complete run's state of every other. IndexStateError (nothing published) when a table has
    moved past them or the run lost its lease."""
    versions = {**ctx.baseline, **ctx.store.written}
    for name, version in sorted(versions.items()):
        table = tables.open_delta(ctx.store.uri(name), settings=ctx.settings)
        latest = None if table is None else table.version()
        if latest != version:
            author = commit_author(table) if table is not None else None
            raise IndexStateError(
                f"table {name} of {ctx.index_uri} was changed by {author or 'another writer'} while run "
                f"{ctx.run_id} ran (version {latest}, this run's is {version}); nothing was published. Run "
                "the same command again: it undoes the unpublished writes first"
            )
    if ctx.lease is not None:
        ctx.lease.check()
    return versions
