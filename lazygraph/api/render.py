"""Reports as a person reads them: rich tables and plain text of what the API returns (the command
line prints these; a notebook can too)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from lazygraph.api.types import Chunk


def print_stats(report: dict[str, Any], console: Console) -> None:
    """An index's statistics (``Index.stats``) as tables."""
    from lazygraph.stats import render_stats

    render_stats(report, console)


def format_chunks(chunks: list[Chunk]) -> str:
    """Chunks (``Index.show``) as `lazygraph show` prints them."""
    from lazygraph.query.show import render_chunks

    return render_chunks([chunk.to_json() for chunk in chunks])


def sweep_table(summary: dict[str, Any]) -> Table:
    """The table of a sweep (``Index.eval_sweep``)."""
    from lazygraph.eval.sweep import sweep_table as table

    return table(summary)


def compare_table(summary: dict[str, Any]) -> Table:
    """The table of a pairwise comparison (``eval_compare``)."""
    from lazygraph.eval.compare import compare_table as table

    return table(summary)


def batch_table(report: dict[str, Any]) -> Table:
    """The summary of a batch run (``Index.batch``)."""
    from lazygraph.serve.progress import summary_table

    return summary_table(report)
