"""What one append costs, side by side in one Spark session: the same batch appended to fresh copies of
one index, in the order the variants are given, one JSON row each (seconds and stage seconds).

    python benchmarks/bench_append_ab.py --input ../shared/datasets/wiki2mh_corpus/corpus.jsonl \
        --workdir DIR --variants defaults,before,defaults,before,defaults,one,one

Variants: ``defaults`` appends the batch (1 % of the corpus, the first batch `lazygraph bench
living-index` holds back) with the settings a user gets; ``one`` appends its first document only;
``before`` emulates the index job before two cuts: every community table MERGEd
(``communities.merge_min_rows`` 0) and every concept name encoded again (no earlier store's vectors).
The first row warms the session up and is not one to compare. The index of the rest of the corpus is
built once in DIR/base (with its serving store) and reused by later runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from rich.console import Console

from lazygraph.bench.living_index import read_corpus, split, write_jsonl
from lazygraph.pipeline import build_index
from lazygraph.settings import load_settings


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--variants", default="defaults,before,defaults,before,defaults,one,one")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)

    import lazygraph.serving.writer as writer

    settings = load_settings()
    merged = settings.communities.model_copy(update={"merge_min_rows": 0})
    before = settings.model_copy(update={"communities": merged})
    find_earlier = writer.find_earlier
    console = Console(stderr=True)
    first, held = split(read_corpus(args.input), 0.01, 1, args.seed)
    base = args.workdir / "base"
    args.workdir.mkdir(parents=True, exist_ok=True)
    if not (base / "manifest").exists():
        corpus = write_jsonl(first, args.workdir / "first.jsonl")
        build_index(settings, str(corpus), str(base), False, console)
    for variant in args.variants.split(","):
        if variant not in ("defaults", "before", "one"):
            parser.error(f"unknown variant {variant!r}: use defaults, before or one")
        index = args.workdir / "index"
        shutil.rmtree(index, ignore_errors=True)
        shutil.copytree(base, index)
        batch = held[0][:1] if variant == "one" else held[0]
        path = write_jsonl(batch, args.workdir / f"append-{variant}.jsonl")
        writer.find_earlier = (lambda *_, **__: None) if variant == "before" else find_earlier
        chosen = before if variant == "before" else settings
        started = time.perf_counter()
        report = build_index(chosen, str(path), str(index), True, console)
        seconds = round(time.perf_counter() - started, 2)
        row = {"variant": variant, "documents": len(batch), "seconds": seconds}
        print(json.dumps({**row, "stages": report["timings"]}), flush=True)
    writer.find_earlier = find_earlier
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
