"""GPU backend: the vLLM offline engine (``vllm.LLM``), imported only when used.

Whole batches go to ``LLM.chat`` in one call, which is where a GPU earns its keep: vLLM
schedules them together with prefix caching, so many relevance tests sharing a question
cost little more than one. Inside Ray, one GPU actor owns the engine (see lazygraph.serve).
The offline engine is not safe to call from several threads at once, so a client answering queries in
threads (``ray.queries_per_actor``) sends them to it one batch at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from lazygraph.errors import SetupError
from lazygraph.llm.base import (
    BatchingLLMClient,
    ChatResult,
    Conversations,
    Message,
    Scored,
    Stopwatch,
    p_yes_from_logprobs,
)
from lazygraph.settings import LLMBackendSettings


def _load_engine(cfg: LLMBackendSettings) -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise SetupError(
            "the vllm backend needs the vllm package on a GPU host: `pip install 'lazygraph[gpu]'`"
        ) from exc
    return vllm.LLM(
        model=str(cfg.model_path or cfg.model),
        gpu_memory_utilization=cfg.gpu_memory_utilization,
        tensor_parallel_size=cfg.tensor_parallel_size,
        max_model_len=cfg.n_ctx,
        enable_prefix_caching=True,
        seed=cfg.seed,
    )


def _sampling_params(**kwargs: Any) -> Any:
    from vllm import SamplingParams

    return SamplingParams(**kwargs)


def _structured(schema: dict) -> dict[str, Any]:
    """The structured-output argument of SamplingParams; its name changed across vLLM releases."""
    try:
        from vllm.sampling_params import StructuredOutputsParams

        return {"structured_outputs": StructuredOutputsParams(json=schema)}
    except ImportError:
        from vllm.sampling_params import GuidedDecodingParams

        return {"guided_decoding": GuidedDecodingParams(json=schema)}


class VLLMClient(BatchingLLMClient):
    def __init__(
        self,
        role: str,
        cfg: LLMBackendSettings,
        engine: Any | None = None,
        sampling_params: Any | None = None,
        structured: Any | None = None,
    ) -> None:
        super().__init__(role)
        self.cfg = cfg
        self.engine = engine if engine is not None else _load_engine(cfg)
        self._engine_lock = threading.Lock()
        # Injection points so the logic is testable with a stand-in engine where vllm is absent.
        self._sampling_params = sampling_params or _sampling_params
        self._structured = structured or _structured

    def _generate(self, batch: Sequence[Sequence[Message]], params: Any) -> list[Any]:
        with self._engine_lock:
            return self.engine.chat([list(m) for m in batch], params, use_tqdm=False)

    def _chat_batch(
        self, batch: Conversations, *, max_tokens: int, temperature: float, json_schema: dict | None
    ) -> list[ChatResult]:
        """The whole batch in one engine call; each result gets an equal share of its time."""
        extra = self._structured(json_schema) if json_schema else {}
        params = self._sampling_params(
            max_tokens=max_tokens, temperature=temperature, seed=self.cfg.seed, **extra
        )
        watch = Stopwatch()
        outputs = self._generate(batch, params)
        share = watch.seconds / max(1, len(outputs))
        return [
            ChatResult(
                text=o.outputs[0].text,
                prompt_tokens=len(o.prompt_token_ids or []),
                completion_tokens=len(o.outputs[0].token_ids),
                seconds=share,
            )
            for o in outputs
        ]

    def _relevance(self, messages_per_passage: Sequence[Sequence[Message]]) -> list[Scored]:
        params = self._sampling_params(max_tokens=1, temperature=0.0, logprobs=20)
        watch = Stopwatch()
        outputs = self._generate(messages_per_passage, params)
        share = watch.seconds / max(1, len(outputs))
        scored = []
        for o in outputs:
            first = o.outputs[0].logprobs[0]  # token_id -> Logprob(logprob, decoded_token, rank)
            top = {lp.decoded_token: lp.logprob for lp in first.values() if lp.decoded_token is not None}
            scored.append(Scored(p_yes_from_logprobs(top), len(o.prompt_token_ids or []), share))
        return scored
