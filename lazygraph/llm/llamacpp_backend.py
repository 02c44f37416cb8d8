"""Embedded backend: llama.cpp through llama-cpp-python, on CPU.

One ``Llama`` per model file and process, shared by every role that names the same file
(the relevance tester and the synthesis role are the same 1.5B model by default). Calls are
serialised by a lock because a llama.cpp context is not thread-safe.

Document text never becomes a chat-control token. Rendering the chat template and tokenizing the
result with special tokens enabled (what ``create_chat_completion`` does) would turn a
``<|im_end|>`` written inside a passage into a real end of turn, letting the document close the
user's message and write the assistant's answer. So the template is rendered with a mark in place
of each message's content, its own text is tokenized with special tokens and every content as
plain text (``split_chat_prompt``), and both relevance tests and chat run on those token ids.

Relevance tests do not generate: the prompt is evaluated and the next-token logits are read
directly, so a test costs one forward pass over the tokens not already in the KV cache. The
question comes first in the prompt, so consecutive tests of one subquery reuse its prefix.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from lazygraph.errors import LLMError, SetupError
from lazygraph.llm.base import ChatResult, LLMClient, Message, Scored, Stopwatch
from lazygraph.settings import LLMBackendSettings

_ENGINES: dict[tuple[str, int], _Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _close_engines() -> None:
    """Free the models before the interpreter tears down llama-cpp-python's module globals; freed
    later, by ``Llama.__del__``, they print an AttributeError traceback at exit."""
    with _ENGINES_LOCK:
        for engine in _ENGINES.values():
            engine.llm.close()
        _ENGINES.clear()


atexit.register(_close_engines)
# Stands in for a message's content while the template is rendered. Private-use characters keep it out of
# any template's own text, and, not being whitespace, through a template that trims content.
_CONTENT_MARK = "\ue000lazygraph-content-{index}\ue001"


def split_chat_prompt(
    render: Callable[[list[Message]], str], messages: Sequence[Message]
) -> list[tuple[str, bool]]:
    """The chat prompt as ``(text, is_content)`` pieces, in order: template text, then message contents.

    Each content is replaced by a mark for rendering, so where the template ends and a content begins is
    known exactly, whatever the content says. The pieces must join into the prompt rendered with the real
    contents: a template that rewrites content (trims or escapes it) is refused, not tokenized wrongly.
    """
    marks = [_CONTENT_MARK.format(index=i) for i in range(len(messages))]
    marked = render([{**m, "content": mark} for m, mark in zip(messages, marks, strict=True)])
    pieces: list[tuple[str, bool]] = []
    rest = marked
    for message, mark in zip(messages, marks, strict=True):
        before, found, rest = rest.partition(mark)
        if not found or mark in rest:
            raise LLMError(
                f"the model's chat template does not place the {message['role']} message's content exactly "
                "once and in order; use a chat/instruct model whose template quotes each message verbatim"
            )
        pieces += [(before, False), (message["content"], True)]
    pieces.append((rest, False))
    if "".join(text for text, _ in pieces) != render(list(messages)):
        raise LLMError(
            "the model's chat template rewrites message content (e.g. trims it), so document text cannot "
            "be kept apart from the template's control tokens; use a model whose template quotes it verbatim"
        )
    return [(text, is_content) for text, is_content in pieces if text]


@lru_cache(maxsize=32)
def _grammar(schema_json: str) -> Any:
    """The GBNF grammar of a JSON schema; the plain-JSON grammar for a schema llama-cpp cannot translate
    (as its chat handler does), so the reply still parses."""
    from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

    try:
        return LlamaGrammar.from_json_schema(schema_json, verbose=False)
    except (ValueError, KeyError, AssertionError):  # how the translator rejects an unsupported schema
        return LlamaGrammar.from_string(JSON_GBNF, verbose=False)


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
        # Where the reply ends, as in create_chat_completion: llama.cpp stops at every end-of-generation
        # token (<|im_end|>, the end of a ChatML turn), and this stop string ends it at the same marker
        # written out as text.
        self.stop = [eos]
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

    def _render(self, messages: list[Message]) -> str:
        return self.formatter(messages=messages).prompt

    def prompt_tokens(self, messages: Sequence[Message]) -> list[int]:
        """The chat prompt's token ids: the template's markers as control tokens, every message's content
        (instructions, question, passages alike) as plain text, so no content can end its turn."""
        tokens: list[int] = []
        for text, is_content in split_chat_prompt(self._render, messages):
            tokens += self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=not is_content)
        return tokens

    def complete(
        self, tokens: list[int], *, max_tokens: int, temperature: float, seed: int | None, schema: dict | None
    ) -> dict[str, Any]:
        """Generate after the prompt's tokens until the end of the turn, under the schema's grammar if any.

        Sampling settings are ``create_chat_completion``'s defaults, so replies match what it gave.
        """
        # Key order is kept: the grammar makes the model write properties in the schema's order.
        grammar = _grammar(json.dumps(schema)) if schema is not None else None
        return self.llm.create_completion(
            prompt=tokens,
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
            stop=self.stop,
            grammar=grammar,
        )

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
        with self.engine.lock:
            watch = Stopwatch()
            tokens = self.engine.prompt_tokens(messages)
            try:
                # A schema becomes a GBNF grammar, so the output parses.
                out = self.engine.complete(
                    tokens,
                    max_tokens=max_tokens,
                    temperature=temperature,
                    seed=self.cfg.seed,
                    schema=json_schema,
                )
            except ValueError as exc:  # llama-cpp raises ValueError when the prompt exceeds n_ctx
                raise LLMError(f"llama.cpp refused the request: {exc}") from exc
            seconds = watch.seconds
        usage = out.get("usage", {})
        return ChatResult(
            text=out["choices"][0]["text"] or "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=seconds,
        )

    def _relevance(self, messages_per_passage: Sequence[Sequence[Message]]) -> list[Scored]:
        results = []
        with self.engine.lock:
            for messages in messages_per_passage:
                watch = Stopwatch()
                tokens = self.engine.prompt_tokens(messages)
                p_yes, _evaluated = self.engine.next_token_p_yes(tokens)
                results.append(Scored(p_yes, len(tokens), watch.seconds))
        return results
