"""The main job on the embedded defaults: index the bundled sample corpus, answer two questions.

One local question (answerable from one or two documents) and one global question (themes
across the corpus), each printed with its citations and cost record.
"""

from __future__ import annotations

import json

from rich.console import Console

from lazygraph.settings import Settings


def run_demo(
    settings: Settings, index: str, console: Console, out: Console, budget: int | None = None
) -> None:
    from lazygraph.demo_data import demo_questions, sample_corpus_path
    from lazygraph.pipeline import build_index
    from lazygraph.query.engine import QueryEngine

    corpus = sample_corpus_path()
    console.rule("1. Index the sample corpus (Spark + Delta Lake, no LLM)")
    report = build_index(settings, input_path=str(corpus), index=index, append=True, console=console)
    console.print(json.dumps(report.get("counts", report), default=str), markup=False, highlight=False)

    engine = QueryEngine.open(settings, index, console=console)
    for kind, question in demo_questions().items():
        if kind not in ("local", "global"):
            continue
        console.rule(f"2. {kind.capitalize()} question")
        result = engine.answer(question, method="lazy", budget=budget)
        record = result.to_json()
        # Plain text, not a panel: answers must survive redirection to a file intact.
        out.print(f"Q: {question}", markup=False, highlight=False)
        out.print(f"A: {result.answer}", markup=False, highlight=False)
        out.print("cost: " + json.dumps(record["cost"], default=str), markup=False, highlight=False)
        out.print()
