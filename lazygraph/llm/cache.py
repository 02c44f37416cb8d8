"""A cache of the LLM work whose result is fixed by its input, kept beside the index so it outlives a job.

Two kinds of entries, both keyed by a SHA-256 of everything the result depends on:

- a **verdict**: P(yes) of one relevance test, keyed by (model, relevance prompt version and text,
  the question normalised (case and white space), SHA-256 of the passage the assessor read). The
  passage is the text itself, not a chunk id, so an edited or re-chunked document never reuses a
  stale verdict;
- a **completion**: the text of a chat completion at temperature 0 (refinement, claim extraction,
  answers), keyed by (model, the messages, ``max_tokens``, the JSON schema). The claims of a subquery
  are such a completion: its messages hold the question, the chunk set and the prompt version.

A standing question asked again tomorrow therefore pays only for the chunks it has not judged before,
and a re-run over an unchanged index makes no LLM call at all. Sampled completions (temperature > 0)
are never cached.

Entries are read by key, never loaded whole: a lookup asks a bounded in-memory LRU first
(``query.llm_cache.local_entries``), then the Delta table ``llm_cache`` (``tables.schemas.LLM_CACHE``),
reading only the partition that can hold each key (``bucket``, the key's first two hex digits, 256
partitions). Opening the cache reads nothing, so a query actor holds at most that many entries
whatever the table's size. Entries made here are answered at once (from the LRU, and until ``flush``
from the entries waiting to be written) and appended by ``flush``: the engine flushes after every
query, so a killed job loses at most one query's entries, and other processes see them from their
next lookup. Several processes may append at once (Delta appends do not conflict); a key written
twice is read once. A location that cannot be written (a read-only index) turns persistence off with
one warning; the in-memory cache keeps working.

A table written before the partitions (no ``bucket`` column) is kept as it is and still answers:
its lookups read every file with a key filter, and new entries are appended in its layout. Pointing
``query.llm_cache.location`` at a new location starts a partitioned table (without the old entries,
which stay where they are).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from lazygraph.settings import LLMCacheSettings, StorageSettings

log = logging.getLogger(__name__)

VERDICT = "verdict"
COMPLETION = "completion"
# The partition column and how many leading hex digits of the key it holds (16**2 = 256 partitions).
BUCKET = "bucket"
_BUCKET_DIGITS = 2
# Each flush adds a small file to every partition it writes; past this many files a partition is
# compacted (an unpartitioned table of older indexes: past _COMPACT_AFTER_FILES * 4 files in all).
_COMPACT_AFTER_FILES = 16
_STORED_COLUMNS = ["key", "kind", "p_yes", "text", "prompt_tokens", "completion_tokens"]


def normalise_question(text: str) -> str:
    return " ".join(text.lower().split())


def _digest(parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def prompt_id(task: str, version: int, system: str, user: str) -> str:
    """A prompt's version and a digest of its text: an edited prompt file never reuses old verdicts."""
    return f"{task}.v{version}:{hashlib.sha256((system + chr(0) + user).encode()).hexdigest()[:16]}"


def verdict_key(model: str, prompt: str, question: str, passage: str) -> str:
    """``prompt``: the relevance prompt's ``prompt_id``."""
    passage_hash = hashlib.sha256(passage.encode()).hexdigest()
    return _digest([VERDICT, model, prompt, normalise_question(question), passage_hash])


def completion_key(
    model: str, messages: Sequence[dict[str, str]], max_tokens: int, json_schema: dict | None
) -> str:
    return _digest([COMPLETION, model, [dict(m) for m in messages], max_tokens, json_schema])


class Verdict(NamedTuple):
    p_yes: float
    prompt_tokens: int


class Completion(NamedTuple):
    text: str
    prompt_tokens: int
    completion_tokens: int


@dataclass
class CacheCounts:
    hits: int = 0
    misses: int = 0

    @property
    def hit_rate(self) -> float:
        asked = self.hits + self.misses
        return self.hits / asked if asked else 0.0


Entry = Verdict | Completion
# An entry's place in memory: (kind, key). Keys of both kinds are digests that already name the kind;
# the pair keeps a completion from ever answering a verdict lookup all the same.
Slot = tuple[str, str]


@dataclass
class StorageReads:
    """What lookups read from the Delta table: reads (one per batch of keys missing from memory), the
    data files they opened and the rows they returned."""

    reads: int = 0
    files: int = 0
    rows: int = 0


class _LRU:
    """At most ``size`` entries (0: none); the least recently used goes first. Not locked: the
    ``LLMCache`` lock guards it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[Slot, Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, slot: Slot) -> bool:
        return slot in self._entries

    def get(self, slot: Slot) -> Entry | None:
        found = self._entries.get(slot)
        if found is not None:
            self._entries.move_to_end(slot)
        return found

    def put(self, slot: Slot, entry: Entry) -> None:
        if self.size <= 0:
            return
        self._entries[slot] = entry
        self._entries.move_to_end(slot)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)


class LLMCache:
    """Verdicts and completions read by key from a Delta table at ``uri`` (None: memory only) through
    an LRU of ``local_entries`` entries, reached with the ``storage`` settings."""

    def __init__(
        self,
        uri: str | None = None,
        storage: StorageSettings | None = None,
        local_entries: int = LLMCacheSettings().local_entries,
    ) -> None:
        self.uri = uri
        self.storage = storage
        self.writable = True  # False after a failed write: lookups still read the table
        self.counts = {VERDICT: CacheCounts(), COMPLETION: CacheCounts()}
        self.stored = StorageReads()
        self._memory = _LRU(local_entries)
        # Entries made here and not yet flushed: answered from here even once the LRU dropped them.
        self._pending: dict[Slot, tuple[Entry, dict[str, Any]]] = {}
        self._table: Any = None  # the deltalake handle, opened at the first lookup that needs it
        self._lock = threading.Lock()
        self._table_lock = threading.RLock()  # guards _table: a deltalake handle is not thread-safe

    @classmethod
    def open(
        cls,
        uri: str | None,
        storage: StorageSettings | None = None,
        local_entries: int = LLMCacheSettings().local_entries,
    ) -> LLMCache:
        """The cache of the table at ``uri`` (created by the first flush). Reads nothing: entries are
        read by key when first asked for."""
        return cls(uri, storage, local_entries)

    # ---- lookups ------------------------------------------------------------------------------
    def verdict(self, key: str) -> Verdict | None:
        return self.verdicts([key])[0]

    def verdicts(self, keys: Sequence[str]) -> list[Verdict | None]:
        """The verdict of each key (None where there is none), with one read of the table at most."""
        return self._lookup(VERDICT, keys)  # type: ignore[return-value]

    def completion(self, key: str) -> Completion | None:
        return self.completions([key])[0]

    def completions(self, keys: Sequence[str]) -> list[Completion | None]:
        """The completion of each key (None where there is none), with one read of the table at most."""
        return self._lookup(COMPLETION, keys)  # type: ignore[return-value]

    def _lookup(self, kind: str, keys: Sequence[str]) -> list[Entry | None]:
        found, missing = self._in_memory(kind, keys)
        if missing:
            stored = self._read_stored(kind, missing)
            with self._lock:
                for key, entry in stored.items():
                    self._memory.put((kind, key), entry)
            found.update(stored)
        answers = [found.get(key) for key in keys]
        with self._lock:
            counts = self.counts[kind]
            hits = sum(answer is not None for answer in answers)
            counts.hits += hits
            counts.misses += len(answers) - hits
        return answers

    def _in_memory(self, kind: str, keys: Iterable[str]) -> tuple[dict[str, Entry], list[str]]:
        """The entries of ``keys`` held here (LRU or not yet flushed), and the distinct others."""
        found: dict[str, Entry] = {}
        missing: list[str] = []
        with self._lock:
            for key in dict.fromkeys(keys):
                entry = self._memory.get((kind, key))
                if entry is None and (kind, key) in self._pending:
                    entry = self._pending[(kind, key)][0]
                if entry is None:
                    missing.append(key)
                else:
                    found[key] = entry
        return found, missing

    def _read_stored(self, kind: str, keys: list[str]) -> dict[str, Entry]:
        """The stored entries of ``keys``, reading only the partitions that can hold them."""
        import pyarrow.dataset as ds
        from deltalake.exceptions import DeltaError

        from lazygraph.errors import ConfigError, IndexFileError
        from lazygraph.tables.read import reading

        wanted = (ds.field("key").isin(keys)) & (ds.field("kind") == kind)
        try:
            opened = self._dataset_of(keys)
            if opened is None:
                return {}
            table, dataset = opened
            with reading(table):
                rows = dataset.to_table(columns=_STORED_COLUMNS, filter=wanted).to_pylist()
        except IndexFileError as exc:  # a cache is never worth failing a query for
            log.warning("%s; answering without the stored LLM cache, and not adding to it", exc)
            self.uri = None
            return {}
        # A storage error on one lookup (a transient S3 failure on the Delta log, say) costs that
        # lookup's hits only: the next lookup tries the table again.
        except (ConfigError, OSError, DeltaError) as exc:
            log.warning("LLM cache at %s not read this time (%s); answering without it", self.uri, exc)
            return {}
        with self._lock:
            self.stored.reads += 1
            self.stored.files += len(getattr(dataset, "files", []))
            self.stored.rows += len(rows)
        return _entries(rows)

    def _dataset_of(self, keys: list[str]) -> tuple[Any, Any] | None:
        """The table's handle and a dataset of the files that can hold ``keys`` (None: no table yet).
        The handle is shared by the process's threads: it is moved on and listed under a lock."""
        from lazygraph.tables import arrow_dataset
        from lazygraph.tables.read import reading

        with self._table_lock:
            table = self._latest_table()
            if table is None:
                return None
            partitioned = _partitioned(table)
            partitions = [(BUCKET, "in", sorted({bucket(k) for k in keys}))] if partitioned else None
            with reading(table):
                return table, arrow_dataset(table, self.storage, partitions)

    def _latest_table(self) -> Any | None:
        """The table's handle at its latest version (what other processes flushed included); the
        caller holds ``_table_lock``."""
        from lazygraph.tables import open_delta

        if self.uri is None:
            return None
        if self._table is None:
            self._table = open_delta(self.uri, settings=self.storage)
        else:
            self._table.update_incremental()
        return self._table

    # ---- stores -------------------------------------------------------------------------------
    def put_verdict(self, key: str, model: str, verdict: Verdict) -> None:
        row = _row(
            key,
            VERDICT,
            model,
            p_yes=verdict.p_yes,
            prompt_tokens=verdict.prompt_tokens,
            completion_tokens=1,
        )
        self._put((VERDICT, key), verdict, row)

    def put_completion(self, key: str, model: str, completion: Completion) -> None:
        row = _row(
            key,
            COMPLETION,
            model,
            text=completion.text,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
        )
        self._put((COMPLETION, key), completion, row)

    def _put(self, slot: Slot, entry: Entry, row: dict[str, Any]) -> None:
        with self._lock:
            if slot in self._memory or slot in self._pending:
                return
            self._memory.put(slot, entry)
            if self.uri is not None and self.writable:  # with nowhere to write, the LRU is the cache
                self._pending[slot] = (entry, row)

    # ---- persistence --------------------------------------------------------------------------
    def flush(self) -> int:
        """Append the entries added since the last flush in one Delta commit; returns how many."""
        with self._lock:
            pending, self._pending = self._pending, {}
        rows = [row for _, row in pending.values()]
        if not rows or self.uri is None or not self.writable:
            return 0
        try:
            written = self._append_retrying(rows)
        except Exception as exc:  # noqa: BLE001 - any storage failure: keep answering, stop persisting
            # Reads go on: a read-only location (query actors without write credentials) still
            # answers from what an earlier job stored.
            log.warning("LLM cache at %s cannot be written (%s); new entries stay in memory", self.uri, exc)
            self.writable = False
            return 0
        self._compact_if_fragmented(written)
        return len(rows)

    def _append_retrying(self, rows: list[dict[str, Any]]) -> Any:
        """``_append``, once more when it failed while another process created the table."""
        try:
            return self._append(rows)
        except Exception:
            with self._table_lock:
                created_elsewhere = self._table is None and self._latest_table() is not None
            if not created_elsewhere:
                raise
            return self._append(rows)

    def _append(self, rows: list[dict[str, Any]]) -> Any:
        """Append ``rows`` in the table's layout (partitioned unless an older table is not); returns
        the table's handle after the commit."""
        import pyarrow as pa
        from deltalake import write_deltalake

        from lazygraph.tables import storage_options
        from lazygraph.tables.schemas import LLM_CACHE

        with self._table_lock:
            table = self._latest_table()
            partitioned = table is None or _partitioned(table)
        data = pa.Table.from_pylist(rows, schema=LLM_CACHE.schema)
        write_deltalake(
            self.uri or "",
            data if partitioned else data.drop_columns([BUCKET]),
            mode="append",
            partition_by=[BUCKET] if partitioned else None,
            storage_options=storage_options(self.storage, self.uri),
        )
        with self._table_lock:
            return self._latest_table()

    def _compact_if_fragmented(self, table: Any) -> None:
        """Compact each partition holding more than ``_COMPACT_AFTER_FILES`` files (a table of older
        indexes: the table past four times as many). Another process compacting the same files at
        once makes one of them fail: the files stay as they are until a later flush."""
        if table is None:
            return
        try:
            with self._table_lock:
                self._compact(table)
        except Exception as exc:  # noqa: BLE001 - compaction only saves reads; the entries are written
            log.info("LLM cache at %s not compacted this time (%s)", self.uri, exc)

    @staticmethod
    def _compact(table: Any) -> None:
        if not _partitioned(table):
            if len(table.file_uris()) > 4 * _COMPACT_AFTER_FILES:
                table.optimize.compact()
            return
        # One compaction (one commit) over every fragmented partition: a commit per partition would
        # stall this flush and lengthen the log every other process replays.
        fragmented = _fragmented_buckets(table)
        if fragmented:
            table.optimize.compact(partition_filters=[(BUCKET, "in", fragmented)])

    def stats(self) -> dict[str, Any]:
        """Hits and misses per kind; ``entries``: held in memory; ``stored``: what lookups read from
        the table (reads, files, rows)."""
        with self._lock:
            return {
                kind: {"hits": c.hits, "misses": c.misses, "hit_rate": round(c.hit_rate, 4)}
                for kind, c in self.counts.items()
            } | {
                "entries": len(self._memory),
                "pending": len(self._pending),
                "stored": vars(self.stored).copy(),
            }


def bucket(key: str) -> str:
    """The partition of the table that holds ``key`` (a hex digest)."""
    return key[:_BUCKET_DIGITS]


def _partitioned(table: Any) -> bool:
    return BUCKET in table.metadata().partition_columns


def _fragmented_buckets(table: Any) -> list[str]:
    import pyarrow as pa
    import pyarrow.compute as pc

    files = pa.table(table.get_add_actions(flatten=True))  # deltalake answers with an arro3 table
    per_bucket = pc.value_counts(files.column(f"partition.{BUCKET}")).to_pylist()
    return sorted(c["values"] for c in per_bucket if c["counts"] > _COMPACT_AFTER_FILES)


def _entries(rows: list[dict[str, Any]]) -> dict[str, Entry]:
    """Stored rows as entries by key (a key written twice: its first row)."""
    entries: dict[str, Entry] = {}
    for row in rows:
        prompt_tokens, completion_tokens = row["prompt_tokens"] or 0, row["completion_tokens"] or 0
        if row["kind"] == VERDICT and row["p_yes"] is not None:
            entries.setdefault(row["key"], Verdict(float(row["p_yes"]), prompt_tokens))
        elif row["kind"] == COMPLETION and row["text"] is not None:
            entries.setdefault(row["key"], Completion(row["text"], prompt_tokens, completion_tokens))
    return entries


def _row(
    key: str,
    kind: str,
    model: str,
    *,
    p_yes: float | None = None,
    text: str | None = None,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
) -> dict:
    return {
        "key": key,
        "kind": kind,
        "model": model,
        "p_yes": p_yes,
        "text": text,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "created_at": datetime.now(UTC),
        BUCKET: bucket(key),
    }
