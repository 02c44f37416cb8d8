"""The benchmarks whose figures BENCHMARKS.md quotes, one module each, all run as `lazygraph bench NAME
[OPTIONS]` (``run_benchmark``). Every module has ``main(argv, settings) -> int``: it parses its own
options (`lazygraph bench NAME --help` lists them), runs under the settings of the command line and
prints its figures; ``ann`` is the approximate-index part of ``query --ann``."""

from __future__ import annotations

from importlib import import_module

from lazygraph.errors import ConfigError
from lazygraph.settings import Settings

# name -> (module, what it measures); modules are imported when run, since most start Spark or a model.
BENCHMARKS: dict[str, tuple[str, str]] = {
    "embedding": ("embedding", "Chunks per second of the configured embedding model."),
    "llm": (
        "llm",
        "Prompt and generation tokens per second, and relevance tests per minute, of an LLM role.",
    ),
    "query": ("query", "Retrieval recall and query time split of lazy search against the baselines."),
    "baselines": ("baselines", "Gold-document recall of the baselines that make no LLM call."),
    "relevance": ("relevance", "Relevance tests per minute and separation of assessor set-ups."),
    "index": ("index", "Index time against a vector-only floor, memory, and scaling."),
    "living-index": ("living_index", "A full build against appends and a delete of 1 % of the documents."),
    "append-ab": (
        "append_ab",
        "One append side by side: the defaults against the earlier job, 1 document against 1 %.",
    ),
    "extractors": ("extractors", "The concept extractors side by side: time, concepts a chunk, agreement."),
    "communities": ("communities", "Community detection: speed and modularity against Leiden."),
    "graph-scale": (
        "graph_scale",
        "The graph and community stages on synthetic mentions of N chunks: seconds, memory, largest task.",
    ),
    "batch": ("batch", "Batch query jobs against one question after another, and the LLM cache."),
    "snapshot-memory": ("snapshot_memory", "Memory of query actors holding the index snapshot."),
    "embedding-backends": ("embedding_backends", "onnxruntime int8 against sentence-transformers (torch)."),
    "serving": ("serving", "One query process on the serving store: memory, open time, lookups, recall."),
    "store-equivalence": (
        "store_equivalence",
        "The serving store against the snapshot on real questions: same answers, fresh tokens, recall.",
    ),
    "synthetic-index": ("synthetic_index", "A synthetic index of N chunks (Delta tables and serving store)."),
    "corpus-stats": ("corpus_stats", "The statistics of a real corpus the synthetic index is shaped after."),
}


def run_benchmark(name: str, argv: list[str], settings: Settings) -> int:
    """Run benchmark ``name`` with its command-line options ``argv``; its exit status."""
    if name not in BENCHMARKS:
        raise ConfigError(f"unknown benchmark {name!r}; choose one of: {', '.join(BENCHMARKS)}")
    module = import_module(f"lazygraph.bench.{BENCHMARKS[name][0]}")
    return int(module.main(list(argv), settings) or 0)
