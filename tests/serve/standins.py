"""Stand-in query engines for the batch tests that kill actors and drivers: no model is needed to show
that a batch survives a dead process, so these answer by echoing, after a pause long enough for a test
to kill something mid-batch.

Importable by name (``standins:SlowEngine``) so that `lazygraph batch` in a subprocess can load them
through ``ray.engine_factory`` with this folder on PYTHONPATH.
"""

from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from lazygraph.errors import IndexNotFoundError
from lazygraph.settings import Settings

# The cost record every stand-in answer carries: 10 + 5 fresh tokens and 3 from cache hits, one of its
# three verdicts or completions from the cache.
COST = {
    "relevance_tests": 2,
    "llm_calls": 2,
    "llm_cache_hits": 1,
    "llm_cached_tokens": 3,
    "prompt_tokens": 10,
    "completion_tokens": 5,
}


class SlowEngine:
    """Echoes the question after ``STANDIN_SECONDS`` (default 0.3) seconds."""

    def __init__(self, settings: Settings, index: str, roles: Any = None) -> None:
        if not Path(index).exists():
            raise IndexNotFoundError(f"no lazygraph index at {index}; build one with `lazygraph index`")

    def answer(self, question: str, **_: Any) -> Any:
        time.sleep(float(os.environ.get("STANDIN_SECONDS", "0.3")))
        record = {"answer": f"echo: {question}", "cost": dict(COST)}
        return SimpleNamespace(answer=record["answer"], to_json=lambda: record)


class CrashingEngine(SlowEngine):
    """Kills its own process on a question containing CRASH, as a model crashing on one query would."""

    def answer(self, question: str, **kwargs: Any) -> Any:
        if "CRASH" in question:
            # Some work first, as a real crash comes during a query: Ray sends the reply of the previous
            # call after it returns, and a kill in the same instant can lose that reply too.
            time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().answer(question, **kwargs)


class RelevanceTestingEngine:
    """Asks the relevance role the query actor passed in, as the real engine does, and reports its costs."""

    def __init__(self, settings: Settings, index: str, roles: Any) -> None:
        self.roles = roles

    def answer(self, question: str, **kwargs: Any) -> Any:
        relevance = self.roles("relevance").relevance  # the cheap model, as a *_Lite preset asks
        with relevance.ledger() as ledger:
            scores = relevance.relevance(question, ["the tide turns at noon", "a bread recipe"])
        record = {
            "answer": "ok",
            "scores": scores,
            "client": type(relevance).__name__,
            "cost": ledger.totals(),
        }
        return SimpleNamespace(answer="ok", to_json=lambda: record)


def stand_in_vllm_client(seconds: float = 0.0) -> Any:
    """A VLLMClient over a fake engine whose P(yes) depends on the passage: runs inside the LLM actor.
    Each batch takes ``seconds``, long enough for a test to kill the actor mid-batch."""
    from lazygraph.llm.vllm_backend import VLLMClient
    from lazygraph.settings import LLMBackendSettings

    class Engine:
        def chat(self, batch: list, params: dict, use_tqdm: bool = False) -> list:
            time.sleep(seconds)
            outputs = []
            for messages in batch:
                p = 0.8 if "tide turns" in messages[-1]["content"] else 0.1
                first = {
                    1: SimpleNamespace(logprob=math.log(p), decoded_token="yes"),
                    2: SimpleNamespace(logprob=math.log(1 - p), decoded_token="no"),
                }
                outputs.append(
                    SimpleNamespace(
                        prompt_token_ids=[0] * 10,
                        outputs=[SimpleNamespace(text="yes", token_ids=[1], logprobs=[first])],
                    )
                )
            return outputs

    return VLLMClient(
        "relevance",
        LLMBackendSettings(backend="vllm"),
        engine=Engine(),
        sampling_params=lambda **kw: kw,
        structured=lambda schema: {},
    )
