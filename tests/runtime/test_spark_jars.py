"""Which jars a Spark session gets: Delta Lake's always, the S3A connector's only for a location on S3,
pinned to pyspark's Hadoop and never duplicating what pyspark ships; and what spark-submit gave a driver
(its master, its --jars) is kept when lazygraph builds the session."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pyspark
import pytest

from lazygraph.errors import JarResolutionError, SetupError
from lazygraph.runtime import spark as spark_runtime
from lazygraph.runtime.jars import DELTA_JARS, HADOOP_AWS_VERSION, S3A_JARS, MavenArtifact, resolve_jars
from lazygraph.settings import load_settings

PYSPARK_JARS = Path(pyspark.__file__).parent / "jars"


def _settings(tmp_path: Path, **storage: str):
    return load_settings(
        spark={"jars_dir": str(tmp_path / "jars"), "maven_repository": "file:///nonexistent"}, storage=storage
    )


def _with_delta_jars(tmp_path: Path) -> None:
    (tmp_path / "jars").mkdir(exist_ok=True)
    for artifact in DELTA_JARS:
        (tmp_path / "jars" / artifact.file_name).write_bytes(b"PK")


def test_hadoop_aws_matches_the_hadoop_inside_pyspark() -> None:
    [client_api] = PYSPARK_JARS.glob("hadoop-client-api-*.jar")
    assert client_api.name == f"hadoop-client-api-{HADOOP_AWS_VERSION}.jar"
    assert S3A_JARS[0] == MavenArtifact("org.apache.hadoop", "hadoop-aws", HADOOP_AWS_VERSION)


# What the AWS SDK modules depend on and pyspark ships already (in other versions): left out of S3A_JARS.
SHIPPED_BY_PYSPARK = (
    "netty-buffer", "netty-codec", "netty-codec-http", "netty-codec-http2", "netty-common", "netty-handler",
    "netty-resolver", "netty-transport", "netty-transport-classes-epoll",
    "netty-transport-native-unix-common", "httpclient", "httpcore", "commons-codec", "slf4j-api",
)  # fmt: skip


def test_the_s3a_jars_add_nothing_pyspark_already_ships() -> None:
    shipped = {re.sub(r"-\d[\w.-]*\.jar$", "", jar.name) for jar in PYSPARK_JARS.glob("*.jar")}
    assert set(SHIPPED_BY_PYSPARK) <= shipped
    assert not {a.artifact for a in S3A_JARS} & set(SHIPPED_BY_PYSPARK)
    assert "bundle" not in {a.artifact for a in S3A_JARS}  # the 558 MB jar of every AWS service
    sdk = {a.version for a in S3A_JARS if a.group == "software.amazon.awssdk"}
    assert len(sdk) == 1, "every AWS SDK module at one version"


@pytest.mark.parametrize(
    ("locations", "needed"),
    [
        (["s3a://bucket/corpus.jsonl", "/tmp/index"], True),
        (["/tmp/corpus.jsonl", "s3://bucket/index"], True),
        (["/tmp/corpus.jsonl", "file:///tmp/index"], False),
        (["gs://bucket/corpus.jsonl", "abfss://c@acct.dfs.core.windows.net/index"], False),
    ],
)
def test_the_s3a_connector_is_needed_only_for_s3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, locations: list[str], needed: bool
) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    assert spark_runtime.needs_s3a(_settings(tmp_path), locations) is needed


def test_a_default_index_on_s3_needs_the_connector(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    assert spark_runtime.needs_s3a(_settings(tmp_path, index="s3a://bucket/index"), [])


def test_a_checkpoint_directory_on_s3_needs_the_connector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reliable checkpoints are written by the executors to spark.checkpoint_dir, a bucket on a cluster."""
    monkeypatch.delenv("SPARK_HOME", raising=False)
    settings = _settings(tmp_path).model_copy(deep=True)
    settings.spark.checkpoint_dir = "s3a://bucket/checkpoints"
    assert spark_runtime.needs_s3a(settings, ["/tmp/corpus.jsonl", "/tmp/index"])


def test_a_spark_that_ships_hadoop_aws_gets_no_second_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spark_home = tmp_path / "spark"
    (spark_home / "jars").mkdir(parents=True)
    (spark_home / "jars" / f"hadoop-aws-{HADOOP_AWS_VERSION}.jar").write_bytes(b"PK")
    monkeypatch.setenv("SPARK_HOME", str(spark_home))
    assert not spark_runtime.needs_s3a(_settings(tmp_path), ["s3a://bucket/index"])


def test_local_runs_never_fetch_the_s3a_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    _with_delta_jars(tmp_path)
    # The repository does not exist: any fetch would fail.
    jars = spark_runtime.spark_jars(_settings(tmp_path), locations=["/tmp/corpus.jsonl", "/tmp/index"])
    assert [j.name for j in jars] == [a.file_name for a in DELTA_JARS]
    assert not (tmp_path / "jars" / "s3a").exists()


def test_an_s3_location_brings_the_cached_s3a_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    _with_delta_jars(tmp_path)
    settings = _settings(tmp_path)
    with pytest.raises(SetupError, match=r"lazygraph setup --s3a"):
        spark_runtime.spark_jars(settings, allow_download=False, locations=["s3a://bucket/index"])
    (tmp_path / "jars" / "s3a").mkdir()
    for artifact in S3A_JARS:
        (tmp_path / "jars" / "s3a" / artifact.file_name).write_bytes(b"PK")
    jars = spark_runtime.spark_jars(settings, allow_download=False, locations=["s3a://bucket/index"])
    assert [j.name for j in jars] == [a.file_name for a in (*DELTA_JARS, *S3A_JARS)]


def _repository(tmp_path: Path, artifacts: list[MavenArtifact], corrupt: str | None = None) -> str:
    for artifact in artifacts:
        folder = tmp_path / "repo" / artifact.group.replace(".", "/") / artifact.artifact / artifact.version
        folder.mkdir(parents=True)
        payload = f"PK {artifact.artifact}".encode()
        (folder / artifact.file_name).write_bytes(payload)
        sha1 = "0" * 40 if artifact.artifact == corrupt else hashlib.sha1(payload).hexdigest()
        (folder / (artifact.file_name + ".sha1")).write_text(f"{sha1}  {artifact.file_name}\n")
    return (tmp_path / "repo").as_uri()


def test_many_jars_are_fetched_together_each_verified(tmp_path: Path) -> None:
    artifacts = [MavenArtifact("org.example", f"part-{i}", "1.0") for i in range(12)]
    jars = resolve_jars(tmp_path / "jars", _repository(tmp_path, artifacts), tuple(artifacts))
    assert [j.read_bytes() for j in jars] == [f"PK part-{i}".encode() for i in range(12)]


def test_one_corrupt_jar_fails_the_set_and_is_never_written(tmp_path: Path) -> None:
    artifacts = [MavenArtifact("org.example", f"part-{i}", "1.0") for i in range(6)]
    repo = _repository(tmp_path, artifacts, corrupt="part-3")
    with pytest.raises(JarResolutionError, match="part-3-1.0.jar .*SHA-1"):
        resolve_jars(tmp_path / "jars", repo, tuple(artifacts))
    written = {p.name for p in (tmp_path / "jars").iterdir()}
    assert "part-3-1.0.jar" not in written and not any(n.endswith(".partial") for n in written)


def test_spark_submits_master_wins_over_the_default_but_not_over_a_chosen_one(tmp_path: Path) -> None:
    submitted = {"spark.master": "spark://head:7077"}
    assert spark_runtime._master(load_settings(), submitted) == "spark://head:7077"
    chosen = load_settings(spark={"master": "local[2]"})
    assert spark_runtime._master(chosen, submitted) == "local[2]"
    assert spark_runtime._master(load_settings(), {}) == load_settings().spark.master


def test_spark_submits_jars_are_kept_and_each_jar_given_once() -> None:
    merged = spark_runtime._merge_jars(
        "/opt/a/delta-storage-4.4.0.jar,/opt/x.jar", "/c/delta-storage-4.4.0.jar,/c/y.jar"
    )
    assert merged.split(",") == ["/opt/a/delta-storage-4.4.0.jar", "/opt/x.jar", "/c/y.jar"]
