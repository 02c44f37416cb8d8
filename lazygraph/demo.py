"""The main job on the embedded defaults: index the bundled sample corpus, answer two questions.

One local question (answerable from one or two documents) and one global question (themes
across the corpus), each printed with its cited sources and cost record.

The demo is sized to finish in about three minutes on two CPU cores with the 1.5B model, where every
prompt token costs ~10 ms and every generated token ~50 ms: a budget of 9 relevance tests per
question (the sample has 30 chunks, so that is 30 % of the corpus judged), at most three subqueries,
claim extraction over all relevant chunks at once (``map_scope: query``, five chunks per call), and a
context of 1,200 tokens for the local answer (its relevant chunks with their claims, then fill
passages) and 2,000 for the global report (short passages across the corpus's themes). Settings
given by the user (YAML or environment) still win over these.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from lazygraph.settings import Settings

DEMO_BUDGET = 9
# The local answer reads its few relevant chunks whole; the global report reads many short passages,
# one theme of the corpus after another, so it gets the larger context.
DEMO_CONTEXT_TOKENS = {"local": 1200, "global": 2600}
DEMO_QUERY_SETTINGS: dict[str, Any] = {
    "map_scope": "query",
    "max_subqueries": 3,
    "max_chunks_per_map_group": 5,
}


def demo_settings(settings: Settings) -> Settings:
    """The demo's query sizing, under any query setting the user set explicitly."""
    explicit = settings.query.model_dump(exclude_unset=True)
    # validated again, so a nested setting the user gave (query.prompts.reduce) stays a model
    query = type(settings.query).model_validate(
        {**settings.query.model_dump(), **DEMO_QUERY_SETTINGS, **explicit}
    )
    return settings.model_copy(update={"query": query})


def run_demo(
    settings: Settings,
    index: str,
    console: Console,
    out: Console,
    budget: int | None = None,
    report_file: Path | None = None,
) -> dict[str, Any]:
    from lazygraph.cli import print_sources
    from lazygraph.demo_data import demo_questions, sample_corpus_path
    from lazygraph.pipeline import build_index
    from lazygraph.query.engine import QueryEngine

    settings = demo_settings(settings)
    started = time.perf_counter()
    console.rule("1. Index the sample corpus (Spark + Delta Lake, no LLM)")
    report = build_index(
        settings, input_path=str(sample_corpus_path()), index=index, append=True, console=console
    )
    console.print(json.dumps(report.get("counts", report), default=str), markup=False, highlight=False)
    timings: dict[str, float] = {"index": round(time.perf_counter() - started, 1)}

    engine = QueryEngine.open(settings, index, console=console)
    answers = {}
    for kind, question in demo_questions().items():
        if kind not in ("local", "global"):
            continue
        console.rule(f"2. {kind.capitalize()} question")
        result = engine.answer(
            question, method="lazy", budget=budget or DEMO_BUDGET, context_tokens=DEMO_CONTEXT_TOKENS[kind]
        )
        record = result.to_json()
        answers[kind] = record
        # Plain text, not a panel: answers must survive redirection to a file intact.
        out.print(f"Q: {question}", markup=False, highlight=False)
        out.print(f"A: {result.answer}", markup=False, highlight=False)
        print_sources(out, result.sources)
        out.print("cost: " + json.dumps(record["cost"], default=str), markup=False, highlight=False)
        out.print()
    timings["total"] = round(time.perf_counter() - started, 1)
    console.print(f"demo finished in {timings['total']:.0f} s (index {timings['index']:.0f} s)")
    summary = {"index": index, "counts": report.get("counts"), "answers": answers, "seconds": timings}
    if report_file is not None:
        report_file.parent.mkdir(parents=True, exist_ok=True)
        report_file.write_text(json.dumps(summary, indent=2, default=str))
    return summary
