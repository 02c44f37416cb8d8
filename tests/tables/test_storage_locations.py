"""Locations as URIs, and one set of storage settings for Spark, deltalake and pyarrow (no network)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from lazygraph import manifest, tables
from lazygraph.cli import app
from lazygraph.errors import ConfigError, InputError
from lazygraph.runtime import storage
from lazygraph.runtime.spark import session_conf
from lazygraph.settings import Settings, StorageSettings, load_settings
from lazygraph.tables import results

SECRET = "wJalrXUtnFEMI-not-a-real-key"

MINIO_FIELDS: dict[str, Any] = {
    "s3_endpoint": "http://minio.storage:9000",
    "s3_region": "eu-west-1",
    "s3_access_key_id": "AKIDEXAMPLE",
    "s3_secret_access_key": SECRET,
    "s3_path_style_access": True,
    "hadoop_conf": {"fs.s3a.connection.maximum": "64"},
    "delta_storage_options": {"aws_conditional_put": "etag"},
}
MINIO = StorageSettings(**MINIO_FIELDS)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("LAZYGRAPH_") and name != "LAZYGRAPH_HOME":
            monkeypatch.delenv(name, raising=False)


# ---- normalisation and scheme mapping -------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "canonical", "for_spark", "for_delta"),
    [
        ("s3a://bucket/idx/", "s3a://bucket/idx", "s3a://bucket/idx", "s3://bucket/idx"),
        ("s3://bucket/idx", "s3a://bucket/idx", "s3a://bucket/idx", "s3://bucket/idx"),
        ("S3://Bucket/idx", "s3a://Bucket/idx", "s3a://Bucket/idx", "s3://Bucket/idx"),
        (
            "abfss://corpus@acct.dfs.core.windows.net/idx",
            "abfss://corpus@acct.dfs.core.windows.net/idx",
            "abfss://corpus@acct.dfs.core.windows.net/idx",
            "abfss://corpus@acct.dfs.core.windows.net/idx",
        ),
        ("gs://bucket/idx", "gs://bucket/idx", "gs://bucket/idx", "gs://bucket/idx"),
        ("hdfs://nn:8020/idx", "hdfs://nn:8020/idx", "hdfs://nn:8020/idx", "hdfs://nn:8020/idx"),
        ("hdfs:///idx", "hdfs:///idx", "hdfs:///idx", "hdfs:///idx"),
    ],
)
def test_remote_locations_keep_their_place_and_map_per_client(
    given: str, canonical: str, for_spark: str, for_delta: str
) -> None:
    assert storage.normalise(given) == canonical
    assert tables.normalise_index_uri(given) == canonical
    assert storage.spark_uri(canonical) == for_spark
    assert storage.delta_uri(canonical) == for_delta
    assert not storage.is_local(canonical) and storage.local_path(canonical) is None


def test_s3_means_s3a_for_spark_even_before_normalising() -> None:
    assert storage.spark_uri("s3://bucket/x") == "s3a://bucket/x"
    assert storage.delta_uri("s3a://bucket/x") == "s3://bucket/x"


@pytest.mark.parametrize(
    "given",
    ["{tmp}/idx", "{tmp}/idx/", "file://{tmp}/idx", "file:{tmp}/idx", "file://localhost{tmp}/idx"],
)
def test_local_forms_become_one_absolute_file_uri(tmp_path: Path, given: str) -> None:
    uri = storage.normalise(given.format(tmp=tmp_path))
    assert uri == (tmp_path / "idx").as_uri()
    assert storage.local_path(uri) == str(tmp_path / "idx")
    assert storage.delta_uri(uri) == str(tmp_path / "idx")
    assert storage.spark_uri(uri) == uri


def test_relative_paths_resolve_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert storage.normalise("file://./work/index") == (tmp_path / "work" / "index").as_uri()
    assert storage.normalise("work/index") == (tmp_path / "work" / "index").as_uri()
    assert storage.normalise("a dir/idx") == (tmp_path / "a dir" / "idx").as_uri()
    assert storage.local_path(storage.normalise("a dir/idx")) == str(tmp_path / "a dir" / "idx")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("ftp://host/corpus", "unsupported scheme ftp://"),
        ("wasbs://c@acct.blob.core.windows.net/x", "unsupported scheme wasbs://"),
        ("http://bucket/x", "unsupported scheme http://"),
        ("s3a:/bucket/x", "names no bucket"),
        ("s3a:///x", "names no bucket"),
        ("abfss://container/x", "CONTAINER@ACCOUNT"),
        ("file://otherhost/x", "names the host otherhost"),
        ("", "empty location"),
    ],
)
def test_an_unusable_location_is_one_clear_error(given: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as caught:
        storage.normalise(given)
    assert "\n" not in str(caught.value)
    if "unsupported" in message:
        assert "s3a://" in str(caught.value) and "hdfs://" in str(caught.value), "says what to give instead"


def test_an_unsupported_default_index_is_refused_when_settings_load() -> None:
    with pytest.raises(ConfigError, match=r"storage.index: .*unsupported scheme ftp://"):
        load_settings(storage={"index": "ftp://host/idx"})


# ---- one set of settings, every client ---------------------------------------------------------------
def test_spark_gets_the_hadoop_keys_and_deltalake_the_storage_options_from_the_same_settings() -> None:
    settings = Settings(storage=MINIO, spark={"conf": {"spark.hadoop.fs.s3a.connection.maximum": "96"}})
    conf = session_conf(settings, [Path("/jars/delta.jar")])
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://minio.storage:9000"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert conf["spark.hadoop.fs.s3a.access.key"] == "AKIDEXAMPLE"
    assert conf["spark.hadoop.fs.s3a.secret.key"] == SECRET
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("SimpleAWSCredentialsProvider")
    assert conf["spark.hadoop.fs.s3a.connection.maximum"] == "96", "spark.conf is applied last and wins"
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"

    options = tables.storage_options(settings, "s3a://bucket/idx/chunks")
    assert options == {
        "AWS_ENDPOINT_URL": "http://minio.storage:9000",
        "AWS_ALLOW_HTTP": "true",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "aws_conditional_put": "etag",
    }
    assert tables.storage_options(settings.storage, "s3://bucket/idx") == options
    assert tables.storage_options(settings, (Path.cwd() / "idx").as_uri()) == {}, "local tables need none"
    gcs = tables.storage_options(settings, "gs://bucket/idx")
    assert gcs == {"aws_conditional_put": "etag"}, "S3 keys are not sent to another store"


def test_session_tokens_switch_both_clients_to_temporary_credentials() -> None:
    temporary = StorageSettings(**MINIO_FIELDS, s3_session_token="FwoGZXIvYXdz")
    assert storage.hadoop_conf(temporary)["fs.s3a.session.token"] == "FwoGZXIvYXdz"
    assert storage.hadoop_conf(temporary)["fs.s3a.aws.credentials.provider"].endswith(
        "TemporaryAWSCredentialsProvider"
    )
    assert storage.delta_storage_options(temporary, "s3a://b/x")["AWS_SESSION_TOKEN"] == "FwoGZXIvYXdz"


def test_without_keys_every_client_keeps_its_default_credential_chain() -> None:
    aws = StorageSettings(s3_region="us-east-2")
    assert storage.hadoop_conf(aws) == {"fs.s3a.endpoint.region": "us-east-2"}
    assert storage.delta_storage_options(aws, "s3a://b/x") == {"AWS_REGION": "us-east-2"}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"s3_access_key_id": "AKID"}, "set both s3_access_key_id and s3_secret_access_key"),
        ({"s3_endpoint": "minio:9000"}, "must start with http:// or https://"),
        ({"s3_endpont": "http://minio:9000"}, "s3_endpont"),
    ],
)
def test_inconsistent_storage_settings_are_refused(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(storage=fields)


def test_storage_settings_come_from_lazygraph_storage_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAZYGRAPH_STORAGE__S3_ENDPOINT", "https://s3.internal:443")
    monkeypatch.setenv("LAZYGRAPH_STORAGE__S3_ACCESS_KEY_ID", "AKID")
    monkeypatch.setenv("LAZYGRAPH_STORAGE__S3_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv(
        "LAZYGRAPH_STORAGE__DELTA_STORAGE_OPTIONS", json.dumps({"aws_conditional_put": "etag"})
    )
    s = load_settings().storage
    assert s.s3_secret_access_key is not None and s.s3_secret_access_key.get_secret_value() == SECRET
    assert storage.hadoop_conf(s)["fs.s3a.connection.ssl.enabled"] == "true"
    assert s.delta_options("s3a://b/x")["aws_conditional_put"] == "etag"


# ---- secrets are never shown ------------------------------------------------------------------------
def test_config_show_masks_every_credential(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "LAZYGRAPH_STORAGE__S3_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "LAZYGRAPH_STORAGE__S3_SECRET_ACCESS_KEY": SECRET,
        "LAZYGRAPH_STORAGE__S3_SESSION_TOKEN": "token-value-1",
        "LAZYGRAPH_STORAGE__HADOOP_CONF": json.dumps(
            {
                "fs.azure.account.key.acct.dfs.core.windows.net": "azure-key-2",
                "fs.s3a.connection.maximum": "64",
            }
        ),
        "LAZYGRAPH_STORAGE__DELTA_STORAGE_OPTIONS": json.dumps(
            {"azure_storage_account_key": "azure-key-3", "google_service_account_key": "gcp-4"}
        ),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    runner = CliRunner()
    for args in (["config", "show"], ["config", "show", "--json"]):
        shown = runner.invoke(app, args)
        assert shown.exit_code == 0, shown.output
        for secret in ("AKIDEXAMPLE", SECRET, "token-value-1", "azure-key-2", "azure-key-3", "gcp-4"):
            assert secret not in shown.output, f"{secret} printed by {' '.join(args)}"
        assert "**********" in shown.output
        assert "64" in shown.output, "values that are not credentials stay readable"
    settings = load_settings()
    recorded = settings.model_dump_json()  # what the index manifest keeps as settings_json
    assert SECRET not in recorded and "azure-key-3" not in recorded and "token-value-1" not in recorded
    assert SECRET not in repr(settings) and "azure-key-2" not in repr(settings)
    assert settings.storage.delta_options("s3a://b/x")["AWS_SECRET_ACCESS_KEY"] == SECRET, "clients get it"


# ---- every deltalake call site gets the options ---------------------------------------------------------
class _Recorder:
    """Stands in for deltalake's DeltaTable and write_deltalake; records what each call was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict | None]] = []

    def table(self, uri: str, version: int | None = None, storage_options: dict | None = None) -> Any:
        self.calls.append(("open", uri, storage_options))
        from deltalake.exceptions import TableNotFoundError

        raise TableNotFoundError(f"no table at {uri}")

    def is_deltatable(self, uri: str, storage_options: dict | None = None) -> bool:
        self.calls.append(("is_deltatable", uri, storage_options))
        return False

    def write(
        self, uri: str, data: Any, mode: str = "error", storage_options: dict | None = None, **kwargs: Any
    ) -> None:
        self.calls.append(("write", uri, storage_options))


@pytest.fixture()
def recorder(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    import deltalake

    rec = _Recorder()
    fake = type("FakeDeltaTable", (), {"__new__": lambda cls, *a, **k: rec.table(*a, **k)})
    fake.is_deltatable = staticmethod(rec.is_deltatable)
    monkeypatch.setattr(deltalake, "DeltaTable", fake)
    monkeypatch.setattr(deltalake, "write_deltalake", rec.write)
    return rec


def test_index_readers_open_s3_tables_with_the_storage_options(recorder: _Recorder) -> None:
    settings = Settings(storage=MINIO)
    assert tables.open_delta("s3a://bucket/idx/chunks", settings=settings) is None
    with pytest.raises(Exception, match="no lazygraph index at s3a://bucket/idx"):
        manifest.complete_versions(tables.normalise_index_uri("s3://bucket/idx"), settings)
    from lazygraph.query.snapshot import load_snapshot

    with pytest.raises(Exception, match="no lazygraph index"):
        load_snapshot("s3a://bucket/idx", settings)
    expected = settings.storage.delta_options("s3a://bucket/idx")
    assert recorder.calls, "deltalake was reached"
    for _, uri, options in recorder.calls:
        assert uri.startswith("s3://bucket/idx/"), "deltalake is given s3://"
        assert options == expected


def test_the_results_table_is_read_and_written_with_the_storage_options(recorder: _Recorder) -> None:
    settings = Settings(storage=MINIO)
    uri = results.results_uri("s3://bucket/answers")
    assert uri == "s3a://bucket/answers"
    assert results.read_statuses(uri, settings) == {}
    assert results.delete_error_rows(uri, ["q1"], settings) == 0
    row = {"query_id": "q1", "question": "?", "status": "ok", "seconds": 1.0}
    results.append_rows(uri, [row], settings)
    assert [c[0] for c in recorder.calls] == ["is_deltatable", "is_deltatable", "write"]
    for _, called, options in recorder.calls:
        assert called == "s3://bucket/answers"
        assert options == settings.storage.delta_options(uri)


def test_readers_are_handed_their_settings_and_never_read_the_environment(
    recorder: _Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAZYGRAPH_STORAGE__S3_REGION", "ap-south-1")
    tables.open_delta("s3a://bucket/idx/manifest")  # no settings: the defaults
    tables.open_delta("s3a://bucket/idx/manifest", settings=Settings(storage=MINIO))
    assert recorder.calls == [
        ("open", "s3://bucket/idx/manifest", None),
        ("open", "s3://bucket/idx/manifest", MINIO.delta_options("s3a://bucket/idx/manifest")),
    ]


def test_the_query_engine_reads_its_index_with_the_settings_it_was_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lazygraph.query import engine as engine_module

    loaded: list[tuple[str, object]] = []

    def load(index: str, settings: object) -> SimpleNamespace:
        loaded.append((index, settings))
        return SimpleNamespace(uri=index, n_chunks=0)

    monkeypatch.setattr(engine_module, "load_snapshot", load)
    # storage and vectors both come from here; the snapshot named, since `auto` would first read the
    # manifest at this (unreachable) endpoint to size the index
    settings = Settings(storage=MINIO, vectors={"candidates": 11}, query={"index_source": "snapshot"})
    engine_module.QueryEngine.open(settings, "s3a://bucket/idx")
    assert loaded == [("s3a://bucket/idx", settings)]


def test_the_query_engine_opens_its_llm_cache_with_the_storage_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lazygraph.query import engine as engine_module

    opened: list[tuple[str, object, int]] = []
    monkeypatch.setattr(
        engine_module.LLMCache,
        "open",
        classmethod(
            lambda cls, uri, storage=None, local_entries=0: opened.append((uri, storage, local_entries))
        ),
    )
    settings = Settings(storage=MINIO, query={"llm_cache": {"local_entries": 123}})
    engine = engine_module.QueryEngine(settings, SimpleNamespace(uri="s3a://bucket/idx"))
    engine.llm_cache()
    assert opened == [("s3a://bucket/idx/llm_cache", settings.storage, 123)]


# ---- pyarrow reads remote Parquet files through a filesystem built from the settings --------------------
class _RemoteTable:
    """A deltalake handle of a table in a bucket: what arrow_dataset reads from it."""

    def __init__(self, files: list[str]) -> None:
        self.table_uri = "s3://bucket/idx/chunks"
        self._files = files

    def protocol(self) -> Any:
        return SimpleNamespace(reader_features=None)

    def schema(self) -> Any:
        return SimpleNamespace(to_arrow=lambda: pa.schema([("chunk_id", pa.string())]))

    def file_uris(self) -> list[str]:
        return self._files


def test_remote_parquet_files_are_read_through_the_settings_filesystem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bucket" / "idx" / "chunks").mkdir(parents=True)
    pq.write_table(pa.table({"chunk_id": ["a", "b"]}), tmp_path / "bucket/idx/chunks/part-0.parquet")
    given: list[StorageSettings] = []

    def bucket_as_folder(uri: str, settings: StorageSettings) -> Any:
        given.append(settings)
        return pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())

    monkeypatch.setattr(storage, "arrow_filesystem", bucket_as_folder)
    table = _RemoteTable(["s3://bucket/idx/chunks/part-0.parquet"])
    read = tables.arrow_dataset(table, Settings(storage=MINIO)).to_table()
    assert read["chunk_id"].to_pylist() == ["a", "b"]
    assert given == [MINIO]


def test_pyarrow_gets_the_same_s3_endpoint_and_keys() -> None:
    filesystem = storage.arrow_filesystem("s3a://bucket/x", MINIO)
    assert isinstance(filesystem, pafs.S3FileSystem)
    assert filesystem.region == "eu-west-1"
    described = repr(filesystem.__reduce__())
    assert "minio.storage:9000" in described and "AKIDEXAMPLE" in described
    assert storage.arrow_path("s3://bucket/idx/part-0.parquet") == "bucket/idx/part-0.parquet"
    assert storage.arrow_path("gs://bucket/idx/p.parquet") == "bucket/idx/p.parquet"
    assert (
        storage.arrow_path("abfss://corpus@acct.dfs.core.windows.net/idx/p.parquet") == "corpus/idx/p.parquet"
    )


def test_an_unreachable_store_is_one_error_that_names_the_location(monkeypatch: pytest.MonkeyPatch) -> None:
    import deltalake

    refused = (
        "Kernel error -> Generic S3 error\n          \x1b[31m↳\x1b[0m error sending request\n"
        "           \x1b[31m↳\x1b[0m Connection refused (os error 111)\n"
    )

    def unreachable(*args: Any, **kwargs: Any) -> None:
        raise OSError(refused)

    monkeypatch.setattr(deltalake, "DeltaTable", unreachable)
    with pytest.raises(ConfigError) as caught:
        tables.open_delta("s3a://bucket/idx/manifest", settings=Settings(storage=MINIO))
    message = str(caught.value)
    assert "\n" not in message and "\x1b" not in message
    assert "cannot reach s3a://bucket/idx/manifest" in message and "Connection refused" in message
    assert "LAZYGRAPH_STORAGE__" in message
    with pytest.raises(OSError, match="Generic S3 error"):  # a local table's own errors are left alone
        tables.open_delta("/srv/idx/manifest")


def test_spark_gets_a_local_path_as_written_not_percent_encoded(tmp_path: Path) -> None:
    uri = storage.normalise(str(tmp_path / "a+b c" / "idx"))
    assert uri.endswith("/a%2Bb%20c/idx"), "the canonical form stays a percent-encoded URI"
    assert storage.spark_uri(uri) == f"file://{tmp_path}/a+b c/idx"
    assert storage.delta_uri(uri) == f"{tmp_path}/a+b c/idx"


def test_a_table_under_a_path_with_a_plus_and_a_space_lands_where_its_name_says(
    spark: Any, settings: Any, tmp_path: Path
) -> None:
    from lazygraph.tables.store import IndexStore

    index = tmp_path / "docs+extra copy" / "idx"
    store = IndexStore(spark, str(index), settings=settings)
    rows = spark.createDataFrame(
        [("d1", "t", "x", "h", "s", 1, "r")],
        "doc_id string, title string, text string, text_hash string, source string, n_chars int, "
        "run_id string",
    )
    store.overwrite(tables.DOCUMENTS, rows)  # note() reads it back through deltalake: no vanishing
    assert (index / tables.DOCUMENTS / "_delta_log").is_dir()
    assert not any("%" in p.name for p in tmp_path.rglob("*")), "no percent-encoded directory"
    assert [r["doc_id"] for r in store.load(tables.DOCUMENTS).collect()] == ["d1"]
    assert tables.open_delta(store.uri(tables.DOCUMENTS), settings=settings).version() == 0


def test_chunk_rows_of_new_documents_are_appended_and_replacements_merged(
    spark: Any, settings: Any, tmp_path: Path
) -> None:
    from lazygraph.tables.store import IndexStore

    store = IndexStore(spark, str(tmp_path / "idx"), settings=settings)
    schema = "chunk_id string, concept_id string, count int"

    def mentions(*rows: tuple) -> Any:
        return spark.createDataFrame(list(rows), schema)

    def held() -> list[tuple]:
        return sorted(tuple(r) for r in store.load(tables.MENTIONS).collect())

    def last_operation() -> str:
        return tables.open_delta(store.uri(tables.MENTIONS), settings=settings).history(1)[0]["operation"]

    store.merge_chunk_rows(tables.MENTIONS, mentions(("c1", "x", 1), ("c1", "y", 2)), None)
    # No document of the batch was in the index: appended, no MERGE against the table.
    store.merge_chunk_rows(tables.MENTIONS, mentions(("c2", "x", 3)), None)
    assert last_operation() == "WRITE"
    assert held() == [("c1", "x", 1), ("c1", "y", 2), ("c2", "x", 3)]
    # A replaced document: its old chunk's rows go in the same MERGE that inserts the new ones.
    replaced = spark.createDataFrame([("c1",)], "chunk_id string")
    store.merge_chunk_rows(tables.MENTIONS, mentions(("c3", "y", 5)), replaced)
    assert last_operation() == "MERGE"
    assert held() == [("c2", "x", 3), ("c3", "y", 5)]
