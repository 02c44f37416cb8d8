"""spark-submit entry point of the indexing pipeline (the same work as `lazygraph index`).

    spark-submit --master spark://host:7077 jobs/index_job.py --input corpus.jsonl --index s3a://bucket/idx

The Spark session created by spark-submit is reused (``get_spark`` returns the active session).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from lazygraph.api import LazyGraphError, index, load_settings


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Build or append to a lazygraph index.")
    parser.add_argument(
        "--input",
        required=True,
        help="JSON Lines {doc_id,title,text} or a folder of .txt/.md; a path or a URI "
        "(s3a://, abfss://, gs://, hdfs://)",
    )
    parser.add_argument("--index", required=True, help="index directory or URI")
    parser.add_argument("--append", action="store_true", help="add or replace documents in an existing index")
    parser.add_argument("--config", type=Path, default=None, help="YAML settings file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(stderr=True)
    try:
        report = index(
            args.input,
            index=args.index,
            append=args.append,
            settings=load_settings(args.config),
            console=console,
        )
    except LazyGraphError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return 2
    print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
