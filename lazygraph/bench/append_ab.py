"""What one append costs, side by side in one Spark session: the same batch appended to fresh copies of
one index, in the order the variants are given, one JSON row each (seconds and stage seconds).

    lazygraph bench append-ab --input ../shared/datasets/wiki2mh_corpus/corpus.jsonl \
        --workdir DIR --variants defaults,before,defaults,before,defaults,one,one

Variants: ``defaults`` appends the batch (1 % of the corpus, the first batch `lazygraph bench
living-index` holds back) with the settings of the command line; ``one`` appends its first document
only; ``delete`` deletes as many documents of the index instead (chosen as `lazygraph bench
living-index` chooses its delete); ``before`` emulates the index job before two cuts: every
community table MERGEd (``communities.merge_min_rows`` 0) and every concept name encoded again
(``serving.reuse_concept_vectors`` off). The first row warms the session up and is not one to compare.
The index of the rest of the corpus is built once in DIR/base (with its serving store) and reused by
later runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from rich.console import Console

from lazygraph.bench.living_index import read_corpus, split, write_delete_ids, write_jsonl
from lazygraph.settings import Settings

VARIANTS = ("defaults", "before", "one", "delete")


def before_cuts(settings: Settings) -> Settings:
    """The settings with the two append cuts undone: every community table MERGEd, every name encoded."""
    communities = settings.communities.model_copy(update={"merge_min_rows": 0})
    serving = settings.serving.model_copy(update={"reuse_concept_vectors": False})
    return settings.model_copy(update={"communities": communities, "serving": serving})


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(prog="lazygraph bench append-ab", description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--variants", default="defaults,before,defaults,before,defaults,one,one")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}: use {', '.join(VARIANTS)}")

    from lazygraph.pipeline import build_index, delete_documents

    console = Console(stderr=True)
    first, held = split(read_corpus(args.input), 0.01, 1, args.seed)
    base = args.workdir / "base"
    args.workdir.mkdir(parents=True, exist_ok=True)
    if not (base / "manifest").exists():
        corpus = write_jsonl(first, args.workdir / "first.jsonl")
        build_index(settings, str(corpus), str(base), False, console)
    before = before_cuts(settings)
    for variant in variants:
        index = args.workdir / "index"
        shutil.rmtree(index, ignore_errors=True)
        shutil.copytree(base, index)
        batch = held[0][:1] if variant == "one" else held[0]
        chosen = before if variant == "before" else settings
        if variant == "delete":
            path = write_delete_ids(first, len(batch), args.seed, args.workdir / "delete.txt")
            started = time.perf_counter()
            report = delete_documents(chosen, str(path), str(index), console)
        else:
            path = write_jsonl(batch, args.workdir / f"append-{variant}.jsonl")
            started = time.perf_counter()
            report = build_index(chosen, str(path), str(index), True, console)
        seconds = round(time.perf_counter() - started, 2)
        row = {"variant": variant, "documents": len(batch), "seconds": seconds}
        print(json.dumps({**row, "stages": report["timings"]}), flush=True)
    return 0
