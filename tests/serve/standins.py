"""Stand-in query engines for the batch tests that kill actors and drivers: no model is needed to show
that a batch survives a dead process, so these answer by echoing, after a pause long enough for a test
to kill something mid-batch.

Importable by name (``standins:SlowEngine``) so that `lazygraph batch` in a subprocess can load them
through ``ray.engine_factory`` with this folder on PYTHONPATH.
"""

from __future__ import annotations

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
