"""The writer lease: at most one run writes an index at a time.

Two cron runs of `lazygraph index --append` that overlap, or a `--watch` stream beside a `--delete`, would
otherwise interleave their Delta commits on the same tables and publish a mix. Every run that writes an
index (index, delete, each watch micro-batch, maintain) first takes the index's lease, and holds it until
its manifest row is written.

The lease is a one-row Delta table, ``<index>/_writer_lease``, changed only by compare-and-swap: a writer
reads the table's latest version, and overwrites the row *as of that version*; of two writers that read
the same version, Delta's commit protocol lets exactly one commit the next version and refuses the other
(a concurrent delete of what it read). So the lease is exactly as safe as a Delta commit on that storage
(on S3 that means a store with conditional writes, as for any concurrent Delta writers).

A lease names its holder (run id, command, host, process, since when) and expires ``writer.lease_ttl_s``
after its last renewal; the holder renews it from a background thread. A holder that died is noticed at
once on its own machine (its process is gone) and after the time to live elsewhere. A run that finds the
lease held waits up to ``writer.wait_s`` (a watch micro-batch waits until it is free), then exits with
``IndexBusyError``, one line naming the holder. A holder that finds at renewal, or before publishing, that
its lease was taken over publishes nothing (``check``).
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lazygraph.errors import IndexStateError, LazyGraphError

if TYPE_CHECKING:
    from rich.console import Console

    from lazygraph.settings import Settings

LEASE_TABLE = "_writer_lease"
HELD, RELEASED = "held", "released"
_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("state", pa.string()),
        ("command", pa.string()),
        ("host", pa.string()),
        ("pid", pa.int64()),
        ("acquired_at", pa.timestamp("us", tz="UTC")),
        ("expires_at", pa.timestamp("us", tz="UTC")),
    ]
)


class IndexBusyError(LazyGraphError):
    """Another run holds the index's writer lease."""


@dataclass(frozen=True)
class Holder:
    run_id: str
    state: str
    command: str
    host: str
    pid: int
    acquired_at: datetime
    expires_at: datetime

    def describe(self) -> str:
        since = self.acquired_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"run {self.run_id} (`{self.command}`, host {self.host}, pid {self.pid}, since {since})"


def this_command() -> str:
    """How this process was started, as a holder shows it (`lazygraph index --append --input ...`)."""
    first = sys.argv[0] if sys.argv and sys.argv[0] else "python"
    name = "lazygraph" if "lazygraph" in first else os.path.basename(first)
    return shlex.join([name, *sys.argv[1:]])[:300]


class WriterLease:
    """The lease of one index for one run; ``acquire`` it, ``check`` it before publishing, ``release``
    it at the end (a context manager does both ends)."""

    def __init__(
        self,
        index_uri: str,
        run_id: str,
        settings: Settings,
        command: str | None = None,
        clock: Any = None,
    ) -> None:
        from lazygraph import tables

        self.index_uri = tables.normalise_index_uri(index_uri)
        self.uri = f"{self.index_uri}/{LEASE_TABLE}"
        self.run_id = run_id
        self.settings = settings
        self.ttl = timedelta(seconds=settings.writer.lease_ttl_s)
        self.command = command or this_command()
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self._now = clock or (lambda: datetime.now(UTC))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.held = False
        self.created = False  # this run created the lease table (and maybe the index directory)
        self.lost: str | None = None  # why the lease was lost, once it was

    # ---- the table -----------------------------------------------------------------------------------
    def _read(self) -> tuple[Any, Holder | None]:
        """The lease table's handle and its holder; (None, None) when there is no table. A first run
        that failed removes the index directory it created (``_remove_if_only_the_lease``) while others
        may be waiting: a table that vanishes while it is read is looked at again, and is then absent."""
        from deltalake.exceptions import DeltaError

        from lazygraph import tables
        from lazygraph.errors import IndexFileError

        for attempt in range(20):
            try:
                table = tables.open_delta(self.uri, settings=self.settings)
                return table, None if table is None else self._holder_of(table)
            except (DeltaError, IndexFileError):
                if attempt == 19:
                    raise
                time.sleep(0.05)
        raise AssertionError("unreachable")

    def holder(self) -> Holder | None:
        """Who holds (or last held) the lease; None before the index's first run took it."""
        return self._read()[1]

    def _holder_of(self, table: Any) -> Holder | None:
        from lazygraph.tables.read import read_table

        rows = read_table(table, self.settings).to_pylist()
        return Holder(**rows[0]) if rows else None

    def _row(self, state: str, acquired_at: datetime) -> pa.Table:
        now = self._now()
        return pa.Table.from_pylist(
            [
                {
                    "run_id": self.run_id,
                    "state": state,
                    "command": self.command,
                    "host": self.host,
                    "pid": self.pid,
                    "acquired_at": acquired_at,
                    "expires_at": now + self.ttl if state == HELD else now,
                }
            ],
            schema=_SCHEMA,
        )

    def _swap(self, table: Any | None, row: pa.Table) -> bool:
        """Write ``row`` as the table's next version after ``table`` (None: create it); False when
        another writer committed first."""
        from deltalake import CommitProperties, write_deltalake
        from deltalake.exceptions import CommitFailedError, DeltaError

        from lazygraph import tables
        from lazygraph.runtime.storage import delta_uri

        target = table if table is not None else delta_uri(self.uri)
        options = tables.storage_options(self.settings, self.uri) or None
        try:
            with tables.reaching(self.uri):
                write_deltalake(
                    target,
                    row,
                    mode="overwrite" if table is not None else "error",
                    storage_options=None if table is not None else options,
                    # No retry as a later version: a commit that finds its version taken fails, which
                    # is what makes this a compare-and-swap (deltalake otherwise commits a creation or
                    # an overwrite of an empty table on top of a concurrent one).
                    commit_properties=CommitProperties(
                        custom_metadata={"userMetadata": f"lease:{self.run_id}"}, max_commit_retries=0
                    ),
                )
        except (CommitFailedError, DeltaError):
            return False
        return True

    def _free(self, holder: Holder | None) -> bool:
        if holder is None or holder.state == RELEASED or holder.run_id == self.run_id:
            return True
        if holder.expires_at <= self._now():
            return True
        # A holder on this machine whose process is gone died without releasing it.
        return holder.host == self.host and not _alive(holder.pid)

    # ---- acquiring, renewing, releasing ----------------------------------------------------------------
    def try_acquire(self) -> Holder | None:
        """Take the lease if it is free; returns None when taken, else the holder in the way."""
        while True:
            table, holder = self._read()
            if not self._free(holder):
                return holder
            if self._swap(table, self._row(HELD, self._now())):
                self.acquired_at = self._now()
                self.held, self.lost = True, None
                self.created = table is None
                return None
            time.sleep(0.05)  # another writer changed the lease in between: look again

    def acquire(self, wait_s: float | None, console: Console | None = None) -> None:
        """Take the lease, waiting up to ``wait_s`` seconds for its holder (None: as long as it takes);
        IndexBusyError naming the holder when it is not free in time. Renewed from then on."""
        started = time.monotonic()
        told = False
        while True:
            holder = self.try_acquire()
            if holder is None:
                self._start_heartbeat()
                return
            waited = time.monotonic() - started
            if wait_s is not None and waited >= wait_s:
                raise IndexBusyError(
                    f"the index {self.index_uri} is being written by {holder.describe()}; run again when it "
                    "has finished, or set writer.wait_s (LAZYGRAPH_WRITER__WAIT_S) to wait for it"
                )
            if console is not None and not told:
                console.print(f"waiting for {holder.describe()} to finish writing {self.index_uri}")
                told = True
            poll = self.settings.writer.poll_s
            time.sleep(poll if wait_s is None else max(0.05, min(poll, wait_s - waited)))

    def renew(self) -> None:
        """Push the expiry forward; marks the lease lost when another run holds it now."""
        with self._lock:
            if not self.held:
                return
            table, holder = self._read()
            if holder is None or holder.run_id != self.run_id or holder.state != HELD:
                self._mark_lost(holder)
                return
            if not self._swap(table, self._row(HELD, holder.acquired_at)):
                current = self.holder()
                if current is None or current.run_id != self.run_id:
                    self._mark_lost(current)

    def _mark_lost(self, holder: Holder | None) -> None:
        self.held = False
        taker = holder.describe() if holder is not None else "nobody"
        self.lost = f"its writer lease on {self.index_uri} expired and was taken by {taker}"

    def check(self) -> None:
        """Before publishing: IndexStateError unless this run still holds the lease."""
        if self.held:
            holder = self.holder()
            if holder is not None and holder.run_id == self.run_id and holder.state == HELD:
                if holder.expires_at > self._now():
                    return
                self.lost = f"its writer lease on {self.index_uri} expired (writer.lease_ttl_s)"
            else:
                self._mark_lost(holder)
        raise IndexStateError(
            f"run {self.run_id} did not publish: {self.lost or 'it holds no writer lease'}. Its writes "
            "will be undone by the next run; run the same command again"
        )

    def release(self) -> None:
        self._stop_heartbeat()
        with self._lock:
            if not self.held:
                return
            self.held = False
            for _ in range(20):
                table, holder = self._read()
                if holder is None or holder.run_id != self.run_id:
                    return
                if self._swap(table, self._row(RELEASED, holder.acquired_at)):
                    return

    # ---- the heartbeat ---------------------------------------------------------------------------------
    def _start_heartbeat(self) -> None:
        self._stop.clear()
        interval = max(0.2, self.ttl.total_seconds() / 4)

        def beat() -> None:
            while not self._stop.wait(interval):
                try:
                    self.renew()
                except Exception:  # noqa: BLE001 - a failed renewal is retried; ``check`` decides at the end
                    continue

        self._thread = threading.Thread(target=beat, name=f"lease-{self.run_id}", daemon=True)
        self._thread.start()

    def _stop_heartbeat(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped by its parent) has exited too.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


@contextmanager
def writer_lease(
    settings: Settings,
    index: str,
    run_id: str,
    console: Console | None = None,
    wait_s: float | None = -1.0,
) -> Iterator[WriterLease]:
    """Hold the index's writer lease for the block (``wait_s``: -1 for ``writer.wait_s``, None to wait
    as long as it takes)."""
    lease = WriterLease(index, run_id, settings)
    lease.acquire(settings.writer.wait_s if wait_s == -1.0 else wait_s, console)
    try:
        yield lease
    finally:
        if lease.created:
            _remove_if_only_the_lease(lease)
        lease.release()


def _remove_if_only_the_lease(lease: WriterLease) -> None:
    """A first run that failed before writing anything (an unusable input) leaves no index directory.

    Removed while the lease is still held (and no longer renewed), so that a run waiting for it sees it
    held until the directory is gone, then finds no lease and creates its own: never a released lease
    whose table vanishes after another run took it."""
    import pyarrow.fs as pafs

    from lazygraph import tables
    from lazygraph.runtime import storage

    try:
        fs = storage.arrow_filesystem(lease.index_uri, tables.storage_settings(lease.settings))
        root = storage.arrow_path(lease.index_uri)
        entries = fs.get_file_info(pafs.FileSelector(root))
        if {info.base_name for info in entries} != {LEASE_TABLE}:
            return
        lease._stop_heartbeat()  # a renewal must not write into the directory being removed
        holder = lease.holder()
        if holder is not None and holder.run_id == lease.run_id and holder.state == HELD:
            fs.delete_dir(root)
    except OSError:
        pass  # best effort: a lease table alone is harmless
