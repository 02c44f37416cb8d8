"""`lazygraph bench llm`: prompt and generation throughput and relevance tests per minute."""

from __future__ import annotations

import argparse
import json
import time

from lazygraph.errors import ConfigError
from lazygraph.llm.factory import make_client
from lazygraph.settings import Settings

_PASSAGE = (
    "The estuary's salt marshes shelter juvenile fish, filter run-off from the farms upstream, and absorb "
    "storm surges that would otherwise flood the harbour town. Surveys since 2010 record a slow loss of "
    "marsh area as the channel is dredged for larger boats."
)


def bench_llm(settings: Settings, role: str = "relevance", relevance_tests: int = 24) -> dict:
    if role not in ("relevance", "synthesis"):
        raise ConfigError(f"unknown LLM role {role!r}; pass --role relevance or --role synthesis")
    if relevance_tests < 1:
        raise ConfigError("--relevance-tests must be at least 1")
    cfg = getattr(settings.llm, role)
    start = time.perf_counter()
    client = make_client(role, cfg, settings)
    load_seconds = time.perf_counter() - start

    # Prompt throughput: a long prompt, one generated token.
    long_prompt = [{"role": "user", "content": (_PASSAGE + " ") * 6 + "\nSummarise in one word."}]
    client.chat([{"role": "user", "content": "Say hi."}], max_tokens=2)  # warm-up
    prompt_run = client.chat(long_prompt, max_tokens=1)
    # Generation throughput: a short prompt, many generated tokens.
    gen_run = client.chat(
        [{"role": "user", "content": "Write a 120-word paragraph about tides and fishing boats."}],
        max_tokens=128,
    )
    gen_only_seconds = max(
        1e-6,
        gen_run.seconds - gen_run.prompt_tokens / max(1e-6, prompt_run.prompt_tokens / prompt_run.seconds),
    )

    # Relevance tests: one question, many passages (the shared prefix stays cached).
    passages = [f"{_PASSAGE} (Survey note {i}.)" for i in range(relevance_tests)]
    start = time.perf_counter()
    client.relevance("Why are the salt marshes of the estuary shrinking?", passages)
    rel_seconds = time.perf_counter() - start
    return {
        "backend": cfg.backend,
        "model": str(
            cfg.model_path
            or (cfg.model if cfg.backend != "llamacpp" else "embedded Qwen2.5-Coder-1.5B Q4_K_M")
        ),
        "load_seconds": round(load_seconds, 2),
        "prompt_tokens": prompt_run.prompt_tokens,
        "prompt_tokens_per_second": round(prompt_run.prompt_tokens / prompt_run.seconds, 1),
        "generated_tokens": gen_run.completion_tokens,
        "generation_tokens_per_second": round(gen_run.completion_tokens / gen_only_seconds, 1),
        "relevance_tests": relevance_tests,
        "relevance_tests_per_minute": round(60 * relevance_tests / rel_seconds, 1),
    }


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(prog="lazygraph bench llm", description=__doc__.splitlines()[0])
    parser.add_argument("--role", default="relevance", help="relevance or synthesis")
    parser.add_argument("--relevance-tests", type=int, default=24, help="relevance tests to time")
    args = parser.parse_args(argv)
    print(json.dumps(bench_llm(settings, role=args.role, relevance_tests=args.relevance_tests), indent=2))
    return 0
