"""Resolve the Spark jars lazygraph needs from Maven Central into a local cache.

The jars are pinned (with the pyspark they match) and checked against Maven's SHA-1
files, so a broken download is never handed to Spark. A jar is written under a temporary
name and renamed only once verified, so an interrupted download leaves nothing that looks
complete.
"""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from lazygraph.errors import JarResolutionError


@dataclass(frozen=True)
class MavenArtifact:
    group: str
    artifact: str
    version: str

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    def url(self, repository: str) -> str:
        group_path = self.group.replace(".", "/")
        return f"{repository.rstrip('/')}/{group_path}/{self.artifact}/{self.version}/{self.file_name}"


# Delta Lake 4.4 built for Spark 4.0 / Scala 2.13 (pyspark 4.0.1 pairs with it). Only the jars
# Spark does not already ship: Spark provides Scala, Jackson, Hadoop, Parquet and ANTLR.
DELTA_JARS: tuple[MavenArtifact, ...] = (
    MavenArtifact("io.delta", "delta-spark_4.0_2.13", "4.4.0"),
    MavenArtifact("io.delta", "delta-storage", "4.4.0"),
)

# s3a:// for Spark: hadoop-aws of pyspark's Hadoop (3.4.1, as its jars/hadoop-client-api-3.4.1.jar) and the
# AWS SDK v2 modules the S3A connector loads: 9 MB in 31 jars, where the SDK's `bundle` jar that hadoop-aws
# declares is 558 MB of every AWS service. Hadoop 3.4.1 is built against SDK 2.24.6; 2.24.8 is the nearest
# release that Maven Central has every module of (s3-transfer-manager has no 2.24.6). What pyspark ships
# already (netty, Apache HttpClient, commons-codec, slf4j, commons-logging as jcl-over-slf4j) is left out, so
# that no class is on the classpath twice in two versions. Fetched only for a location on S3
# (``runtime.spark.spark_jars``).
HADOOP_AWS_VERSION = "3.4.1"
AWS_SDK_VERSION = "2.24.8"
_AWS_SDK_MODULES = (
    "annotations", "apache-client", "arns", "auth", "aws-core", "aws-query-protocol", "aws-xml-protocol",
    "checksums", "checksums-spi", "crt-core", "endpoints-spi", "http-auth", "http-auth-aws", "http-auth-spi",
    "http-client-spi", "identity-spi", "json-utils", "metrics-spi", "netty-nio-client", "profiles",
    "protocol-core", "regions", "s3", "s3-transfer-manager", "sdk-core", "sts", "third-party-jackson-core",
    "utils",
)  # fmt: skip
S3A_JARS: tuple[MavenArtifact, ...] = (
    MavenArtifact("org.apache.hadoop", "hadoop-aws", HADOOP_AWS_VERSION),
    *(MavenArtifact("software.amazon.awssdk", module, AWS_SDK_VERSION) for module in _AWS_SDK_MODULES),
    MavenArtifact("software.amazon.eventstream", "eventstream", "1.0.1"),
    MavenArtifact("org.reactivestreams", "reactive-streams", "1.0.4"),
)
# Jars are small and Maven answers each request in a fraction of a second: fetch a few at a time.
_PARALLEL_DOWNLOADS = 8


def _download(url: str, timeout: float = 60.0) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        raise JarResolutionError(
            f"Maven answered {exc.code} for {url}; check spark.maven_repository in the settings"
        ) from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise JarResolutionError(
            f"could not reach Maven at {url} ({exc}). The first set-up needs Maven Central "
            "(or a mirror set in spark.maven_repository); run `lazygraph setup` again once it is reachable, "
            "or copy the jars into the jars directory by hand."
        ) from exc


def resolve_jars(
    jars_dir: Path, repository: str, artifacts: tuple[MavenArtifact, ...] = DELTA_JARS
) -> list[Path]:
    """Return local paths of the pinned jars, downloading and verifying any that are missing."""
    jars_dir.mkdir(parents=True, exist_ok=True)
    paths = [jars_dir / artifact.file_name for artifact in artifacts]
    missing = [(a, p) for a, p in zip(artifacts, paths, strict=True) if not p.is_file()]
    with ThreadPoolExecutor(max_workers=_PARALLEL_DOWNLOADS) as pool:
        # list() re-raises the first failure (a JarResolutionError naming its jar) once all have finished.
        list(pool.map(lambda item: _fetch_verified(item[0], repository, item[1]), missing))
    return paths


def cached_jars(jars_dir: Path, artifacts: tuple[MavenArtifact, ...] = DELTA_JARS) -> list[Path] | None:
    """The jar paths if all are cached, else None (no network)."""
    paths = [jars_dir / a.file_name for a in artifacts]
    return paths if all(p.is_file() for p in paths) else None


def _fetch_verified(artifact: MavenArtifact, repository: str, target: Path) -> None:
    url = artifact.url(repository)
    payload = _download(url)
    expected = _download(url + ".sha1").decode("ascii", "replace").split()[0].strip().lower()
    actual = hashlib.sha1(payload).hexdigest()
    if actual != expected:
        raise JarResolutionError(
            f"{artifact.file_name} from {url} failed its SHA-1 check (got {actual}, Maven says {expected}); "
            "run `lazygraph setup` again, and check any proxy in between if it keeps failing"
        )
    partial = target.with_suffix(".jar.partial")
    partial.write_bytes(payload)
    partial.replace(target)
