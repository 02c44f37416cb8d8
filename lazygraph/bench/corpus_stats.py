"""Statistics of a real corpus that the synthetic index (``gen_synthetic_index.py``) is shaped after.

    lazygraph bench corpus-stats --corpus ../shared/datasets/hotpotqa100/corpus.jsonl [--limit N]

Every paragraph is treated as one chunk (these corpora's paragraphs are shorter than the 300-token
chunk window, so the index job cuts each into one chunk). Per chunk it measures:

- distinct terms, as the index's lexical stage cuts them (``lazygraph.lexical.terms.term_counts``);
- distinct concepts (mentions rows), as the index's NLP stage finds them (spaCy noun chunks and
  entities, normalised, ``lazygraph.nlp.extract.doc_concepts``), when the spaCy model is installed;
- the Zipf exponent of concept chunk-frequencies: the slope of log(frequency) against log(rank),
  fitted by least squares over the concepts seen in at least two chunks.

Prints one JSON object. Community sizes are not measured here: they come from the Spark community
stage, which this script does not run.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from lazygraph.lexical.terms import term_counts
from lazygraph.settings import Settings


def read_texts(path: Path, limit: int | None) -> list[str]:
    texts = []
    with path.open() as f:
        for line in f:
            record = json.loads(line)
            texts.append(f"{record.get('title') or ''}\n{record.get('text') or ''}")
            if limit is not None and len(texts) >= limit:
                break
    return texts


def concept_sets(texts: list[str]) -> list[set[str]] | None:
    """The normalised concept names of each text, or None without the spaCy model."""
    from lazygraph.errors import SetupError
    from lazygraph.nlp.extract import doc_concepts, load_pipeline
    from lazygraph.settings import ConceptSettings

    cfg = ConceptSettings()
    try:
        nlp = load_pipeline(cfg.spacy_model, cfg.use_entities)
    except (SetupError, ImportError):
        return None
    return [{name for name, _ in doc_concepts(doc, cfg)} for doc in nlp.pipe(texts, batch_size=64)]


def zipf_exponent(chunk_frequencies: Counter[str]) -> float:
    """Minus the slope of log frequency over log rank, for the concepts in two chunks or more."""
    freqs = np.sort(np.array([f for f in chunk_frequencies.values() if f >= 2], dtype=np.float64))[::-1]
    if len(freqs) < 3:
        return float("nan")
    ranks = np.arange(1, len(freqs) + 1, dtype=np.float64)
    slope = np.polyfit(np.log(ranks), np.log(freqs), 1)[0]
    return float(-slope)


def summary(values: list[int]) -> dict[str, float]:
    array = np.asarray(values, dtype=np.float64)
    return {
        "mean": round(float(array.mean()), 2),
        "p10": float(np.percentile(array, 10)),
        "p50": float(np.percentile(array, 50)),
        "p90": float(np.percentile(array, 90)),
    }


def corpus_stats(texts: list[str]) -> dict[str, Any]:
    terms = [len(term_counts(text)) for text in texts]
    words = [len(text.split()) for text in texts]
    stats: dict[str, Any] = {
        "chunks": len(texts),
        "words_per_chunk": summary(words),
        "terms_per_chunk": summary(terms),
    }
    concepts = concept_sets(texts)
    if concepts is None:
        stats["mentions_per_chunk"] = "not measured: the spaCy model is not installed"
        return stats
    frequencies: Counter[str] = Counter(name for names in concepts for name in names)
    stats["mentions_per_chunk"] = summary([len(names) for names in concepts])
    stats["concepts"] = len(frequencies)
    stats["concepts_in_2_plus_chunks"] = sum(1 for f in frequencies.values() if f >= 2)
    stats["concept_zipf_exponent"] = round(zipf_exponent(frequencies), 3)
    return stats


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(prog="lazygraph bench corpus-stats", description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=None, help="Read only the first N paragraphs.")
    args = parser.parse_args(argv)
    print(json.dumps(corpus_stats(read_texts(args.corpus, args.limit))))
    return 0
