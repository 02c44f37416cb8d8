"""The one LLM interface every backend implements, and the accounting the query engine aggregates.

Callers see four things:
- ``chat``: a chat completion, optionally constrained to a JSON schema;
- ``chat_batch``: many chat completions at once (backends batch or run them concurrently);
- ``relevance``: for one question and many passages, P(yes) read from the log-probabilities
  of the first answer token — not from the generated word, which separates far worse
  (``score`` does the same for prompts already rendered);
- ``usage``: a ledger of every call (prompt and completion tokens, latency).

With a ``cache`` (``llm/cache.py``), relevance verdicts and temperature-0 completions already known
are answered from it, without a model call; the ledgers count them as cache hits, not as calls.

Backends implement only hooks (``_chat``, ``_chat_batch``, ``_relevance``, ``_question_relevance``)
and never record usage: ``LLMClient`` records every result its public methods return, in one place,
so the per-query ledgers count the same way whatever the backend.
"""

from __future__ import annotations

import contextvars
import json
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from lazygraph.errors import LLMError
from lazygraph.llm.cache import Completion, LLMCache, Verdict, completion_key, prompt_id, verdict_key
from lazygraph.llm.prompts import Prompt, load_prompt, quote_passage
from lazygraph.llm.resilience import current_deadline
from lazygraph.settings import PromptVersions

Message = dict[str, str]
Conversations = Sequence[Sequence[Message]]  # a batch: one message list per completion or test


class Scored(NamedTuple):
    """One relevance test: P(yes), and what it cost (a relevance test generates one token)."""

    p_yes: float
    prompt_tokens: int
    seconds: float


@dataclass(frozen=True)
class LLMCall:
    """One call's accounting."""

    role: str
    kind: str  # "chat" or "relevance"; "chat_cached" or "relevance_cached" for a cache hit
    prompt_tokens: int
    completion_tokens: int
    seconds: float


@dataclass
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cached: bool = False  # answered from the LLM cache: no model call, no tokens

    def json(self) -> Any:
        """Parse the text as JSON; tolerate a fenced block or prose around one object/array."""
        return parse_json_text(self.text)


@dataclass
class UsageLedger:
    """Thread-safe list of calls; a query takes a fresh ledger so its cost record is its own."""

    calls: list[LLMCall] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, call: LLMCall) -> None:
        with self._lock:
            self.calls.append(call)

    def summary(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        with self._lock:
            for c in self.calls:
                row = out.setdefault(
                    c.role,
                    {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
                    | {"cache_hits": 0, "cached_tokens": 0, "relevance_calls": 0},
                )
                if c.kind.endswith("_cached"):  # no model call: its tokens are what the call once cost
                    row["cache_hits"] += 1
                    row["cached_tokens"] += c.prompt_tokens + c.completion_tokens
                    continue
                row["calls"] += 1
                row["relevance_calls"] += c.kind == "relevance"  # model calls spent on relevance tests
                row["prompt_tokens"] += c.prompt_tokens
                row["completion_tokens"] += c.completion_tokens
                row["seconds"] += c.seconds
        return out

    def totals(self) -> dict[str, float]:
        rows = self.summary().values()
        return {
            "llm_calls": sum(r["calls"] for r in rows),
            "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
            "completion_tokens": sum(r["completion_tokens"] for r in rows),
            "seconds": sum(r["seconds"] for r in rows),
        }


# The query ledgers open in this context, each with the client it counts (by id): a context, not the
# client, holds them, so that queries sharing a client in several threads each count their own calls.
_QUERY_LEDGERS: contextvars.ContextVar[tuple[tuple[int, UsageLedger], ...]] = contextvars.ContextVar(
    "lazygraph_query_ledgers", default=()
)


class LLMClient(ABC):
    """Base of all backends. ``role`` names the client in cost records (e.g. "relevance")."""

    # The relevance prompt used when a caller passes none; ``make_client`` pins it from the settings.
    relevance_prompt_version: int = PromptVersions().relevance
    # What cache keys name the model by (``make_client`` sets backend and model); the cache, if any.
    model_id: str = ""
    cache: LLMCache | None = None

    def __init__(self, role: str) -> None:
        self.role = role
        self._usage = UsageLedger()

    # ---- accounting -------------------------------------------------------------------------
    @property
    def usage(self) -> UsageLedger:
        """The process-lifetime ledger."""
        return self._usage

    @contextmanager
    def ledger(self) -> Iterator[UsageLedger]:
        """Also record the calls made inside the ``with`` block, in this thread (or a thread run with
        a copy of its context), into a fresh ledger: one per query. Queries answered at once in
        other threads (a query actor with ``ray.queries_per_actor`` above 1) do not count here."""
        extra = UsageLedger()
        token = _QUERY_LEDGERS.set((*_QUERY_LEDGERS.get(), (id(self), extra)))
        try:
            yield extra
        finally:
            _QUERY_LEDGERS.reset(token)

    def _record(self, kind: str, prompt_tokens: int, completion_tokens: int, seconds: float) -> None:
        call = LLMCall(self.role, kind, prompt_tokens, completion_tokens, seconds)
        self._usage.record(call)
        for owner, ledger in _QUERY_LEDGERS.get():
            if owner == id(self):
                ledger.record(call)

    def _record_chats(self, results: Sequence[ChatResult]) -> None:
        for r in results:
            self._record("chat", r.prompt_tokens, r.completion_tokens, r.seconds)

    def _record_scored(self, scored: list[Scored]) -> list[Scored]:
        for _, prompt_tokens, seconds in scored:
            self._record("relevance", prompt_tokens, 1, seconds)
        return scored

    # ---- the interface: what callers use; every result is recorded here --------------------
    def chat(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict | None = None,
    ) -> ChatResult:
        """One completion, through the batch path so a backend's batching hook serves both."""
        batch = self.chat_batch(
            [messages], max_tokens=max_tokens, temperature=temperature, json_schema=json_schema
        )
        return batch[0]

    def chat_batch(
        self,
        batch: Conversations,
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict | None = None,
    ) -> list[ChatResult]:
        """Completions in input order; each is recorded here, once, whichever hook produced it.

        At temperature 0 the cache answers what it knows; only the rest reaches the backend.
        """
        cache = self.cache if temperature == 0 else None
        if cache is None:
            check_deadline()
            fresh = self._chat_batch(
                batch, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema
            )
            self._record_chats(fresh)
            return fresh
        keys = [completion_key(self.model_id, m, max_tokens, json_schema) for m in batch]
        known = cache.completions(keys)
        todo = [i for i, hit in enumerate(known) if hit is None]
        if todo:
            check_deadline()
        fresh = (
            self._chat_batch(
                [batch[i] for i in todo],
                max_tokens=max_tokens,
                temperature=temperature,
                json_schema=json_schema,
            )
            if todo
            else []
        )
        self._record_chats(fresh)
        results: dict[int, ChatResult] = dict(zip(todo, fresh, strict=True))
        for i, result in results.items():
            cache.put_completion(
                keys[i],
                self.model_id,
                Completion(result.text, result.prompt_tokens, result.completion_tokens),
            )
        for i, hit in enumerate(known):
            if hit is not None:
                self._record("chat_cached", hit.prompt_tokens, hit.completion_tokens, 0.0)
                results[i] = ChatResult(hit.text, 0, 0, 0.0, cached=True)
        return [results[i] for i in range(len(batch))]

    def relevance(self, question: str, passages: Sequence[str], prompt: Prompt | None = None) -> list[float]:
        """P(relevant) per passage, as one batch (the ``relevance`` prompt file unless one is given).

        With a cache, only the passages it has no verdict for (for this question, model and prompt
        version) reach the backend."""
        if not passages:
            return []
        cache = self.cache
        if cache is None:
            check_deadline()
            fresh = self._record_scored(self._question_relevance(question, passages, prompt))
            return [p for p, _, _ in fresh]
        used = prompt or load_prompt("relevance", self.relevance_prompt_version)
        prompt_key = prompt_id(used.task, used.version, used.system, used.user)
        keys = [verdict_key(self.model_id, prompt_key, question, p) for p in passages]
        known = cache.verdicts(keys)
        todo = [i for i, hit in enumerate(known) if hit is None]
        if todo:
            check_deadline()
        fresh = self._question_relevance(question, [passages[i] for i in todo], prompt) if todo else []
        scores: dict[int, float] = {}
        for i, (p_yes, prompt_tokens, _) in zip(todo, self._record_scored(fresh), strict=True):
            scores[i] = p_yes
            cache.put_verdict(keys[i], self.model_id, Verdict(p_yes, prompt_tokens))
        for i, hit in enumerate(known):
            if hit is not None:
                self._record("relevance_cached", hit.prompt_tokens, 1, 0.0)
                scores[i] = hit.p_yes
        return [float(scores[i]) for i in range(len(passages))]

    def score(self, messages_per_passage: Sequence[Sequence[Message]]) -> list[Scored]:
        """Relevance tests over prompts already rendered, with what each cost.

        For a host that runs the tests for clients in other processes (the LLM actor): they record
        the returned costs in their own ledgers, so a query's cost record stays its own.
        """
        return self._record_scored(self._relevance(messages_per_passage))

    # ---- the hooks backends implement; they never record usage ------------------------------
    @abstractmethod
    def _chat(
        self, messages: Sequence[Message], *, max_tokens: int, temperature: float, json_schema: dict | None
    ) -> ChatResult: ...

    def _chat_batch(
        self, batch: Conversations, *, max_tokens: int, temperature: float, json_schema: dict | None
    ) -> list[ChatResult]:
        """Default: one after the other. Server and GPU backends override this to batch."""
        return [
            self._chat(m, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema)
            for m in batch
        ]

    @abstractmethod
    def _relevance(self, messages_per_passage: Sequence[Sequence[Message]]) -> list[Scored]:
        """Return (p_yes, prompt_tokens, seconds) for each prompt."""

    def _question_relevance(
        self, question: str, passages: Sequence[str], prompt: Prompt | None
    ) -> list[Scored]:
        """Render one prompt per passage and test them; a backend that renders elsewhere overrides this."""
        return self._relevance(
            relevance_messages(
                prompt or load_prompt("relevance", self.relevance_prompt_version), question, passages
            )
        )


class BatchingLLMClient(LLMClient):
    """Base of backends whose engine takes whole batches: a single chat is a batch of one."""

    def _chat(
        self, messages: Sequence[Message], *, max_tokens: int, temperature: float, json_schema: dict | None
    ) -> ChatResult:
        batch = self._chat_batch(
            [messages], max_tokens=max_tokens, temperature=temperature, json_schema=json_schema
        )
        return batch[0]

    @abstractmethod
    def _chat_batch(
        self, batch: Conversations, *, max_tokens: int, temperature: float, json_schema: dict | None
    ) -> list[ChatResult]: ...


def check_deadline() -> None:
    """Refuse to start model work once the query's active time (``query.timeout_s``) is used up."""
    deadline = current_deadline()
    if deadline is not None:
        deadline.check()


def relevance_messages(prompt: Prompt, question: str, passages: Sequence[str]) -> list[list[Message]]:
    """One relevance prompt per passage; each passage is quoted, so its text cannot leave its tags."""
    return [prompt.messages(question=question, passage=quote_passage(p)) for p in passages]


def p_yes_from_logprobs(top: dict[str, float]) -> float:
    """P(yes) / (P(yes) + P(no)) from a token -> logprob map of the first generated token."""
    yes = sum(math.exp(lp) for tok, lp in top.items() if tok.strip().lower() == "yes")
    no = sum(math.exp(lp) for tok, lp in top.items() if tok.strip().lower() == "no")
    if yes + no == 0.0:
        return 0.0
    return yes / (yes + no)


def parse_json_text(text: str) -> Any:
    """JSON from model output, tolerating ```json fences or a sentence before the object."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`")
        stripped = stripped[stripped.find("\n") + 1 :] if "\n" in stripped else stripped
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = stripped.find(opener), stripped.rfind(closer)
        if 0 <= start < end:
            try:
                return json.loads(stripped[start : end + 1])
            except json.JSONDecodeError:
                continue
    raise LLMError(
        f"the model did not return valid JSON: {text[:200]!r}; if the reply was cut off, raise the "
        "role's max_tokens, or use a model or server that supports structured output"
    )


class Stopwatch:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start
