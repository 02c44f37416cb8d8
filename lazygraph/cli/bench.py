"""`lazygraph bench`: the benchmarks whose figures BENCHMARKS.md quotes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lazygraph import api
from lazygraph.cli.options import settings
from lazygraph.cli.render import print_json

app = typer.Typer(
    help="Micro-benchmarks of the embedded runtimes (figures for BENCHMARKS.md).", no_args_is_help=True
)


@app.command("embedding")
def embedding(
    n: Annotated[int, typer.Option(help="Number of chunks to embed.")] = 512,
    input: Annotated[Path | None, typer.Option(help="JSON Lines corpus to take chunks from.")] = None,
) -> None:
    """Chunks per second of the configured embedding model."""
    print_json(api.bench_embedding(n=n, input=input, settings=settings()))


@app.command("llm")
def llm(
    role: Annotated[str, typer.Option(help="relevance or synthesis.")] = "relevance",
    relevance_tests: Annotated[int, typer.Option(help="Relevance tests to time.")] = 24,
) -> None:
    """Prompt and generation tokens per second, and relevance tests per minute, of an LLM role."""
    print_json(api.bench_llm(role=role, relevance_tests=relevance_tests, settings=settings()))
