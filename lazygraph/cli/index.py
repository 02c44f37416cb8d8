"""`lazygraph index`, `maintain`, `stats` and `show`: building an index, keeping its storage bounded and
reading what is in it."""

from __future__ import annotations

from typing import Annotated

import typer

from lazygraph import api
from lazygraph.cli.options import IndexOption, JsonOption, opened, settings
from lazygraph.cli.render import console, out, print_json, print_text

app = typer.Typer()


@app.command()
def index(
    index: IndexOption = None,
    input: Annotated[
        str | None, typer.Option("--input", help="JSON Lines {doc_id,title,text} or a folder of .txt/.md.")
    ] = None,
    append: Annotated[
        bool, typer.Option("--append", help="Add or replace documents in an existing index.")
    ] = False,
    delete: Annotated[
        str | None,
        typer.Option(
            "--delete", help="Remove documents: a file of doc ids (one a line) or a Delta table of doc_id."
        ),
    ] = None,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Keep indexing what lands in --input (a folder or a Delta table of documents) until Ctrl-C.",
        ),
    ] = False,
    once: Annotated[
        bool, typer.Option("--once", help="With --watch: index what is there now, then stop.")
    ] = False,
) -> None:
    """Build, append to or delete from an index: chunks, concepts, graph, communities, embeddings."""
    report = api.index(
        input,
        index=index,
        append=append,
        delete=delete,
        watch=watch,
        once=once,
        settings=settings(),
        console=console,
    )
    print_json(report)


@app.command()
def maintain(
    index: IndexOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only report what would be compacted and removed.")
    ] = False,
) -> None:
    """Compact the index's tables (OPTIMIZE) and remove the files no live run needs (VACUUM); keeps every
    file the last maintenance.keep_runs runs, and those of the last maintenance.keep_hours, pin."""
    print_json(api.maintain(index, dry_run=dry_run, settings=settings(), console=console))


@app.command()
def stats(index: IndexOption = None, as_json: JsonOption = False) -> None:
    """Row counts per table, graph statistics, community levels and sizes."""
    report = opened(index).stats()
    if as_json:
        print_json(report)
    else:
        api.print_stats(report, out)


@app.command()
def show(
    id: Annotated[str, typer.Argument(help="A chunk id (as cited in answers) or a document id.")],
    index: IndexOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print a cited chunk with its document (or every chunk of a document)."""
    found = opened(index).show(id)
    if as_json:
        print_json([chunk.to_json() for chunk in found])
    else:
        print_text(api.format_chunks(found))
