"""One actor owns the LLM engine (vLLM on a GPU); query actors reach it through an LLMClient adapter.

Loading a vLLM engine per query actor would put one copy of the model on the GPU per actor. Instead
one ``LLMActor`` holds the engine, and each query actor passes its query engine roles whose clients
forward to it (``lazygraph.llm.remote``), so the query engine does not know the model is elsewhere.

The actor runs several requests at once (``max_concurrency``) but the engine sees them merged:
relevance prompts that arrive while the engine is busy are gathered into the next single batch
(``lazygraph.llm.coalesce``), which is what vLLM schedules well.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lazygraph.errors import LazyGraphError
from lazygraph.llm.base import ChatResult, Conversations, LLMClient, Message, Scored, relevance_messages
from lazygraph.llm.coalesce import BatchCoalescer
from lazygraph.llm.prompts import load_prompt
from lazygraph.settings import Settings


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
        # Each test's cost goes back with its score: the query actor's client records it per query.
        self.coalescer = BatchCoalescer(self.client.score)
        self.prompt = load_prompt("relevance", settings.query.prompts.relevance)

    def ready(self) -> LazyGraphError | None:
        return self.error

    def where(self) -> dict:
        """The Ray node id and process id of this actor."""
        from lazygraph.serve.worker import placement

        return placement()

    def relevance(self, question: str, passages: Sequence[str]) -> list[Scored]:
        """(P(yes), prompt tokens, seconds) per passage, with the standard relevance prompt."""
        return self.score(relevance_messages(self.prompt, question, passages))

    def score(self, messages_per_passage: Sequence[Sequence[Message]]) -> list[Scored]:
        return self.coalescer.submit(messages_per_passage)

    def chat_batch(
        self, batch: Conversations, max_tokens: int, temperature: float, json_schema: dict | None
    ) -> list[ChatResult]:
        with self.coalescer.engine_lock:  # the engine runs one batch at a time
            return self.client.chat_batch(
                batch, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema
            )

    def batch_sizes(self) -> list[int]:
        return list(self.coalescer.batch_sizes)


def uses_shared_llm_actor(settings: Settings) -> bool:
    """True when batch serving should host the relevance model in one GPU actor."""
    return settings.llm.relevance.backend == "vllm" and settings.ray.shared_relevance_actor
