"""Any OpenAI-compatible server: `vllm serve`, llama.cpp's `llama-server`, or a hosted API.

Concurrency is bounded by a thread pool of ``max_concurrency`` workers; the `openai` client
does the retries with exponential backoff (``max_retries``) and the timeout. Structured output
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
    def __init__(self, role: str, cfg: LLMBackendSettings, client: Any | None = None) -> None:
        super().__init__(role)
        if client is None:
            if not cfg.base_url:
                raise ConfigError(
                    f"llm.{role}.base_url is required for the openai backend, e.g. http://localhost:8000/v1"
                )
            import openai

            client = openai.OpenAI(
                base_url=cfg.base_url,
                api_key=cfg.api_key.get_secret_value(),
                timeout=cfg.timeout_s,
                max_retries=cfg.max_retries,
            )
        self.client = client
        self.cfg = cfg
        self.pool = ThreadPoolExecutor(max_workers=cfg.max_concurrency, thread_name_prefix=f"llm-{role}")

    def _create(self, **kwargs: Any) -> Any:
        try:
            return self.client.chat.completions.create(model=self.cfg.model, **kwargs)
        except Exception as exc:  # the openai package raises many types; keep its message
            raise LLMError(
                f"{self.cfg.base_url} failed after {self.cfg.max_retries} retries: {exc}. "
                "Check that the server is up and serves model " + repr(self.cfg.model)
            ) from exc

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
        futures = [
            self.pool.submit(
                self._chat, m, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema
            )
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
        return list(self.pool.map(self._one_relevance, messages_per_passage))
