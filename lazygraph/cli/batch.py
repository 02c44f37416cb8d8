"""`lazygraph batch`: many queries through a pool of Ray actors into a resumable Delta table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lazygraph import api
from lazygraph.cli.options import BudgetOption, IndexOption, MethodOption, PresetOption, opened
from lazygraph.cli.render import console, print_json

app = typer.Typer()


@app.command()
def batch(
    queries: Annotated[
        Path, typer.Option("--queries", help="JSON Lines {query_id, question} or one question a line.")
    ],
    out_dir: Annotated[str, typer.Option("--out", help="Output Delta table directory (resumable).")],
    index: IndexOption = None,
    preset: PresetOption = None,
    budget: BudgetOption = None,
    method: MethodOption = "lazy",
    rerun_stale: Annotated[
        bool,
        typer.Option(
            "--rerun-stale/--no-rerun-stale",
            help="Answer again the queries answered by an older version of the index (default).",
        ),
    ] = True,
) -> None:
    """Answer many queries through a pool of Ray actors; re-running skips queries already answered by the
    index as it is now.

    A query actor that dies is replaced and its queries sent again. The summary goes to stderr, the
    report as JSON to stdout.
    """
    report = opened(index).batch(
        queries, out_dir, method=method, preset=preset, budget=budget, rerun_stale=rerun_stale
    )
    console.print(api.batch_table(report))
    print_json(report)
