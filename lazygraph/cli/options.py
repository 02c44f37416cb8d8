"""The options several commands share, declared once, and the settings every command runs under."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lazygraph.api import ConfigError, Index, Settings, load_settings, methods, open_index

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="YAML settings file (overridden by LAZYGRAPH_* variables)."),
]
IndexOption = Annotated[
    str | None,
    typer.Option("--index", help="Index directory or URI (file://, s3a://, hdfs://); default storage.index."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
MethodOption = Annotated[str, typer.Option(help="The search method: lazy, vector or hybrid.")]
PresetOption = Annotated[
    str | None,
    typer.Option(help="Z0_Lite (default), Z20_Lite, Z100_Lite, Z500, Z1500, SS_8K / SS_64K (vector)."),
]
BudgetOption = Annotated[int | None, typer.Option(help="Relevance-test budget (overrides the preset's).")]
QuestionsOption = Annotated[
    Path, typer.Option("--questions", help="JSON Lines questions (gold answers or supporting_doc_ids).")
]
OutOption = Annotated[
    Path,
    typer.Option("--out", help="Where the rows go (JSON Lines, resumable); the summary goes next to it."),
]
BudgetsOption = Annotated[str, typer.Option(help="Relevance-test budgets of the lazy method, e.g. 20,50.")]
MethodsOption = Annotated[
    str | None, typer.Option(help="Methods, comma-separated, e.g. lazy,vector (default: all).")
]
LimitsOption = Annotated[str, typer.Option(help="Context-token limits, e.g. 1000,2000.")]
SkipOption = Annotated[int, typer.Option(help="Skip the first N questions.")]
LimitOption = Annotated[int | None, typer.Option(help="Use at most K questions after the skipped ones.")]
EqualCostOption = Annotated[
    bool,
    typer.Option(
        help="Also answer with every method that tests no relevance (vector, hybrid) at the lazy search's "
        "cost: its context grown until its LLM tokens match lazy's, per question."
    ),
]
AnswersAOption = Annotated[
    str,
    typer.Option(
        "--a",
        help="Answers A: an `eval answers`/`eval sweep` rows file (FILE#method:budget:limit picks one "
        "method), JSON Lines {question_id, question, answer}, or a benchmark-qed answers .json.",
    ),
]
AnswersBOption = Annotated[str, typer.Option("--b", help="Answers B, in any of the same forms.")]
JudgeRoleOption = Annotated[str, typer.Option(help="LLM role that judges: synthesis or relevance.")]
TrialsOption = Annotated[int, typer.Option(help="Judge trials per pair, each in both orders.")]
TemperatureOption = Annotated[float, typer.Option(help="The judge's sampling temperature.")]
QedDirOption = Annotated[Path | None, typer.Option(help="Also write benchmark-qed input files here.")]
QedSetOption = Annotated[str, typer.Option(help="Question-set name of the benchmark-qed files.")]


class _Root:
    """What the root command was given, for the subcommand that runs after it."""

    config: Path | None = None


def set_config(config: Path | None) -> None:
    _Root.config = config


def settings() -> Settings:
    """The settings of this run: defaults < the --config file < LAZYGRAPH_* variables."""
    return load_settings(_Root.config)


def opened(index: str | None) -> Index:
    """The index the command names (default ``storage.index``), progress on stderr."""
    from lazygraph.cli.render import console

    return open_index(index, settings=settings(), console=console)


def parse_int_list(text: str, option: str) -> list[int]:
    """``"20,50,100"`` -> [20, 50, 100]; ConfigError names the option when an item is not an integer."""
    try:
        values = [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise ConfigError(
            f"{option} takes integers separated by commas, e.g. {option} 20,50; got {text!r}"
        ) from None
    if not values:
        raise ConfigError(f"{option} needs at least one value, e.g. {option} 50")
    return list(dict.fromkeys(values))


def parse_methods(text: str | None) -> list[str]:
    """Comma-separated method names; none given means every method the engine has."""
    if text is None:
        return methods()
    return list(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
