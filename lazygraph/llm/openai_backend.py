"""Any OpenAI-compatible server: `vllm serve`, llama.cpp's `llama-server`, or a hosted API.

Concurrency is bounded by a thread pool of ``max_concurrency`` workers. Every request has a timeout,
is retried with exponential backoff and jitter, and waits while the server's circuit breaker is open
(``lazygraph.llm.resilience``): a server that goes down mid-batch pauses the batch. Structured output
differs between servers, so ``json_dialect`` picks the request shape:
- ``json_schema``: ``response_format={"type": "json_schema", ...}`` (OpenAI, vLLM >= 0.6);
- ``json_object_schema``: ``response_format={"type": "json_object", "schema": ...}`` (llama.cpp server);
- ``guided_json``: vLLM's ``extra_body={"guided_json": ...}`` (older vLLM).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lazygraph.errors import ConfigError, LLMError
from lazygraph.llm.base import (
    ChatResult,
    Conversations,
    LLMClient,
    Message,
    Scored,
    Stopwatch,
    p_yes_from_logprobs,
)
from lazygraph.llm.resilience import (
    Backoff,
    CallOutcome,
    CircuitBreaker,
    breaker_for,
    in_context,
    is_transient,
    resilient_call,
)
from lazygraph.settings import LLMBackendSettings


def structured_output_kwargs(dialect: str, schema: dict) -> dict[str, Any]:
    if dialect == "json_schema":
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "lazygraph_output", "schema": schema, "strict": True},
            }
        }
    if dialect == "json_object_schema":
        return {"response_format": {"type": "json_object", "schema": schema}}
    if dialect == "guided_json":
        return {"extra_body": {"guided_json": schema}}
    raise ConfigError(
        f"unknown json_dialect {dialect!r}; set it to json_schema, json_object_schema or guided_json"
    )


class OpenAICompatibleClient(LLMClient):
    def __init__(
        self,
        role: str,
        cfg: LLMBackendSettings,
        client: Any | None = None,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        super().__init__(role)
        if client is None:
            if not cfg.base_url:
                raise ConfigError(
                    f"llm.{role}.base_url is required for the openai backend, e.g. http://localhost:8000/v1"
                )
            import openai

            # Retries are lazygraph's own (``resilience``): the SDK's would not see the breaker.
            client = openai.OpenAI(
                base_url=cfg.base_url,
                api_key=cfg.api_key.get_secret_value(),
                timeout=cfg.timeout_s,
                max_retries=0,
            )
        self.client = client
        self.cfg = cfg
        self.breaker = breaker or breaker_for(cfg.base_url or "", cfg, self._health_probe())
        self.backoff = Backoff(cfg.retry_base_s, cfg.retry_max_s)
        self.pool = ThreadPoolExecutor(max_workers=cfg.max_concurrency, thread_name_prefix=f"llm-{role}")

    def _health_probe(self) -> Any:
        """What tells the breaker the server is back: its model list (every OpenAI-compatible server
        has one; vLLM and llama.cpp's server answer it), asked past the breaker."""
        models = getattr(self.client, "models", None)
        if models is None or not hasattr(models, "list"):
            return None
        return lambda timeout: models.list(timeout=timeout)

    def _create(self, **kwargs: Any) -> Any:
        """One request, with the per-call timeout, retries and the server's circuit breaker."""
        return resilient_call(
            lambda timeout: self.client.chat.completions.create(
                model=self.cfg.model, timeout=timeout, **kwargs
            ),
            breaker=self.breaker,
            timeout_s=self.cfg.timeout_s,
            max_retries=self.cfg.max_retries,
            backoff=self.backoff,
            describe=self._failure,
        )

    def _failure(self, exc: BaseException, outcome: CallOutcome) -> LLMError:
        """The openai package raises many types; keep its message, say how many requests were sent."""
        sent = f"{outcome.requests} request{'s' if outcome.requests != 1 else ''}"
        if not is_transient(exc):
            return LLMError(
                f"{self.cfg.base_url} refused the request ({sent}, not retried): {exc}. Check llm.{self.role}"
                f".model ({self.cfg.model!r}), api_key and the server's limits"
            )
        return LLMError(
            f"{self.cfg.base_url} failed after {sent} ({outcome.retries} retries): {exc}. "
            "Check that the server is up and serves model " + repr(self.cfg.model)
        )

    def _chat(
        self, messages: Sequence[Message], *, max_tokens: int, temperature: float, json_schema: dict | None
    ) -> ChatResult:
        extra = structured_output_kwargs(self.cfg.json_dialect, json_schema) if json_schema else {}
        watch = Stopwatch()
        out = self._create(
            messages=list(messages),
            max_tokens=max_tokens,
            temperature=temperature,
            seed=self.cfg.seed,
            **extra,
        )
        usage = getattr(out, "usage", None)
        return ChatResult(
            text=out.choices[0].message.content or "",
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            seconds=watch.seconds,
        )

    def _chat_batch(
        self, batch: Conversations, *, max_tokens: int, temperature: float, json_schema: dict | None
    ) -> list[ChatResult]:
        """Up to ``max_concurrency`` requests in flight, which the server batches; results in order."""
        chat = in_context(self._chat)  # pool threads keep the query's deadline
        futures = [
            self.pool.submit(chat, m, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema)
            for m in batch
        ]
        return [f.result() for f in futures]

    def _one_relevance(self, messages: Sequence[Message]) -> Scored:
        watch = Stopwatch()
        out = self._create(
            messages=list(messages), max_tokens=1, temperature=0.0, logprobs=True, top_logprobs=10
        )
        content = out.choices[0].logprobs.content if out.choices[0].logprobs else None
        if not content:
            raise LLMError(
                f"{self.cfg.base_url} returned no log-probabilities; relevance tests need a server that "
                "supports logprobs/top_logprobs (vLLM and llama.cpp's server do)"
            )
        top = {t.token: t.logprob for t in content[0].top_logprobs}
        usage = getattr(out, "usage", None)
        return Scored(p_yes_from_logprobs(top), int(getattr(usage, "prompt_tokens", 0) or 0), watch.seconds)

    def _relevance(self, messages_per_passage: Sequence[Sequence[Message]]) -> list[Scored]:
        return list(self.pool.map(in_context(self._one_relevance), messages_per_passage))
