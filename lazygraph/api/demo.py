"""The main job on the embedded defaults: index the bundled sample corpus, answer two questions.

One local question (answerable from one or two documents) and one global question (themes across the
corpus), each with its cited sources and cost record, on the demo's sizing (``demo_settings``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from lazygraph.api.indexes import index, open_index
from lazygraph.api.types import Answer
from lazygraph.demo_data import (
    DEMO_BUDGET,
    DEMO_CONTEXT_TOKENS,
    demo_questions,
    demo_settings,
    sample_corpus_path,
)
from lazygraph.settings import Settings, load_settings


def run_demo(
    location: str,
    *,
    budget: int | None = None,
    report_file: Path | None = None,
    settings: Settings | None = None,
    console: Console | None = None,
    on_answer: Callable[[str, Answer], None] | None = None,
) -> dict[str, Any]:
    """Index the sample corpus at ``location`` (idempotent), then answer the local and the global
    question; ``on_answer(question, answer)`` is called as each answer arrives. Returns (and writes to
    ``report_file``) both answer records and the timings."""
    settings = demo_settings(settings if settings is not None else load_settings())
    console = console or Console(stderr=True)
    started = time.perf_counter()
    console.rule("1. Index the sample corpus (Spark + Delta Lake, no LLM)")
    report = index(str(sample_corpus_path()), index=location, append=True, settings=settings, console=console)
    console.print(json.dumps(report.get("counts", report), default=str), markup=False, highlight=False)
    timings: dict[str, float] = {"index": round(time.perf_counter() - started, 1)}
    opened = open_index(location, settings=settings, console=console)
    answers = {}
    asked = [(kind, question) for kind, question in demo_questions().items() if kind in ("local", "global")]
    for step, (kind, question) in enumerate(asked, start=2):
        console.rule(f"{step}. {kind.capitalize()} question")
        answer = opened.query(
            question, budget=budget or DEMO_BUDGET, context_tokens=DEMO_CONTEXT_TOKENS[kind]
        )
        answers[kind] = answer.to_json()
        if on_answer is not None:
            on_answer(question, answer)
    timings["total"] = round(time.perf_counter() - started, 1)
    console.print(f"demo finished in {timings['total']:.0f} s (index {timings['index']:.0f} s)")
    summary = {"index": location, "counts": report.get("counts"), "answers": answers, "seconds": timings}
    if report_file is not None:
        report_file.parent.mkdir(parents=True, exist_ok=True)
        report_file.write_text(json.dumps(summary, indent=2, default=str))
    return summary
