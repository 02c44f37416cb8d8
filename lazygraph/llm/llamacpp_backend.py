"""Embedded backend: llama.cpp through llama-cpp-python, on CPU.

One ``Llama`` per model file and process, shared by every role that names the same file
(the relevance tester and the synthesis role are the same 1.5B model by default). Calls are
serialised by a lock because a llama.cpp context is not thread-safe.

Relevance tests do not generate: the prompt is evaluated and the next-token logits are read
directly, so a test costs one forward pass over the tokens not already in the KV cache. The
question comes first in the prompt, so consecutive tests of one subquery reuse its prefix.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lazygraph.errors import LLMError, SetupError
from lazygraph.llm.base import ChatResult, LLMClient, Message, Stopwatch
from lazygraph.settings import LLMBackendSettings

_ENGINES: dict[tuple[str, int], _Engine] = {}
_ENGINES_LOCK = threading.Lock()


class _Engine:
    def __init__(self, model_path: Path, cfg: LLMBackendSettings) -> None:
        # Busy-waiting OpenMP threads would steal the cores Spark and Ray need.
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        try:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise SetupError(
                "llama-cpp-python is not installed; run cluster/bootstrap.sh (it builds it from source)"
            ) from exc
        if not model_path.is_file():
            raise SetupError(f"model file {model_path} does not exist; run `lazygraph setup`")
        self.llm = Llama(
            model_path=str(model_path),
            n_ctx=cfg.n_ctx,
            n_batch=cfg.n_batch,
            n_threads=cfg.n_threads or max(1, os.cpu_count() or 1),
            seed=cfg.seed,
            verbose=False,
        )
        meta = self.llm.metadata
        template = meta.get("tokenizer.chat_template")
        if not template:
            raise SetupError(f"{model_path} carries no chat template; use a chat/instruct GGUF model")
        eos = self.llm._model.token_get_text(self.llm.token_eos())
        bos = self.llm._model.token_get_text(self.llm.token_bos()) if self.llm.token_bos() >= 0 else ""
        self.formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
        self.lock = threading.Lock()
        self.yes_ids = self._single_token_ids(("yes", "Yes", " yes", " Yes", "YES"))
        self.no_ids = self._single_token_ids(("no", "No", " no", " No", "NO"))
        if not self.yes_ids or not self.no_ids:
            raise SetupError(
                f"{model_path}: no single-token 'yes'/'no' in the vocabulary; relevance needs them"
            )

    def _single_token_ids(self, words: Sequence[str]) -> list[int]:
        ids = set()
        for w in words:
            toks = self.llm.tokenize(w.encode(), add_bos=False, special=False)
            if len(toks) == 1:
                ids.add(toks[0])
        return sorted(ids)

    def prompt_tokens(self, messages: Sequence[Message]) -> list[int]:
        prompt = self.formatter(messages=list(messages)).prompt
        return self.llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)

    def next_token_p_yes(self, tokens: list[int]) -> tuple[float, int]:
        """Evaluate tokens (reusing the cached prefix); return P(yes | yes or no) and tokens evaluated."""
        if len(tokens) >= self.llm.n_ctx():
            raise LLMError(
                f"relevance prompt of {len(tokens)} tokens exceeds the context of {self.llm.n_ctx()}; "
                "raise llm.relevance.n_ctx or use smaller chunks"
            )
        cached = self.llm._input_ids[: self.llm.n_tokens]
        prefix = 0
        for a, b in zip(cached, tokens, strict=False):
            if a != b:
                break
            prefix += 1
        prefix = min(prefix, len(tokens) - 1)  # at least one token must be evaluated to get logits
        self.llm.n_tokens = prefix
        self.llm.eval(tokens[prefix:])
        # llama-cpp-python keeps no logits unless logits_all (which slows every call); the context
        # still holds the last position's logits, which is all a yes/no test needs.
        n_vocab = self.llm.n_vocab()
        logits = np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(n_vocab,)).astype(np.float64)
        yes = logits[self.yes_ids]
        no = logits[self.no_ids]
        top = max(yes.max(), no.max())
        p_yes = np.exp(yes - top).sum()
        p_no = np.exp(no - top).sum()
        return float(p_yes / (p_yes + p_no)), len(tokens) - prefix


def _engine_for(cfg: LLMBackendSettings, default_model: Path | None) -> _Engine:
    path = cfg.model_path or default_model
    if path is None:
        raise SetupError("no model file configured for the llamacpp backend; run `lazygraph setup`")
    key = (str(Path(path).resolve()), cfg.n_ctx)
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            _ENGINES[key] = _Engine(Path(path), cfg)
        return _ENGINES[key]


class LlamaCppClient(LLMClient):
    def __init__(self, role: str, cfg: LLMBackendSettings, default_model: Path | None = None) -> None:
        super().__init__(role)
        self.cfg = cfg
        self.engine = _engine_for(cfg, default_model)

    def _chat(
        self, messages: Sequence[Message], *, max_tokens: int, temperature: float, json_schema: dict | None
    ) -> ChatResult:
        kwargs: dict = {"max_tokens": max_tokens, "temperature": temperature, "seed": self.cfg.seed}
        if json_schema is not None:
            # llama-cpp-python turns the schema into a GBNF grammar, so the output parses.
            kwargs["response_format"] = {"type": "json_object", "schema": json_schema}
        with self.engine.lock:
            watch = Stopwatch()
            try:
                out = self.engine.llm.create_chat_completion(messages=list(messages), **kwargs)
            except ValueError as exc:  # llama-cpp raises ValueError when the prompt exceeds n_ctx
                raise LLMError(f"llama.cpp refused the request: {exc}") from exc
            seconds = watch.seconds
        usage = out.get("usage", {})
        return ChatResult(
            text=out["choices"][0]["message"]["content"] or "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=seconds,
        )

    def _relevance(self, messages_per_passage: Sequence[Sequence[Message]]) -> list[tuple[float, int, float]]:
        results = []
        with self.engine.lock:
            for messages in messages_per_passage:
                watch = Stopwatch()
                tokens = self.engine.prompt_tokens(messages)
                p_yes, _evaluated = self.engine.next_token_p_yes(tokens)
                results.append((p_yes, len(tokens), watch.seconds))
        return results
