"""Ray job entry point of batch querying (the same work as `lazygraph batch`).

    ray job submit --address http://head:8265 --working-dir . -- \\
        python jobs/batch_job.py --index s3a://bucket/idx --queries queries.jsonl --out s3a://bucket/answers

Under `ray job submit` (or wherever RAY_ADDRESS is set) it joins that cluster with
``ray.init(address="auto")``; ``ray.address`` in the settings names another cluster; with neither it
starts a local Ray, as `lazygraph batch` does. The summary goes to stderr, the report as JSON to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from lazygraph.api import LazyGraphError, Settings, batch_table, load_settings, methods, open_index


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Answer many queries through Ray query actors (resumable).")
    parser.add_argument("--index", required=True, help="index directory or URI, readable from every node")
    parser.add_argument("--queries", required=True, type=Path, help="JSON Lines {query_id, question} or text")
    parser.add_argument("--out", required=True, help="output Delta table directory or URI (resumable)")
    parser.add_argument("--preset", default=None, help="preset name")
    parser.add_argument("--budget", type=int, default=None, help="relevance-test budget")
    parser.add_argument("--method", default="lazy", choices=methods())
    parser.add_argument("--config", type=Path, default=None, help="YAML settings file")
    parser.add_argument(
        "--no-rerun-stale",
        dest="rerun_stale",
        action="store_false",
        help="keep answers of an older version of the index (by default they are answered again)",
    )
    return parser.parse_args(argv)


def job_settings(config: Path | None) -> Settings:
    """The settings, joining the job's cluster when Ray set RAY_ADDRESS and no ray.address is given."""
    settings = load_settings(config)
    if settings.ray.address or not os.environ.get("RAY_ADDRESS"):
        return settings
    return settings.model_copy(update={"ray": settings.ray.model_copy(update={"address": "auto"})})


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(stderr=True)
    try:
        opened = open_index(args.index, settings=job_settings(args.config), console=console)
        report = opened.batch(
            args.queries,
            args.out,
            method=args.method,
            preset=args.preset,
            budget=args.budget,
            rerun_stale=args.rerun_stale,
        )
    except LazyGraphError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    console.print(batch_table(report))
    print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
