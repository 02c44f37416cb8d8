"""An index built in and queried from a real S3-compatible server: moto's server, a process of its own on
loopback that checks request signatures. `lazygraph index` reads the corpus from the bucket and writes the
index there through Spark's S3A connector (hadoop-aws and the AWS SDK modules, fetched and verified on
first use), and `lazygraph query` reads the snapshot back with deltalake and pyarrow from `s3://` and
appends its LLM cache beside it. Wrong credentials and a missing bucket are one error line that names
the location, never the secret.

The server starts with authentication on after its first three requests, which create the user, its key
and its policy; every later request must be signed with that key. The server is killed by process group
in the fixture's teardown, also on failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import SecretStr

from lazygraph.demo_data import sample_corpus_path
from lazygraph.settings import StorageSettings

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent
BUCKET = "lazygraph-e2e"
N_DOCS = 12
QUESTION = "What happened to the test turbine after the storm?"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, server: subprocess.Popen, log: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert server.poll() is None, f"moto_server exited: {log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"moto_server did not listen on port {port} in {timeout_s} s"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    import boto3

    work = tmp_path_factory.mktemp("s3")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = work / "moto.log"
    # The user, its key and its policy are the three requests made without credentials.
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "3"}
    with log.open("w") as sink:
        server = subprocess.Popen(
            [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
            env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        wait_for_port(port, server, log)
        client_args = {"endpoint_url": endpoint, "region_name": "us-east-1"}
        iam = boto3.client("iam", aws_access_key_id="setup", aws_secret_access_key="setup", **client_args)
        iam.create_user(UserName="indexer")
        key = iam.create_access_key(UserName="indexer")["AccessKey"]
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
        }
        iam.put_user_policy(UserName="indexer", PolicyName="s3", PolicyDocument=json.dumps(policy))
        client = boto3.client(
            "s3",
            aws_access_key_id=key["AccessKeyId"],
            aws_secret_access_key=key["SecretAccessKey"],
            **client_args,
        )
        client.create_bucket(Bucket=BUCKET)
        lines = sample_corpus_path().read_text(encoding="utf-8").splitlines(keepends=True)[:N_DOCS]
        client.put_object(Bucket=BUCKET, Key="corpus.jsonl", Body="".join(lines).encode("utf-8"))
        yield {
            "endpoint": endpoint,
            "key_id": key["AccessKeyId"],
            "secret": key["SecretAccessKey"],
            "client": client,
            "work": work,
        }
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)


def lazygraph(s3: dict[str, Any], *args: str, secret: str | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own, in an empty working directory, with the storage settings in the
    environment as a deployment sets them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LAZYGRAPH_STORAGE__"))}
    env.update(
        LAZYGRAPH_STORAGE__S3_ENDPOINT=s3["endpoint"],
        LAZYGRAPH_STORAGE__S3_REGION="us-east-1",
        LAZYGRAPH_STORAGE__S3_PATH_STYLE_ACCESS="true",
        LAZYGRAPH_STORAGE__S3_ACCESS_KEY_ID=s3["key_id"],
        LAZYGRAPH_STORAGE__S3_SECRET_ACCESS_KEY=secret or s3["secret"],
        LAZYGRAPH_SPARK__MASTER="local[2]",
        LAZYGRAPH_SPARK__SHUFFLE_PARTITIONS="2",
        # One subquery and a short answer: the query's part here is reading the bucket, not the LLM.
        LAZYGRAPH_QUERY__MAX_SUBQUERIES="1",
        LAZYGRAPH_QUERY__MIN_SUBQUERIES="1",
        LAZYGRAPH_QUERY__ANSWER_MAX_TOKENS="96",
        OMP_WAIT_POLICY="passive",
    )
    return subprocess.run(
        [str(BIN / "lazygraph"), *args], env=env, cwd=s3["work"], capture_output=True, text=True, timeout=1500
    )


def storage(s3: dict[str, Any]) -> StorageSettings:
    return StorageSettings(
        s3_endpoint=s3["endpoint"],
        s3_region="us-east-1",
        s3_path_style_access=True,
        s3_access_key_id=SecretStr(s3["key_id"]),
        s3_secret_access_key=SecretStr(s3["secret"]),
    )


def keys(s3: dict[str, Any], prefix: str) -> list[str]:
    pages = s3["client"].get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one error line a failed command prints (Spark's own log lines may surround it)."""
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    return errors[0]


@pytest.fixture(scope="module")
def s3_index(s3: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    built = lazygraph(
        s3, "index", "--input", f"s3a://{BUCKET}/corpus.jsonl", "--index", f"s3a://{BUCKET}/index"
    )
    assert built.returncode == 0, built.stderr[-4000:]
    print(f"\nindex of {N_DOCS} documents on S3: {time.perf_counter() - started:.1f} s")
    return json.loads(built.stdout)


def test_the_index_is_written_to_the_bucket(s3: dict[str, Any], s3_index: dict[str, Any]) -> None:
    assert s3_index["index"] == f"s3a://{BUCKET}/index"
    assert s3_index["counts"]["documents"] == N_DOCS and s3_index["counts"]["chunks"] >= N_DOCS
    assert s3_index["counts"]["concepts"] > 0 and s3_index["counts"]["communities"] > 0
    stored = keys(s3, "index/")
    for table in ("documents", "chunks", "concepts", "edges", "communities", "chunk_embeddings", "manifest"):
        assert any(k.startswith(f"index/{table}/_delta_log/") for k in stored), table
        assert any(k.startswith(f"index/{table}/") and k.endswith(".parquet") for k in stored), table
    # The serving store was built by the run, in the bucket, and opens from it with the chunks table's rows.
    assert s3_index["serving_store"]["status"] == "built", s3_index["serving_store"]
    assert any(k.startswith("index/serving_store/v-") and k.endswith("/store.json") for k in stored)
    from lazygraph.serving import ServingStore
    from lazygraph.settings import Settings

    store = ServingStore.open(f"s3://{BUCKET}/index", Settings(storage=storage(s3)))
    assert store.n_chunks == s3_index["counts"]["chunks"]
    (nearest,) = store.nearest_chunks(np.ones(store.meta["dimension"], np.float32), 1)
    assert [c.chunk_id for c in store.chunks([nearest.id])] == [nearest.id]
    # Nothing was written beside the working directory instead.
    assert not (s3["work"] / "work").exists()


def test_a_query_reads_the_snapshot_from_the_bucket(s3: dict[str, Any], s3_index: dict[str, Any]) -> None:
    from lazygraph.tables import arrow_dataset, open_delta

    asked = lazygraph(s3, "query", "--index", f"s3://{BUCKET}/index", "--budget", "2", "--json", QUESTION)
    assert asked.returncode == 0, asked.stderr[-4000:]
    answer = json.loads(asked.stdout)
    assert answer["answer"].strip() and answer["cost"]["relevance_tests"] <= 2
    chunks = open_delta(f"s3://{BUCKET}/index/chunks", settings=storage(s3))
    assert chunks is not None
    chunk_ids = set(
        arrow_dataset(chunks, settings=storage(s3)).to_table(columns=["chunk_id"])["chunk_id"].to_pylist()
    )
    assert len(chunk_ids) == s3_index["counts"]["chunks"]
    assert set(answer["context_chunk_ids"]) <= chunk_ids
    # The relevance verdicts went into the LLM cache beside the index, in the bucket.
    assert any(k.startswith("index/llm_cache/_delta_log/") for k in keys(s3, "index/llm_cache/"))


def test_wrong_credentials_are_one_error_naming_the_location(
    s3: dict[str, Any], s3_index: dict[str, Any]
) -> None:
    wrong = "not-the-secret-" + s3["secret"][::-1]
    index = lazygraph(s3, "index", "--input", f"s3a://{BUCKET}/corpus.jsonl", "--index", f"s3a://{BUCKET}/other",
                      secret=wrong)  # fmt: skip
    line = error_line(index)
    assert f"s3a://{BUCKET}/" in line and re.search(r"signature|credential|access", line, re.I), line
    query = lazygraph(s3, "query", "--index", f"s3://{BUCKET}/index", QUESTION, secret=wrong)
    line = error_line(query)
    assert f"{BUCKET}/index" in line, line
    for result in (index, query):
        assert (
            wrong not in result.stdout + result.stderr and s3["secret"] not in result.stdout + result.stderr
        )


def test_a_missing_bucket_is_one_error_naming_the_location(
    s3: dict[str, Any], s3_index: dict[str, Any]
) -> None:
    index = lazygraph(
        s3, "index", "--input", "s3a://no-such-bucket/corpus.jsonl", "--index", f"s3a://{BUCKET}/x"
    )
    line = error_line(index)
    assert "s3a://no-such-bucket/corpus.jsonl" in line and "bucket does not exist" in line, line
    query = lazygraph(s3, "query", "--index", "s3://no-such-bucket/index", QUESTION)
    line = error_line(query)
    assert "no-such-bucket/index" in line and "NoSuchBucket" in line, line
