"""`lazygraph store build` and `store show`: the Lance serving store derived from an index."""

from __future__ import annotations

from typing import Annotated

import typer

from lazygraph import api
from lazygraph.cli.options import IndexOption, settings
from lazygraph.cli.render import console, print_json

app = typer.Typer(
    help="The serving store: Lance datasets derived from an index's Delta tables, built by every index "
    "run (serving.build_on_index) and on request here; every query method reads it with "
    "query.index_source: store, or auto from serving.store_above_chunks chunks.",
    no_args_is_help=True,
)


@app.command()
def build(
    index: IndexOption = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild the store even if it exists.")] = False,
) -> None:
    """Build the serving store of the index's last complete run (skipped when it exists), under the
    index's writer lease. Every index run builds it too; this is for a run whose build failed, or an
    index built with serving.build_on_index off."""
    print_json(api.build_store(index, settings=settings(), console=console, force=force))


@app.command()
def show(index: IndexOption = None) -> None:
    """Print the metadata of the index's current serving store (an error when it is missing or stale)."""
    store = api.open_store(index, settings=settings())
    print_json({**store.meta, "store": store.uri})
