"""`lazygraph bench embedding`: chunks per second of the configured embedding model."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from lazygraph.embed.embedder import Embedder
from lazygraph.errors import InputError
from lazygraph.jsonlines import iter_json_objects
from lazygraph.settings import Settings


def _sample_texts(n: int, input_path: Path | None) -> list[str]:
    if input_path is None:
        from lazygraph.demo_data import sample_corpus_path

        input_path = sample_corpus_path()
    if not input_path.is_file():
        raise InputError(f"{input_path} does not exist; pass a JSON Lines corpus to --input")
    texts = [f"{row.get('title', '')}\n{row.get('text', '')}" for _, row in iter_json_objects(input_path)]
    if not texts:
        raise InputError(f"{input_path} holds no documents; pass a JSON Lines file of {{title, text}} rows")
    return [texts[i % len(texts)] for i in range(n)]


def bench_embedding(settings: Settings, n: int = 512, input_path: Path | None = None) -> dict:
    if n < 1:
        raise InputError("--n must be at least 1")
    texts = _sample_texts(n, input_path)
    start = time.perf_counter()
    embedder = Embedder(settings.embedding)
    load_seconds = time.perf_counter() - start
    embedder.encode(texts[: min(16, n)])  # warm-up
    start = time.perf_counter()
    vectors = embedder.encode(texts)
    seconds = time.perf_counter() - start
    return {
        "model": settings.embedding.model,
        "backend": settings.embedding.backend,
        "device": settings.embedding.device,
        "threads": settings.embedding.threads,
        "cpus": os.cpu_count(),
        "chunks": n,
        "dimension": int(vectors.shape[1]),
        "mean_words_per_chunk": round(sum(len(t.split()) for t in texts) / n, 1),
        "load_seconds": round(load_seconds, 2),
        "seconds": round(seconds, 2),
        "chunks_per_second": round(n / seconds, 1),
    }


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(prog="lazygraph bench embedding", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512, help="number of chunks to embed")
    parser.add_argument("--input", type=Path, default=None, help="JSON Lines corpus to take chunks from")
    args = parser.parse_args(argv)
    print(json.dumps(bench_embedding(settings, n=args.n, input_path=args.input), indent=2))
    return 0
