"""Index-time benchmark: lazygraph's full index against its floor, measured side by side.

Floor = a vector-only index of the same corpus (chunk + embed + write, one process, every core)
plus plain spaCy ``nlp.pipe`` with the same pipes on the same chunks (``n_process`` = cores).
Prints one JSON object: seconds of each, the ratios, the NLP stage over plain spaCy, peak memory
of the driver, the JVM and the Python workers, the machine's CPU utilisation during each stage of the
full index (``index_stage_cpu_percent``, 100 = every core busy), and (with --scaling) index time at
1x/2x/4x the corpus.

    lazygraph bench index --input ../shared/datasets/wiki2mh_corpus/corpus.jsonl [--scaling]
    lazygraph bench index --input ../shared/datasets/wiki2mh_corpus/corpus.jsonl --scaling-only 1,4
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from rich.console import Console

from lazygraph.settings import Settings


class PeakMemory:
    """Samples the RSS of this process and its descendants (JVM, Python workers) in the background."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.peak = {"driver_mb": 0.0, "jvm_mb": 0.0, "python_workers_mb": 0.0, "python_worker_max_mb": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakMemory:
        with contextlib.suppress(psutil.Error):
            self._sample(psutil.Process())  # so a peak read early is never zero
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        with contextlib.suppress(psutil.Error):
            self._sample(psutil.Process())  # the last moment counts too

    def gb(self) -> dict[str, float]:
        """The peaks of the driver, the JVM and the Python workers together, in GiB."""
        names = {
            "driver_mb": "python_driver_gb",
            "jvm_mb": "jvm_gb",
            "python_workers_mb": "python_workers_gb",
        }
        return {name: round(self.peak[key] / 1024, 3) for key, name in names.items()}

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            with contextlib.suppress(psutil.Error):
                self._sample(me)
            self._stop.wait(self.interval)

    def _sample(self, me: psutil.Process) -> None:
        mb = 1024 * 1024
        jvm = workers = worker_max = 0.0
        for child in me.children(recursive=True):
            try:
                rss = child.memory_info().rss / mb
                name = child.name()
            except psutil.Error:
                continue
            if name == "java":
                jvm += rss
            elif name.startswith("python"):
                workers += rss
                worker_max = max(worker_max, rss)
        for key, value in (
            ("driver_mb", me.memory_info().rss / mb),
            ("jvm_mb", jvm),
            ("python_workers_mb", workers),
            ("python_worker_max_mb", worker_max),
        ):
            self.peak[key] = round(max(self.peak[key], value), 1)


class CpuTimeline:
    """Samples the machine's CPU utilisation (every core: 100 is all of them busy) once a second in the
    background, so that each stage of an index run can be given the share of the cores it kept busy."""

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.samples: list[tuple[float, float]] = []  # (perf_counter at the sample's end, percent)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CpuTimeline:
        psutil.cpu_percent(interval=None)  # the first reading starts the clock
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append((time.perf_counter(), psutil.cpu_percent(interval=None)))


def stage_cpu(
    samples: list[tuple[float, float]], started: float, timings: dict[str, float]
) -> dict[str, float]:
    """The mean CPU utilisation of each stage of a run that started at ``started`` (perf_counter) and
    ran its stages one after another for ``timings`` seconds each, in order; a stage shorter than a
    sample gets none. A sample covers the second before it, so it is given to the stage it ends in."""
    out: dict[str, float] = {}
    begin = started
    for stage, seconds in timings.items():
        end = begin + seconds
        inside = [pct for at, pct in samples if begin < at <= end]
        if inside:
            out[stage] = round(sum(inside) / len(inside), 1)
        begin = end
    return out


def read_corpus(path: Path) -> list[dict]:
    with path.open() as lines:
        return [json.loads(line) for line in lines if line.strip()]


def copies(docs: list[dict], factor: int, out: Path) -> Path:
    """The corpus repeated ``factor`` times, each copy with new document ids."""
    with out.open("w") as f:
        for k in range(factor):
            for doc in docs:
                doc_id = f"{doc['doc_id']}#copy{k}" if k else doc["doc_id"]
                f.write(json.dumps({**doc, "doc_id": doc_id}) + "\n")
    return out


def chunk_texts(settings, docs: list[dict]) -> list[tuple[str, str]]:
    from lazygraph.ingest.chunking import chunk_id, chunk_text, get_encoding

    encoding = get_encoding(settings.chunking.encoding)
    out = []
    for doc in docs:
        cfg = settings.chunking
        pieces = chunk_text(encoding, doc["text"], cfg.chunk_tokens, cfg.overlap_tokens)
        out += [(chunk_id(doc["doc_id"], i, text), text) for i, (text, _) in enumerate(pieces)]
    return out


def vector_only(settings, docs: list[dict], out_dir: Path) -> float:
    """Chunk + embed + write one Delta table, in this process with every core (what a vector RAG pays)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from lazygraph.embed.embedder import get_embedder

    embedder = get_embedder(settings.embedding)
    embedder.encode(["warm-up"])  # model load is not indexing work
    started = time.perf_counter()
    chunks = chunk_texts(settings, docs)
    vectors = embedder.encode_for_storage([text for _, text in chunks])
    table = pa.table(
        {
            "chunk_id": [cid for cid, _ in chunks],
            "text": [text for _, text in chunks],
            "embedding": [row.tobytes() for row in vectors],
        }
    )
    write_deltalake(str(out_dir), table, mode="overwrite")
    return time.perf_counter() - started


def plain_spacy(settings, docs: list[dict], cores: int) -> float:
    """nlp.pipe over the same chunks with the same pipes and n_process = cores, noun phrases (found as
    ``concepts.noun_phrases`` says) and entities consumed."""
    from lazygraph.nlp.extract import load_pipeline, noun_phrases

    cfg = settings.concepts
    texts = [text for _, text in chunk_texts(settings, docs)]
    started = time.perf_counter()
    nlp = load_pipeline(cfg.spacy_model, cfg.use_entities, cfg.noun_phrases)
    found = 0
    for doc in nlp.pipe(texts, batch_size=64, n_process=cores):
        found += len(noun_phrases(doc, nlp)) + len(doc.ents)
    return time.perf_counter() - started


def full_index(settings, corpus: Path, index: Path) -> dict:
    from lazygraph.pipeline import build_index

    shutil.rmtree(index, ignore_errors=True)
    started = time.perf_counter()
    report = build_index(settings, str(corpus), str(index), append=False, console=Console(stderr=True))
    seconds = time.perf_counter() - started - report["timings"].get("spark", 0.0)
    return {
        "seconds": round(seconds, 2),
        "timings": report["timings"],
        "counts": report["counts"],
        "started": started,
    }


def scaling_runs(
    settings, docs: list[dict], work: Path, factors: list[int], known: dict | None = None
) -> dict:
    """Index time of each factor's copies of the corpus, and t(4x)/t(1x) when both are measured."""
    scaling = dict(known or {})
    for factor in factors:
        corpus = copies(docs, factor, work / f"corpus-{factor}x.jsonl")
        scaling[f"{factor}x"] = full_index(settings, corpus, work / f"index-{factor}x")["seconds"]
        print(json.dumps({"scaling": scaling}), file=sys.stderr, flush=True)
    if "1x" in scaling and "4x" in scaling:
        scaling["t4_over_t1"] = round(scaling["4x"] / scaling["1x"], 3)
    return scaling


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(prog="lazygraph bench index", description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--scaling", action="store_true", help="also index 2x and 4x copies of the corpus")
    parser.add_argument(
        "--scaling-only",
        default=None,
        metavar="FACTORS",
        help="only index these copies (e.g. 1,4) and print their times; no floor, no memory",
    )
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)

    from lazygraph.runtime.spark import get_spark

    cores = os.cpu_count() or 1
    work = args.workdir or Path(tempfile.mkdtemp(prefix="lazygraph-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    docs = read_corpus(args.input)
    result: dict = {
        "input": str(args.input),
        "documents": len(docs),
        "cores": cores,
        "use_entities": settings.concepts.use_entities,
    }
    started = time.perf_counter()
    get_spark(settings)
    result["spark_start_s"] = round(time.perf_counter() - started, 2)
    if args.scaling_only:
        result["scaling"] = scaling_runs(settings, docs, work, [int(f) for f in args.scaling_only.split(",")])
        json.dump(result, sys.stdout, indent=2)
        print()
        return
    with PeakMemory() as memory, CpuTimeline() as cpu:
        index = full_index(settings, args.input, work / "index-1x")
    result["index_s"] = index["seconds"]
    result["index_timings"] = index["timings"]
    # How busy each stage kept the machine's cores: a stage well under 100 leaves cores idle.
    result["index_stage_cpu_percent"] = stage_cpu(cpu.samples, index["started"], index["timings"])
    result["index_counts"] = index["counts"]
    result["peak_memory"] = memory.peak
    result["vector_only_s"] = round(vector_only(settings, docs, work / "vector-only"), 2)
    result["plain_spacy_s"] = round(plain_spacy(settings, docs, cores), 2)
    floor = result["vector_only_s"] + result["plain_spacy_s"]
    result["index_over_floor"] = round(result["index_s"] / floor, 3)
    result["index_over_vector_only"] = round(result["index_s"] / result["vector_only_s"], 3)
    nlp_stage = index["timings"].get("concepts", 0.0)
    result["nlp_stage_over_plain_spacy"] = round(nlp_stage / result["plain_spacy_s"], 3)
    # The scaling runs are long: show the ratios now, so an interrupted run still yields them.
    print(json.dumps(result), file=sys.stderr, flush=True)
    if args.scaling:
        result["scaling"] = scaling_runs(settings, docs, work, [2, 4], {"1x": index["seconds"]})
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0
