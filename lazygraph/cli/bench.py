"""`lazygraph bench NAME [OPTIONS]`: the benchmarks whose figures BENCHMARKS.md quotes, one command each.

Each benchmark parses its own options (`lazygraph bench NAME --help`), so the command passes them on
as they are given."""

from __future__ import annotations

from collections.abc import Callable

import typer

from lazygraph import api
from lazygraph.cli.options import settings

app = typer.Typer(help="Benchmarks of the index, queries and runtimes (figures for BENCHMARKS.md).")

# Options (and --help) belong to the benchmark, not to this command.
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def _runner(name: str) -> Callable[[typer.Context], None]:
    def run(ctx: typer.Context) -> None:
        status = api.run_benchmark(name, list(ctx.args), settings())
        if status:
            raise typer.Exit(status)

    return run


for _name, _summary in api.benchmarks().items():
    app.command(_name, help=_summary, context_settings=PASS_THROUGH, add_help_option=False)(_runner(_name))
