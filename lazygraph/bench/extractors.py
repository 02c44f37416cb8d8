"""The concept extractors side by side on the same chunks: time, concepts a chunk, agreement.

    lazygraph bench extractors --input ../shared/datasets/wiki2mh_corpus/corpus.jsonl --limit 2000

Every combination of ``concepts.noun_phrases`` (parser, pos_rules) and ``concepts.use_entities`` (on,
off) runs spaCy over the same chunks (chunked as the index chunks them), in this process, one after
another and then again in the reverse order (the machine's load changes between runs; each figure
is the mean of its two runs). Prints one JSON object per extractor: seconds, chunks per second,
seconds relative to today's default (parser with entities), distinct concepts a chunk, and the mean
Jaccard overlap of each chunk's concept set with the default's. What an extractor does to retrieval
and answers is measured by building an index with it (``LAZYGRAPH_CONCEPTS__NOUN_PHRASES``) and
running the query benchmarks; see BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from statistics import mean

from lazygraph.bench.index import chunk_texts, read_corpus
from lazygraph.settings import ConceptSettings, Settings

EXTRACTORS = {
    "parser+entities": ("parser", True),
    "parser": ("parser", False),
    "pos_rules+entities": ("pos_rules", True),
    "pos_rules": ("pos_rules", False),
}
DEFAULT = "parser+entities"


def concept_sets(texts: list[str], cfg: ConceptSettings) -> tuple[float, list[set[str]]]:
    """Seconds to parse ``texts`` and normalise their concepts, and each text's concept names."""
    from lazygraph.nlp.extract import doc_concepts, load_pipeline, merge_kinds, noun_phrases

    nlp = load_pipeline(cfg.spacy_model, cfg.use_entities, cfg.noun_phrases)
    nlp("warm up")  # the first call loads lookup tables; not part of any extractor's time
    started = time.perf_counter()
    found = [
        set(merge_kinds(doc_concepts(doc, cfg, noun_phrases(doc, nlp))))
        for doc in nlp.pipe(texts, batch_size=64)
    ]
    return time.perf_counter() - started, found


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(prog="lazygraph bench extractors", description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, required=True, help="JSON Lines corpus (doc_id, text)")
    parser.add_argument("--limit", type=int, default=2000, help="Documents read from the start.")
    args = parser.parse_args(argv)
    texts = [text for _, text in chunk_texts(settings, read_corpus(args.input)[: args.limit])]
    seconds: dict[str, list[float]] = {name: [] for name in EXTRACTORS}
    found: dict[str, list[set[str]]] = {}
    for order in (list(EXTRACTORS), list(reversed(EXTRACTORS))):
        for name in order:
            mode, entities = EXTRACTORS[name]
            cfg = settings.concepts.model_copy(update={"noun_phrases": mode, "use_entities": entities})
            took, found[name] = concept_sets(texts, cfg)
            seconds[name].append(took)
    base = mean(seconds[DEFAULT])
    for name in EXTRACTORS:
        took = mean(seconds[name])
        row = {
            "extractor": name,
            "chunks": len(texts),
            "seconds": round(took, 2),
            "runs": [round(s, 2) for s in seconds[name]],
            "chunks_per_s": round(len(texts) / took, 1),
            "over_default": round(took / base, 3),
            "concepts_per_chunk": round(mean(len(s) for s in found[name]), 2),
            "jaccard_with_default": round(mean(map(jaccard, found[name], found[DEFAULT])), 3),
        }
        print(json.dumps(row))
    return 0
