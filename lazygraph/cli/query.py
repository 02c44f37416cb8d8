"""`lazygraph query` and `demo`: answering questions, with citations and a cost record."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lazygraph import api
from lazygraph.cli.options import BudgetOption, IndexOption, MethodOption, PresetOption, opened, settings
from lazygraph.cli.render import console, print_answer, print_demo_answer, print_json, print_text

app = typer.Typer()


@app.command()
def query(
    question: Annotated[str, typer.Argument(help="The question.")],
    index: IndexOption = None,
    preset: PresetOption = None,
    budget: BudgetOption = None,
    method: MethodOption = "lazy",
    context_tokens: Annotated[int | None, typer.Option(help="Context-token limit for the answer.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer record as JSON.")] = False,
    trace: Annotated[bool, typer.Option("--trace", help="Print the search trace to stderr.")] = False,
) -> None:
    """Answer a question from an index, with citations and a cost record."""
    answer = opened(index).query(
        question, method=method, preset=preset, budget=budget, context_tokens=context_tokens, trace=trace
    )
    for line in answer.trace:
        print_text(line, console)
    if as_json:
        print_json(answer.to_json())
    else:
        print_answer(answer)


@app.command()
def demo(
    index: Annotated[
        str, typer.Option("--index", help="Where to build the sample index.")
    ] = "work/sample-index",
    budget: Annotated[
        int | None,
        typer.Option(help="Relevance-test budget per question (default 9, so the demo is quick)."),
    ] = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="Also write both answer records and timings as JSON.")
    ] = None,
) -> None:
    """Index the bundled sample corpus and answer one local and one global question."""
    api.run_demo(
        index,
        budget=budget,
        report_file=report,
        settings=settings(),
        console=console,
        on_answer=print_demo_answer,
    )
