"""The cost record every answer carries, and the readable search trace.

LLM usage comes from the clients' ledgers (one fresh ledger per query and client); the rest is
measured here: wall time per stage, relevance tests, communities visited per level.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from lazygraph.llm.base import LLMClient, UsageLedger


@dataclass
class CostRecorder:
    trace_enabled: bool = False
    # The prompt version of each LLM task (settings ``query.prompts``): a cost or a quality figure
    # belongs to the prompts that produced it.
    prompts: dict[str, int] = field(default_factory=dict)
    relevance_tests: int = 0
    stages: dict[str, float] = field(default_factory=dict)
    communities_visited: Counter = field(default_factory=Counter)
    trace: list[str] = field(default_factory=list)
    _ledgers: dict[str, UsageLedger] = field(default_factory=dict)
    _start: float = field(default_factory=time.perf_counter)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.stages[name] = self.stages.get(name, 0.0) + time.perf_counter() - start

    @contextmanager
    def track(self, clients: list[LLMClient]) -> Iterator[CostRecorder]:
        """Open one ledger per distinct client for the duration of the query."""
        with ExitStack() as stack:
            seen: set[int] = set()
            for client in clients:
                if id(client) in seen:
                    continue
                seen.add(id(client))
                self._ledgers[f"{client.role}#{len(seen)}"] = stack.enter_context(client.ledger())
            yield self

    def log(self, line: str) -> None:
        if self.trace_enabled:
            self.trace.append(line)

    def visited(self, level: int) -> None:
        self.communities_visited[int(level)] += 1

    def to_json(self) -> dict[str, Any]:
        per_role: dict[str, dict[str, float]] = {}
        for ledger in self._ledgers.values():
            for role, row in ledger.summary().items():
                acc = per_role.setdefault(
                    role,
                    {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
                    | {"cache_hits": 0, "cached_tokens": 0, "relevance_calls": 0},
                )
                for key, value in row.items():
                    acc[key] += value
        calls = sum(int(r["calls"]) for r in per_role.values())
        llm_seconds = sum(r["seconds"] for r in per_role.values())
        seconds = time.perf_counter() - self._start
        return {
            "relevance_tests": self.relevance_tests,
            "llm_calls": calls,
            # Relevance tests that called a model (the others were answered by the cascade or the cache).
            "relevance_llm_calls": int(sum(r["relevance_calls"] for r in per_role.values())),
            # Relevance tests and completions answered from the LLM cache (no model call, no tokens).
            "llm_cache_hits": int(sum(r["cache_hits"] for r in per_role.values())),
            # The tokens those hits cost when they were made: fresh plus cached tokens is the method's cost.
            "llm_cached_tokens": int(sum(r["cached_tokens"] for r in per_role.values())),
            "prompt_tokens": int(sum(r["prompt_tokens"] for r in per_role.values())),
            "completion_tokens": int(sum(r["completion_tokens"] for r in per_role.values())),
            "seconds": round(seconds, 3),
            "per_role": {
                role: {k: (round(v, 3) if k == "seconds" else int(v)) for k, v in row.items()}
                for role, row in per_role.items()
            },
            "stages": {name: round(s, 4) for name, s in self.stages.items()},
            "communities_visited": {str(level): n for level, n in sorted(self.communities_visited.items())},
            "llm_seconds": round(llm_seconds, 3),
            "non_llm_seconds": round(max(0.0, seconds - llm_seconds), 3),
            "prompts": dict(self.prompts),
        }


def llm_tokens(cost: dict[str, Any]) -> int:
    """What an answer's LLM work is worth in tokens: fresh tokens plus those its cache hits once cost."""
    keys = ("prompt_tokens", "completion_tokens", "llm_cached_tokens")
    return sum(int(cost.get(key, 0) or 0) for key in keys)
