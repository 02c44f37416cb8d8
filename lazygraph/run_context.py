"""What every indexing stage is handed: the Spark session, the settings, the index's tables, the log.

One ``RunContext`` per ``lazygraph index`` run replaces long argument lists: a stage takes the
context (plus the typed result of the stage before it) and returns its own typed result. ``RunLog``
times each stage, prints one line per stage, and turns Spark/py4j failures into one readable error
that says whether the index was left unchanged.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rich.console import Console

from lazygraph.errors import IndexStateError, InputError, LazyGraphError, SetupError, SparkMemoryError
from lazygraph.settings import Settings
from lazygraph.tables.store import IndexStore


@dataclass
class RunLog:
    """Timings and row counts of one run, printed per stage as it goes."""

    console: Console
    timings: dict[str, float] = field(default_factory=dict)
    rows: dict[str, dict[str, int]] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[dict[str, int]]:
        counts: dict[str, int] = {}
        started = time.perf_counter()
        try:
            yield counts
        except LazyGraphError:
            raise
        except Exception as exc:  # Spark/py4j errors become one readable message
            raise readable_error(name, exc) from exc
        seconds = time.perf_counter() - started
        self.timings[name] = round(seconds, 3)
        self.rows[name] = counts
        detail = ", ".join(f"{k} {v:,}" for k, v in counts.items())
        self.console.print(f"[bold cyan]{name:<12}[/] {detail}  [dim]{seconds:.1f} s[/]", highlight=False)


def readable_error(stage: str, exc: Exception) -> LazyGraphError:
    """One line a user can act on, from a failure deep inside Spark."""
    text = str(exc)
    if "SetupError" in text or isinstance(exc, ImportError):
        line = next(
            (ln for ln in text.splitlines() if "SetupError" in ln), text.splitlines()[0] if text else ""
        )
        return SetupError(f"stage {stage}: {line.split('SetupError:', 1)[-1].strip()}")
    from lazygraph.tables.read import spark_read_failure

    unreadable = spark_read_failure(text)
    if unreadable is not None:
        return unreadable
    if "java.lang.OutOfMemoryError" in text:
        return _out_of_memory(stage)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    if len(first) > 400:
        first = first[:400] + "..."
    if stage == "read":
        return InputError(
            f"the input could not be read: {type(exc).__name__}: {first}. Check that the file or folder is "
            "readable and holds JSON Lines or .txt/.md files; the index was not changed."
        )
    return IndexStateError(
        f"stage {stage} failed: {type(exc).__name__}: {first}. The index keeps its previous complete state; "
        "fix the cause and run the same command again to finish the work."
    )


def _out_of_memory(stage: str) -> SparkMemoryError:
    # On local[...] every task runs in the driver's JVM, so its heap is spark.driver.memory; on a cluster
    # it is each executor's. More shuffle partitions make each task's share smaller on either.
    return SparkMemoryError(
        f"stage {stage} failed: a Spark task ran out of Java heap. On a local master raise the driver's "
        "memory (e.g. LAZYGRAPH_SPARK__DRIVER_MEMORY=12g); on a cluster raise spark.executor.memory "
        "(the spark.conf setting) or the shuffle partitions "
        "(LAZYGRAPH_SPARK__SHUFFLE_PARTITIONS). The index keeps its previous complete state; run the same "
        "command again to finish the work."
    )


@dataclass
class RunContext:
    spark: Any
    settings: Settings
    store: IndexStore
    log: RunLog
    input_path: str
    run_id: str = field(default_factory=lambda: new_run_id())
    # Records already read (one micro-batch of ``index --watch``); input_path then only names the source.
    input_records: Any = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    # The writer lease the run holds (``tables.lease``); the versions at which the tables hold the last
    # complete run's rows, and the index's identity (``tables.commits.begin_run``).
    lease: Any = None
    baseline: dict[str, int] = field(default_factory=dict)
    index_id: str = ""

    @property
    def index_uri(self) -> str:
        return self.store.index_uri

    @property
    def console(self) -> Console:
        return self.log.console


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
