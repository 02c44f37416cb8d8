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

Entries live in memory for the life of the process and are appended to the Delta table
``llm_cache`` (``tables.schemas.LLM_CACHE``) by ``flush``: the engine flushes after every query, so a
killed job loses at most one query's entries. Several processes may append at once (Delta appends do
not conflict); a key written twice is read once. A location that cannot be written (a read-only
index) turns persistence off with one warning; the in-memory cache keeps working.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from lazygraph.settings import StorageSettings

log = logging.getLogger(__name__)

VERDICT = "verdict"
COMPLETION = "completion"
# Appends leave one small file per flush; past this many files the table is compacted.
_COMPACT_AFTER_FILES = 64


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


@dataclass
class LLMCache:
    """Verdicts and completions in memory, persisted to a Delta table at ``uri`` (None: memory only),
    reached with the ``storage`` settings."""

    uri: str | None = None
    storage: StorageSettings | None = None
    _verdicts: dict[str, Verdict] = field(default_factory=dict)
    _completions: dict[str, Completion] = field(default_factory=dict)
    _pending: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, CacheCounts] = field(
        default_factory=lambda: {VERDICT: CacheCounts(), COMPLETION: CacheCounts()}
    )
    loaded: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(cls, uri: str | None, storage: StorageSettings | None = None) -> LLMCache:
        """The cache with every entry already stored at ``uri`` (none when the table does not exist)."""
        cache = cls(uri, storage)
        if uri is not None:
            cache._load()
        return cache

    def _load(self) -> None:
        from lazygraph.errors import IndexFileError
        from lazygraph.tables import open_delta
        from lazygraph.tables.read import read_table

        table = open_delta(self.uri or "", settings=self.storage)
        if table is None:
            return
        columns = ["key", "kind", "p_yes", "text", "prompt_tokens", "completion_tokens"]
        try:
            rows = read_table(table, self.storage, columns=columns).to_pylist()
        except IndexFileError as exc:  # a cache is never worth failing a query for
            log.warning("%s; answering without the stored LLM cache, and not adding to it", exc)
            self.uri = None
            return
        for row in rows:
            prompt_tokens, completion_tokens = row["prompt_tokens"] or 0, row["completion_tokens"] or 0
            if row["kind"] == VERDICT and row["p_yes"] is not None:
                self._verdicts.setdefault(row["key"], Verdict(float(row["p_yes"]), prompt_tokens))
            elif row["kind"] == COMPLETION and row["text"] is not None:
                self._completions.setdefault(
                    row["key"], Completion(row["text"], prompt_tokens, completion_tokens)
                )
        self.loaded = len(self._verdicts) + len(self._completions)

    # ---- lookups and stores -------------------------------------------------------------------
    def verdict(self, key: str) -> Verdict | None:
        with self._lock:
            found = self._verdicts.get(key)
            counts = self.counts[VERDICT]
            if found is None:
                counts.misses += 1
            else:
                counts.hits += 1
            return found

    def completion(self, key: str) -> Completion | None:
        with self._lock:
            found = self._completions.get(key)
            counts = self.counts[COMPLETION]
            if found is None:
                counts.misses += 1
            else:
                counts.hits += 1
            return found

    def put_verdict(self, key: str, model: str, verdict: Verdict) -> None:
        with self._lock:
            if key not in self._verdicts:
                self._verdicts[key] = verdict
                self._pending.append(
                    _row(
                        key,
                        VERDICT,
                        model,
                        p_yes=verdict.p_yes,
                        prompt_tokens=verdict.prompt_tokens,
                        completion_tokens=1,
                    )
                )

    def put_completion(self, key: str, model: str, completion: Completion) -> None:
        with self._lock:
            if key not in self._completions:
                self._completions[key] = completion
                self._pending.append(
                    _row(
                        key,
                        COMPLETION,
                        model,
                        text=completion.text,
                        prompt_tokens=completion.prompt_tokens,
                        completion_tokens=completion.completion_tokens,
                    )
                )

    # ---- persistence --------------------------------------------------------------------------
    def flush(self) -> int:
        """Append the entries added since the last flush in one Delta commit; returns how many."""
        with self._lock:
            rows, self._pending = self._pending, []
        if not rows or self.uri is None:
            return 0
        import pyarrow as pa
        from deltalake import write_deltalake

        from lazygraph.tables import storage_options
        from lazygraph.tables.schemas import LLM_CACHE

        try:
            write_deltalake(
                self.uri,
                pa.Table.from_pylist(rows, schema=LLM_CACHE.schema),
                mode="append",
                storage_options=storage_options(self.storage, self.uri),
            )
            self._compact_if_fragmented()
        except Exception as exc:  # noqa: BLE001 - any storage failure: keep answering, stop persisting
            log.warning("LLM cache at %s cannot be written (%s); it stays in memory only", self.uri, exc)
            self.uri = None
            return 0
        return len(rows)

    def _compact_if_fragmented(self) -> None:
        from lazygraph.tables import open_delta

        table = open_delta(self.uri or "", settings=self.storage)
        if table is not None and len(table.file_uris()) > _COMPACT_AFTER_FILES:
            table.optimize.compact()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                kind: {"hits": c.hits, "misses": c.misses, "hit_rate": round(c.hit_rate, 4)}
                for kind, c in self.counts.items()
            } | {"entries": len(self._verdicts) + len(self._completions), "loaded": self.loaded}


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
    }
