"""A batch job on a real two-node Ray cluster: a head and a second node, each a `ray start` of its own
on loopback (one CPU each), and the job entry point (`jobs/batch_job.py`, what `ray job submit` runs)
as a separate driver joining through RAY_ADDRESS. The query actors run the real query engine with the
real embedded LLM on a tiny index with real embeddings, at budget 4: one actor lands on each node, and
every answer reaches the results table with the node that produced it.

Every process the test starts is stopped by process group in the fixture's teardown, also on failure,
and the nodes keep their files in a temporary directory removed then. (`ray stop` is not used: it stops
every Ray on the machine, not only these.)
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fakes import TinyIndex

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).parent / "ray")
DOCS = [
    (
        "Harbor Lighthouse",
        "The Harbor Lighthouse was built in 1871 by the engineer Maria Velasco. "
        "It stands on the northern cliff of Port Allen and its lamp can be seen 30 kilometres out at sea.",
    ),
    (
        "Port Allen",
        "Port Allen is a fishing town on the Serra coast. Its economy depends on sardine fishing "
        "and a small ferry service to the islands.",
    ),
    (
        "Sourdough",
        "Sourdough bread is leavened by wild yeast and lactic acid bacteria kept in a starter "
        "that bakers feed with flour and water.",
    ),
    (
        "Maria Velasco",
        "Maria Velasco was a Spanish civil engineer known for coastal lighthouses and for the "
        "iron pier at Cadiz.",
    ),
]
QUESTIONS = {
    "lighthouse": "Who built the Harbor Lighthouse?",
    "economy": "What does the economy of Port Allen depend on?",
}
# Small answers, one thread per model: two actors share two cores.
CONFIG = """
ray: {query_actors: 2, actor_num_cpus: 1, max_in_flight_per_actor: 1, flush_every: 1}
query: {max_subqueries: 2, min_subqueries: 1, refine_max_tokens: 96, map_max_tokens: 160,
        answer_max_tokens: 96, max_chunks_per_map_group: 4}
llm: {relevance: {n_threads: 1}, synthesis: {n_threads: 1}}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_node(env: dict[str, str], temp_dir: Path, log: Path, *args: str) -> subprocess.Popen:
    """`ray start --block`: the node's processes live as long as this one, in its own process group.

    ``temp_dir`` keeps its sessions and its address file out of /tmp/ray: there, a stopped test cluster's
    address would be what every later ``ray.init()`` on the machine tries to join.
    """
    command = [
        RAY, "start", "--block", "--num-cpus=1", "--object-store-memory=100000000",
        "--node-ip-address=127.0.0.1", "--disable-usage-stats", f"--temp-dir={temp_dir}", *args,
    ]  # fmt: skip
    with log.open("w") as sink:
        return subprocess.Popen(
            command, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )


def wait_for_port(port: int, node: subprocess.Popen, log: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert node.poll() is None, f"`ray start --head` failed: {log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"the head node did not listen on port {port} in {timeout_s} s"
        time.sleep(0.5)


def stop_node(node: subprocess.Popen) -> None:
    """SIGTERM the `ray start` process (its raylet and workers share its fate), then SIGKILL its group."""
    if node.poll() is None:
        node.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            node.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(node.pid, signal.SIGKILL)
    node.wait(timeout=30)


# Run in a process of its own, so that this one never holds a Ray connection.
NODES_SCRIPT = """
import json, ray
ray.init(log_to_driver=False)
print(json.dumps([{"id": n["NodeID"], "resources": n["Resources"]} for n in ray.nodes() if n["Alive"]]))
"""


def node_ids_by_resource(env: dict[str, str], wanted: set[str], timeout_s: float = 180) -> dict[str, str]:
    """Wait until a live node offers each custom resource in ``wanted``; resource -> node id."""
    deadline = time.monotonic() + timeout_s
    while True:
        listed = subprocess.run(
            [sys.executable, "-c", NODES_SCRIPT], env=env, capture_output=True, text=True, timeout=120
        )
        assert listed.returncode == 0, listed.stderr[-3000:]
        nodes = json.loads(listed.stdout.strip().splitlines()[-1])
        found = {r: n["id"] for n in nodes for r in wanted if r in n["resources"]}
        if set(found) == wanted:
            return found
        assert time.monotonic() < deadline, f"the cluster has only {found} after {timeout_s} s"
        time.sleep(2)


@pytest.fixture(scope="module")
def two_node_cluster(tmp_path_factory) -> Iterator[dict[str, Any]]:
    port = free_port()
    address = f"127.0.0.1:{port}"
    # Token authentication, with a token of this cluster's own: the nodes and every driver use it.
    work = tmp_path_factory.mktemp("ray-cluster")
    # Short: Ray's socket paths under it must stay within the 107 characters a Unix socket allows.
    temp_dir = Path(tempfile.mkdtemp(prefix="lgray-"))
    token = work / "token"
    token.write_text(secrets.token_hex(32))
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token),
        "RAY_USAGE_STATS_ENABLED": "0",
        "OMP_WAIT_POLICY": "passive",
    }
    head_args = ("--head", f"--port={port}", "--include-dashboard=false", '--resources={"node_a": 1}')
    nodes = [start_node(env, temp_dir, work / "head.log", *head_args)]
    try:
        wait_for_port(port, nodes[0], work / "head.log")  # the second node joins once the head listens
        node_b = (f"--address={address}", '--resources={"node_b": 1}')
        nodes.append(start_node(env, temp_dir, work / "node_b.log", *node_b))
        drivers = env | {"RAY_ADDRESS": address}  # as `ray job submit` sets it for the entry point
        yield {"env": drivers, "nodes": node_ids_by_resource(drivers, {"node_a", "node_b"})}
    finally:
        for node in reversed(nodes):
            stop_node(node)
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory, embedder) -> str:
    index = TinyIndex(
        texts=[t for _, t in DOCS], titles=[t for t, _ in DOCS], doc_ids=[f"doc{i}" for i in range(4)]
    )
    index.communities = {"coast": (0, None), "other": (0, None)}
    index.memberships = [(0, 0, "coast"), (1, 0, "coast"), (3, 0, "coast"), (2, 0, "other")]
    index.concepts = {"lighthouse": [0, 3], "port allen": [0, 1], "maria velasco": [0, 3]}
    index.edges = [("lighthouse", "port allen"), ("lighthouse", "maria velasco")]
    return index.write_delta(tmp_path_factory.mktemp("index"), embedder)


def run_job(
    env: dict[str, str], index: str, queries: Path, config: Path, out: Path, method: str = "lazy"
) -> dict[str, Any]:
    command = [
        sys.executable, str(ROOT / "jobs" / "batch_job.py"), "--index", index, "--queries", str(queries),
        "--out", str(out), "--budget", "4", "--config", str(config), "--method", method,
    ]  # fmt: skip
    job = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert job.returncode == 0, job.stderr[-4000:]
    assert "LLM cache hit rate" in job.stderr, "the summary is printed"
    return json.loads(job.stdout)


def test_a_batch_job_runs_query_actors_on_both_nodes(two_node_cluster, tiny_index, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        "".join(json.dumps({"query_id": k, "question": q}) + "\n" for k, q in QUESTIONS.items())
    )
    config = tmp_path / "batch.yaml"
    config.write_text(CONFIG)
    env = two_node_cluster["env"]
    report = run_job(env, tiny_index, queries, config, tmp_path / "answers")

    both = set(two_node_cluster["nodes"].values())
    assert (report["answered"], report["errors"], report["actors"]) == (2, 0, 2)
    assert {p["node_id"] for p in report["actor_placements"]} == both, "one query actor on each node"
    assert set(report["nodes"]) == both and sum(report["nodes"].values()) == 2
    assert report["llm_tokens_per_answer"] > 0 and report["llm_calls"] > 0

    rows = DeltaTable(str(tmp_path / "answers")).to_pyarrow_table().to_pylist()
    assert sorted(r["query_id"] for r in rows) == sorted(QUESTIONS)
    records = {r["query_id"]: json.loads(r["result_json"]) for r in rows if r["status"] == "ok"}
    assert set(records) == set(QUESTIONS), [r["error"] for r in rows]
    assert {rec["serving"]["node_id"] for rec in records.values()} == both
    for record in records.values():
        assert "[Data: Sources (" in record["answer"] and record["cost"]["relevance_tests"] <= 4
    # The lighthouse paragraph was judged relevant and used, as in a query on one machine.
    assert "doc0" in records["lighthouse"]["context_doc_ids"]

    # The same questions again, into another table: both actors wrote their verdicts and completions
    # to the index's LLM cache, so the new actors find them there, whichever node asked first.
    again = run_job(env, tiny_index, queries, config, tmp_path / "answers-again")
    assert again["answered"] == 2 and again["llm_cache_hits"] > 0
    assert again["llm_cache_hit_rate"] > report["llm_cache_hit_rate"]
    assert again["llm_tokens_per_answer"] == report["llm_tokens_per_answer"], "cached tokens count too"


def test_a_batch_over_the_serving_store_opens_it_on_both_nodes(
    two_node_cluster, tiny_index, embedder, tmp_path: Path
) -> None:
    """With ``query.index_source: store`` the driver loads no snapshot and each actor opens the store
    itself, on its own node; the vector method answers from it, and so does the lazy method, each actor
    reading its queries' working sets."""
    from deltalake import DeltaTable

    from lazygraph.serving import build_store
    from lazygraph.settings import load_settings

    build_store(tiny_index, load_settings(), encode=embedder.encode)
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        "".join(json.dumps({"query_id": k, "question": q}) + "\n" for k, q in QUESTIONS.items())
    )
    config = tmp_path / "batch.yaml"
    config.write_text(CONFIG.replace("query: {", "query: {index_source: store, "))
    env = two_node_cluster["env"]
    report = run_job(env, tiny_index, queries, config, tmp_path / "answers", method="vector")

    both = set(two_node_cluster["nodes"].values())
    assert report["index_source"] == "store"
    assert (report["answered"], report["errors"], report["actors"]) == (2, 0, 2)
    assert {p["node_id"] for p in report["actor_placements"]} == both, "one query actor on each node"
    rows = DeltaTable(str(tmp_path / "answers")).to_pyarrow_table().to_pylist()
    records = {r["query_id"]: json.loads(r["result_json"]) for r in rows if r["status"] == "ok"}
    assert set(records) == set(QUESTIONS), [r["error"] for r in rows]
    assert {rec["serving"]["node_id"] for rec in records.values()} == both
    assert all(rec["index_source"] == "store" for rec in records.values())
    assert "doc0" in records["lighthouse"]["context_doc_ids"]  # the store's nearest chunks

    lazy = run_job(env, tiny_index, queries, config, tmp_path / "lazy-answers")
    assert lazy["index_source"] == "store"
    assert (lazy["answered"], lazy["errors"], lazy["actors"]) == (2, 0, 2)
    rows = DeltaTable(str(tmp_path / "lazy-answers")).to_pyarrow_table().to_pylist()
    records = {r["query_id"]: json.loads(r["result_json"]) for r in rows if r["status"] == "ok"}
    assert set(records) == set(QUESTIONS), [r["error"] for r in rows]
    assert all(rec["index_source"] == "store" and rec["method"] == "lazy" for rec in records.values())
    assert {rec["serving"]["node_id"] for rec in records.values()} == both
    assert all(rec["context_chunk_ids"] for rec in records.values())
