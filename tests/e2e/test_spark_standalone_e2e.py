"""The index job on a real Spark standalone cluster: a master and two workers (one core, 1 GB each), each
a JVM of its own on loopback started from the pyspark installation (`spark-class …Master`, `…Worker`),
and the job submitted as users submit it (`spark-submit --master spark://… jobs/index_job.py`, with the
Delta jars as `--jars`). The index it writes must equal the `local[2]` index of the same input built by
`lazygraph index`: row counts of every table, the concepts, the edges with their weights, and the
community assignment of every level up to the communities' labels.

The driver runs in a working directory of its own and each worker in another (`--work-dir`), so nothing
may lean on a shared working directory: the executors load spaCy and the embedding model from the
installed packages. Every process the test starts is killed by process group in the fixture's teardown,
also on failure (an executor is a child of its worker and shares its group).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.spark_cluster import BIN, master_state, standalone_cluster

from lazygraph.demo_data import sample_corpus_path

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
# The first documents of the sample: enough for concepts, edges and three community levels, small enough
# that two builds stay within a few minutes on two cores.
N_DOCS = 12
COMPARED_TABLES = (
    "documents", "chunks", "concepts", "mentions", "edges", "communities", "concept_communities",
    "chunk_communities", "chunk_embeddings", "chunk_terms",
)  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A master and two workers; yields the master URL, its web UI port, the environment and the folders."""
    with standalone_cluster(tmp_path_factory.mktemp("standalone")) as running:
        yield running


def corpus_slice(path: Path) -> Path:
    lines = sample_corpus_path().read_text(encoding="utf-8").splitlines(keepends=True)[:N_DOCS]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def delta_jars() -> list[str]:
    from lazygraph.runtime.spark import spark_jars
    from lazygraph.settings import load_settings

    return [str(jar) for jar in spark_jars(load_settings())]


def report_of(stdout: str) -> dict[str, Any]:
    """The job's run report: its one JSON line, whatever else spark-submit printed before it."""
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    assert lines, f"no run report in the job's output: {stdout[-2000:]}"
    return json.loads(lines[-1])


def read_table(index: Path, name: str) -> list[dict[str, Any]]:
    from lazygraph.tables import arrow_dataset, open_delta

    table = open_delta(str(index / name))
    assert table is not None, f"{index} has no {name} table"
    return arrow_dataset(table).to_table().to_pylist()


def partitions(rows: list[dict[str, Any]]) -> dict[int, set[frozenset[str]]]:
    """Each level's communities as sets of concepts: equal partitions compare equal whatever the labels."""
    members: dict[tuple[int, str], set[str]] = {}
    for row in rows:
        members.setdefault((row["level"], row["community_id"]), set()).add(row["concept_id"])
    levels: dict[int, set[frozenset[str]]] = {}
    for (level, _), concepts in members.items():
        levels.setdefault(level, set()).add(frozenset(concepts))
    return levels


@pytest.fixture(scope="module")
def indexes(cluster: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("indexes")
    corpus = corpus_slice(work / "corpus.jsonl")
    # The driver's working directory is neither the checkout nor a worker's: the job gets absolute paths.
    driver_dir = work / "driver"
    driver_dir.mkdir()
    submit = [
        str(BIN / "spark-submit"), "--master", cluster["url"], "--deploy-mode", "client",
        "--driver-memory", "1g", "--executor-memory", "768m",
        "--conf", "spark.executor.cores=1", "--conf", "spark.cores.max=2",
        "--jars", ",".join(delta_jars()),
        str(ROOT / "jobs" / "index_job.py"), "--input", str(corpus), "--index", str(work / "standalone"),
    ]  # fmt: skip
    started = time.perf_counter()
    on_cluster = subprocess.run(
        submit, env=cluster["env"], cwd=driver_dir, capture_output=True, text=True, timeout=1500
    )
    cluster_s = time.perf_counter() - started
    assert on_cluster.returncode == 0, on_cluster.stderr[-4000:]

    local_env = {**cluster["env"], "LAZYGRAPH_SPARK__MASTER": "local[2]"}
    started = time.perf_counter()
    local = subprocess.run(
        [str(BIN / "lazygraph"), "index", "--input", str(corpus), "--index", str(work / "local")],
        env=local_env, cwd=driver_dir, capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    local_s = time.perf_counter() - started
    assert local.returncode == 0, local.stderr[-4000:]
    timings = {
        "documents": N_DOCS,
        "standalone_2x1_core_s": round(cluster_s, 1),
        "local_2_s": round(local_s, 1),
    }
    print(f"\nindex times (tiny input): {json.dumps(timings)}")
    return {
        "work": work,
        "standalone": work / "standalone",
        "local": work / "local",
        "report": report_of(on_cluster.stdout),
        "local_report": json.loads(local.stdout),
        "timings": timings,
    }


def test_the_job_ran_on_both_workers(cluster: dict[str, Any], indexes: dict[str, Any]) -> None:
    state = master_state(cluster["ui_port"])
    assert [app["name"] for app in state.get("completedapps", [])] == ["lazygraph"], state
    # Each worker started an executor for the application, in a folder of its own work directory.
    for worker_dir in cluster["worker_dirs"]:
        assert list(worker_dir.glob("app-*/*/stderr")), f"no executor ran in {worker_dir}"
    assert indexes["report"]["counts"]["documents"] == N_DOCS


def test_the_cluster_index_equals_the_local_index(indexes: dict[str, Any]) -> None:
    assert indexes["report"]["counts"] == indexes["local_report"]["counts"]
    cluster_tables = {name: read_table(indexes["standalone"], name) for name in COMPARED_TABLES}
    local_tables = {name: read_table(indexes["local"], name) for name in COMPARED_TABLES}
    for name in COMPARED_TABLES:
        assert len(cluster_tables[name]) == len(local_tables[name]), name
        assert cluster_tables[name], f"the {name} table is empty"

    def concepts(rows: list[dict[str, Any]]) -> set[tuple]:
        return {(r["concept_id"], r["name"], r["frequency"], r["degree"], r["kept"]) for r in rows}

    assert concepts(cluster_tables["concepts"]) == concepts(local_tables["concepts"])

    def edges(rows: list[dict[str, Any]]) -> set[tuple]:
        return {(r["src"], r["dst"], r["cooccurrence"], round(r["weight"], 9), r["kept"]) for r in rows}

    assert edges(cluster_tables["edges"]) == edges(local_tables["edges"])
    assert {r["chunk_id"] for r in cluster_tables["chunks"]} == {
        r["chunk_id"] for r in local_tables["chunks"]
    }
    cluster_levels = partitions(cluster_tables["concept_communities"])
    assert len(cluster_levels) >= 2, cluster_levels.keys()
    assert cluster_levels == partitions(local_tables["concept_communities"])
