"""One actor owns the LLM engine (vLLM on a GPU); query actors reach it through an LLMClient adapter.

Loading a vLLM engine per query actor would put one copy of the model on the GPU per actor. Instead
one ``LLMActor`` holds the engine, and each query actor installs a ``RemoteRelevanceClient`` for
the relevance role (and the synthesis role when it names the same model), so the query engine
talks to an ordinary LLMClient and does not know the model is elsewhere.

The actor runs several requests at once (``max_concurrency``) but the engine sees them merged:
relevance prompts that arrive while the engine is busy are gathered into the next single batch
(``BatchCoalescer``), which is what vLLM schedules well.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lazygraph.errors import LazyGraphError
from lazygraph.llm.base import ChatResult, LLMClient, Message, relevance_messages
from lazygraph.llm.prompts import Prompt, load_prompt
from lazygraph.settings import Settings

Scored = tuple[float, int, float]  # (P(yes), prompt tokens, seconds), as LLMClient._relevance returns


@dataclass
class _Request:
    items: list[Any]
    results: list[Any] | None = None
    error: BaseException | None = None
    done: bool = field(default=False)


class BatchCoalescer:
    """Merges concurrent ``submit`` calls into as few ``run`` calls as possible, one at a time.

    A caller queues its items, then waits for the engine lock. Whoever gets the lock runs every
    request queued so far in one batch and hands each caller its share; callers whose request was
    served by someone else's batch return at once.
    """

    def __init__(self, run: Callable[[list[Any]], list[Any]], max_batch_items: int = 4096) -> None:
        self._run = run
        self._max_batch_items = max_batch_items
        self._queue: list[_Request] = []
        self._queue_lock = threading.Lock()
        self.engine_lock = threading.Lock()
        self.batch_sizes: list[int] = []

    def submit(self, items: Sequence[Any]) -> list[Any]:
        request = _Request(list(items))
        with self._queue_lock:
            self._queue.append(request)
        while not request.done:
            with self.engine_lock:
                if not request.done:
                    self._run_queued()
        if request.error is not None:
            raise request.error
        assert request.results is not None
        return request.results

    def _take_queued(self) -> list[_Request]:
        with self._queue_lock:
            taken, size = [], 0
            while self._queue and (not taken or size + len(self._queue[0].items) <= self._max_batch_items):
                request = self._queue.pop(0)
                taken.append(request)
                size += len(request.items)
            return taken

    def _run_queued(self) -> None:
        taken = self._take_queued()
        flat = [item for request in taken for item in request.items]
        try:
            results = self._run(flat) if flat else []
            error = None
        except BaseException as exc:  # handed to every caller of this batch
            results, error = [], exc
        self.batch_sizes.append(len(flat))
        start = 0
        for request in taken:
            if error is None:
                request.results = results[start : start + len(request.items)]
                start += len(request.items)
            request.error = error
            request.done = True


class LLMActor:
    """Ray actor body: one LLM client (by default the relevance role built from settings)."""

    def __init__(self, settings: Settings, client_factory: Callable[[], LLMClient] | None = None) -> None:
        self.error: LazyGraphError | None = None
        try:
            if client_factory is None:
                from lazygraph.llm.factory import make_client

                self.client = make_client("relevance", settings.llm.relevance, settings)
            else:
                self.client = client_factory()
        except LazyGraphError as exc:  # reported by ready(), so the driver shows the real message
            self.error = exc
            return
        except Exception as exc:
            self.error = LazyGraphError(
                f"the LLM actor could not load its model: {type(exc).__name__}: {exc}"
            )
            return
        # The adapter in the query actor records the accounting, so the raw scores are returned.
        self.coalescer = BatchCoalescer(self.client._relevance)
        self.prompt = load_prompt("relevance")

    def ready(self) -> LazyGraphError | None:
        return self.error

    def relevance(self, question: str, passages: Sequence[str]) -> list[Scored]:
        """(P(yes), prompt tokens, seconds) per passage, with the standard relevance prompt."""
        return self.score(relevance_messages(self.prompt, question, passages))

    def score(self, messages_per_passage: Sequence[Sequence[Message]]) -> list[Scored]:
        return self.coalescer.submit(messages_per_passage)

    def chat_batch(
        self,
        batch: Sequence[Sequence[Message]],
        max_tokens: int,
        temperature: float,
        json_schema: dict | None,
    ) -> list[ChatResult]:
        with self.coalescer.engine_lock:  # the engine runs one batch at a time
            return self.client.chat_batch(
                batch, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema
            )

    def batch_sizes(self) -> list[int]:
        return list(self.coalescer.batch_sizes)


class RemoteRelevanceClient(LLMClient):
    """An LLMClient whose calls run in an ``LLMActor``; accounting stays in this process's ledgers."""

    def __init__(self, role: str, handle: Any, get: Callable[[Any], Any] | None = None) -> None:
        super().__init__(role)
        self.handle = handle
        if get is None:
            import ray

            get = ray.get
        self._get = get

    def relevance(self, question: str, passages: Sequence[str], prompt: Prompt | None = None) -> list[float]:
        if prompt is not None:  # a custom prompt is rendered here and sent whole
            return super().relevance(question, passages, prompt)
        if not passages:
            return []
        # Only the question and passages travel; the actor renders the standard prompt.
        scored = self._get(self.handle.relevance.remote(question, list(passages)))
        self._record_scored(scored)
        return [p for p, _, _ in scored]

    def _relevance(self, messages_per_passage: Sequence[Sequence[Message]]) -> list[Scored]:
        return self._get(self.handle.score.remote([list(m) for m in messages_per_passage]))

    def _record_scored(self, scored: Sequence[Scored]) -> None:
        for _, prompt_tokens, seconds in scored:
            self._record("relevance", prompt_tokens, 1, seconds)

    def _chat(
        self, messages: Sequence[Message], *, max_tokens: int, temperature: float, json_schema: dict | None
    ) -> ChatResult:
        return self._remote_chat([messages], max_tokens, temperature, json_schema)[0]

    def chat_batch(
        self,
        batch: Sequence[Sequence[Message]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict | None = None,
    ) -> list[ChatResult]:
        results = self._remote_chat(batch, max_tokens, temperature, json_schema)
        for r in results:
            self._record("chat", r.prompt_tokens, r.completion_tokens, r.seconds)
        return results

    def _remote_chat(
        self,
        batch: Sequence[Sequence[Message]],
        max_tokens: int,
        temperature: float,
        json_schema: dict | None,
    ) -> list[ChatResult]:
        batch = [list(m) for m in batch]
        return self._get(self.handle.chat_batch.remote(batch, max_tokens, temperature, json_schema))


def uses_shared_llm_actor(settings: Settings) -> bool:
    """True when batch serving should host the relevance model in one GPU actor."""
    return settings.llm.relevance.backend == "vllm" and settings.ray.shared_relevance_actor


def install_remote_clients(settings: Settings, handle: Any) -> list[str]:
    """Route this process's relevance role (and synthesis, when it is the same model) to the actor."""
    from lazygraph.llm.factory import install_client

    roles = ["relevance"]
    if settings.llm.synthesis == settings.llm.relevance:
        roles.append("synthesis")
    for role in roles:  # one client per role, so cost records keep the roles apart
        install_client(role, RemoteRelevanceClient(role, handle))
    return roles
