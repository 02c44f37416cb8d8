"""Where data lives: location URIs, and what each storage client needs to reach them.

Three clients read and write lazygraph's locations (input, index, batch results), each with its own
URI dialect and its own configuration keys, all fed from the one ``storage`` section of the settings
(``lazygraph.settings.StorageSettings``, which this module knows only as ``StorageAccess``):

- Spark, through Hadoop file systems: S3 is ``s3a://``, credentials are ``fs.s3a.*`` Hadoop keys,
  set as ``spark.hadoop.*`` in the session builder (``spark_conf``);
- deltalake (delta-rs, the query side, no JVM): S3 is ``s3://``, credentials are its
  ``storage_options`` (``delta_storage_options``);
- pyarrow, which reads the Parquet files of Delta tables and, inside Spark tasks, the byte ranges of
  a JSON Lines input (``arrow_filesystem``).

A location is normalised once (``normalise``): a local path or file:// URI becomes an absolute
file:// URI, ``s3://`` becomes ``s3a://`` (the form Spark needs and the one recorded), and the other
supported URIs pass unchanged; each client then gets its own dialect (``spark_uri``, ``delta_uri``).
Nothing here touches a remote store: a remote location is checked by the client that reads it.
"""

from __future__ import annotations

import io
import re
from typing import Any, BinaryIO, Protocol
from urllib.parse import unquote, urlparse

from lazygraph.errors import InputError


class Secret(Protocol):
    def get_secret_value(self) -> str: ...


class StorageAccess(Protocol):
    """What the clients need to reach a store: the ``storage`` section of the settings."""

    s3_endpoint: str | None
    s3_region: str | None
    s3_access_key_id: Secret | None
    s3_secret_access_key: Secret | None
    s3_session_token: Secret | None
    s3_path_style_access: bool
    hadoop_conf: dict[str, str]
    delta_storage_options: dict[str, str]


LOCAL_SCHEME = "file"
S3_SCHEMES = ("s3a", "s3")
# Every scheme a location may have; a bare path is a local one.
SUPPORTED_SCHEMES = (LOCAL_SCHEME, "s3a", "s3", "abfss", "gs", "hdfs")
# Object stores name a bucket (or container) right after the scheme; HDFS may leave the name node out
# (hdfs:///path is the cluster's default file system).
_NEEDS_BUCKET = ("s3a", "s3", "abfss", "gs")
# A scheme of two letters or more, then ":/": "C:/docs" stays a Windows path, "file:/abs" (Spark's form)
# and "s3a:/bucket" (a typo, refused below) are URIs.
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")
# Bytes buffered per remote read: a line-by-line reader must not make one request per line.
READ_BUFFER = 1 << 20


def scheme(location: str) -> str:
    """The location's scheme in lower case; ``file`` for a bare path."""
    match = _URI.match(location)
    return match.group(1).lower() if match else LOCAL_SCHEME


def location_problem(location: str) -> str | None:
    """Why ``location`` cannot be used, in one sentence that says what to give instead; None if it can."""
    kind = scheme(location)
    supported = "a local path, file://, s3a:// (or s3://), abfss://, gs:// or hdfs://"
    if not location.strip():
        return f"an empty location was given; give {supported}"
    if kind not in SUPPORTED_SCHEMES:
        return f"location {location} uses the unsupported scheme {kind}://; give {supported}"
    parsed = urlparse(location)
    if kind in _NEEDS_BUCKET and not parsed.netloc:
        return f"location {location} names no bucket; write it as {kind}://BUCKET/path"
    if kind == "abfss" and "@" not in parsed.netloc:
        return (
            f"location {location} must name container and account: "
            "abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/path"
        )
    if kind == LOCAL_SCHEME and _URI.match(location) and parsed.netloc not in ("", "localhost", "."):
        return f"location {location} names the host {parsed.netloc}; file:// means this machine"
    return None


def normalise(location: str) -> str:
    """The canonical URI of a location: absolute file:// for local ones, s3a:// for S3, no trailing "/".

    InputError, saying which forms are accepted, for an unsupported scheme or a malformed URI.
    """
    problem = location_problem(location)
    if problem is not None:
        raise InputError(problem)
    kind = scheme(location)
    if kind == LOCAL_SCHEME:
        return _local_uri(location)
    rest = location[len(kind) :]
    if len(rest.rstrip("/")) > len("://"):  # keep the root of a file system whole ("hdfs:///")
        rest = rest.rstrip("/")
    return ("s3a" if kind == "s3" else kind) + rest


def _local_uri(location: str) -> str:
    from pathlib import Path

    if location.startswith("file://./") or location == "file://.":
        path = location[len("file://") :]  # file://./relative/path: relative to the working directory
    elif _URI.match(location):
        path = unquote(urlparse(location).path)
    else:
        path = location
    return Path(path).expanduser().resolve().as_uri()


def is_local(uri: str) -> bool:
    return scheme(uri) == LOCAL_SCHEME


def local_path(uri: str) -> str | None:
    """The filesystem path of a local location (bare path or file:// URI), or None for remote storage."""
    if not is_local(uri):
        return None
    if _URI.match(uri):
        return unquote(urlparse(uri).path)
    return uri


def spark_uri(uri: str) -> str:
    """The URI Spark (Hadoop) reads: S3 through the s3a connector; a local location as its plain path.

    Hadoop takes the text of a path literally and escapes it itself, so a percent-encoded file:// URI
    (``/tmp/a+b`` is ``file:///tmp/a%2Bb``) would name a directory called ``a%2Bb``."""
    if scheme(uri) == "s3":
        return "s3a" + uri[len("s3") :]
    if is_local(uri) and _URI.match(uri):
        return "file://" + (local_path(uri) or "")
    return uri


def delta_uri(uri: str) -> str:
    """The URI deltalake reads: S3 as s3://, a local table as its path."""
    if is_local(uri):
        return local_path(uri) or uri
    return "s3" + uri[len("s3a") :] if scheme(uri) == "s3a" else uri


# ---- Spark (Hadoop) ---------------------------------------------------------------------------------
def hadoop_conf(storage: StorageAccess) -> dict[str, str]:
    """Hadoop configuration keys for the S3A connector from the typed settings, then ``hadoop_conf``."""
    conf: dict[str, str] = {}
    if storage.s3_endpoint:
        conf["fs.s3a.endpoint"] = storage.s3_endpoint
        conf["fs.s3a.connection.ssl.enabled"] = str(storage.s3_endpoint.startswith("https://")).lower()
    if storage.s3_region:
        conf["fs.s3a.endpoint.region"] = storage.s3_region
    if storage.s3_path_style_access:
        conf["fs.s3a.path.style.access"] = "true"
    if storage.s3_access_key_id and storage.s3_secret_access_key:
        conf["fs.s3a.access.key"] = storage.s3_access_key_id.get_secret_value()
        conf["fs.s3a.secret.key"] = storage.s3_secret_access_key.get_secret_value()
        # Keys given here must win over whatever the default provider chain finds on the node.
        provider = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        if storage.s3_session_token:
            conf["fs.s3a.session.token"] = storage.s3_session_token.get_secret_value()
            provider = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        conf["fs.s3a.aws.credentials.provider"] = provider
    conf.update(storage.hadoop_conf)
    return conf


def spark_conf(storage: StorageAccess) -> dict[str, str]:
    """The Hadoop keys as Spark properties (``spark.hadoop.`` + key), for the session builder."""
    return {f"spark.hadoop.{key}": value for key, value in hadoop_conf(storage).items()}


# ---- deltalake ------------------------------------------------------------------------------------
def delta_storage_options(storage: StorageAccess, uri: str | None = None) -> dict[str, str]:
    """deltalake ``storage_options`` for ``uri`` (None: any location): the typed S3 settings for S3
    locations, then ``delta_storage_options``; empty for a local table, which needs none."""
    if uri is not None and is_local(uri):
        return {}
    options: dict[str, str] = {}
    if uri is None or scheme(uri) in S3_SCHEMES:
        options.update(_delta_s3_options(storage))
    options.update(storage.delta_storage_options)
    return options


def _delta_s3_options(storage: StorageAccess) -> dict[str, str]:
    options: dict[str, str] = {}
    if storage.s3_endpoint:
        options["AWS_ENDPOINT_URL"] = storage.s3_endpoint
        if storage.s3_endpoint.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
        # Hadoop's default is virtual-hosted requests and delta-rs's is path-style: say which, so both
        # clients address a custom endpoint the same way.
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = str(not storage.s3_path_style_access).lower()
    if storage.s3_region:
        options["AWS_REGION"] = storage.s3_region
    if storage.s3_access_key_id and storage.s3_secret_access_key:
        options["AWS_ACCESS_KEY_ID"] = storage.s3_access_key_id.get_secret_value()
        options["AWS_SECRET_ACCESS_KEY"] = storage.s3_secret_access_key.get_secret_value()
        if storage.s3_session_token:
            options["AWS_SESSION_TOKEN"] = storage.s3_session_token.get_secret_value()
    return options


# ---- pyarrow --------------------------------------------------------------------------------------
def arrow_filesystem(uri: str, storage: StorageAccess) -> Any:
    """The pyarrow filesystem that reaches ``uri``, configured from the same settings.

    S3 gets the typed settings; Google Cloud Storage and Azure use their standard credential chains
    (GOOGLE_APPLICATION_CREDENTIALS, workload identity; an ``azure_storage_account_key`` in
    ``delta_storage_options``, else Azure's default credential); HDFS needs libhdfs and Hadoop's
    CLASSPATH on the machine, as on every Hadoop node.
    """
    import pyarrow.fs as pafs

    kind = scheme(uri)
    if kind in S3_SCHEMES:
        return _s3_filesystem(storage)
    if kind == "gs":
        return pafs.GcsFileSystem()
    if kind == "abfss":
        account = urlparse(uri).netloc.split("@", 1)[1].split(".", 1)[0]
        key = _option(storage.delta_storage_options, "azure_storage_account_key", "account_key")
        return pafs.AzureFileSystem(account_name=account, account_key=key)
    if kind == "hdfs":
        return pafs.HadoopFileSystem.from_uri(uri)
    return pafs.LocalFileSystem()


def _s3_filesystem(storage: StorageAccess) -> Any:
    import pyarrow.fs as pafs

    kwargs: dict[str, Any] = {"region": storage.s3_region}
    if storage.s3_endpoint:
        endpoint = urlparse(storage.s3_endpoint)
        kwargs.update(
            endpoint_override=endpoint.netloc,
            scheme=endpoint.scheme,
            force_virtual_addressing=not storage.s3_path_style_access,
        )
    if storage.s3_access_key_id and storage.s3_secret_access_key:
        kwargs.update(
            access_key=storage.s3_access_key_id.get_secret_value(),
            secret_key=storage.s3_secret_access_key.get_secret_value(),
            session_token=storage.s3_session_token.get_secret_value() if storage.s3_session_token else None,
        )
    return pafs.S3FileSystem(**kwargs)


def _option(options: dict[str, str], *names: str) -> str | None:
    lowered = {key.lower(): value for key, value in options.items()}
    return next((lowered[name] for name in names if name in lowered), None)


def arrow_path(uri: str) -> str:
    """The path of ``uri`` inside its pyarrow filesystem: bucket/key, container/path, or the path."""
    parsed = urlparse(uri)
    kind = parsed.scheme.lower()
    if kind in (*S3_SCHEMES, "gs", "gcs"):
        return f"{parsed.netloc}{unquote(parsed.path)}"
    if kind in ("abfss", "abfs", "az"):
        return f"{parsed.netloc.split('@', 1)[0]}{unquote(parsed.path)}"
    return unquote(parsed.path) if parsed.scheme else uri


def open_input(uri: str, storage: StorageAccess) -> BinaryIO:
    """A buffered, seekable binary reader of a remote file (a Spark task's byte range of an input)."""
    raw = arrow_filesystem(uri, storage).open_input_file(arrow_path(uri))
    return io.BufferedReader(raw, buffer_size=READ_BUFFER)
