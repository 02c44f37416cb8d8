"""The Spark session factory: local[*] by default, any master when configured, Delta enabled."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lazygraph.errors import SetupError
from lazygraph.runtime import storage
from lazygraph.runtime.jars import S3A_JARS, cached_jars, resolve_jars
from lazygraph.settings import Settings


def check_java() -> None:
    """Fail early with a useful message instead of py4j's 'Java gateway process exited'."""
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home) / "bin" / "java" if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise SetupError(
            "Java was not found. Spark 4 needs a Java 17 or 21 runtime: install one "
            "(e.g. `apt-get install openjdk-17-jre-headless`) and put it on PATH or set JAVA_HOME."
        )
    out = subprocess.run([str(java), "-version"], capture_output=True, text=True).stderr
    version = out.split('"')[1] if '"' in out else ""
    major = int(version.split(".")[0]) if version.split(".")[0].isdigit() else 0
    if major < 17:
        raise SetupError(
            f"Spark 4 needs Java 17 or newer, but {java} is {version or 'unknown'}; set JAVA_HOME."
        )


def spark_jars(settings: Settings, allow_download: bool = True, locations: Iterable[str] = ()) -> list[Path]:
    """The jars a session needs: Delta Lake's, and the S3A connector's when a location is on S3
    (``needs_s3a``), each fetched and verified on first use."""
    jars = cached_jars(settings.jars_dir)
    if jars is None:
        if not allow_download:
            raise SetupError(
                f"the Delta Lake jars are not in {settings.jars_dir}; run `lazygraph setup` first"
            )
        jars = resolve_jars(settings.jars_dir, settings.spark.maven_repository)
    if needs_s3a(settings, locations):
        jars = [*jars, *s3a_jars(settings, allow_download)]
    return jars


def needs_s3a(settings: Settings, locations: Iterable[str] = ()) -> bool:
    """Whether a session reaching ``locations`` (and the default index, and the checkpoint directory) must
    bring the S3A connector: some location is on S3 and Spark does not ship hadoop-aws already (the cluster
    image puts it in its jars)."""
    own = [settings.storage.index, settings.spark.checkpoint_dir or settings.storage.index]
    on_s3 = any(storage.scheme(loc) in storage.S3_SCHEMES for loc in (*locations, *own))
    return on_s3 and not _spark_ships_hadoop_aws()


def s3a_jars(settings: Settings, allow_download: bool = True) -> list[Path]:
    """hadoop-aws and the AWS SDK modules it loads (``jars.S3A_JARS``, 9 MB), from ``jars_dir/s3a``."""
    folder = settings.jars_dir / "s3a"
    jars = cached_jars(folder, S3A_JARS)
    if jars is not None:
        return jars
    if not allow_download:
        raise SetupError(f"the S3A connector's jars are not in {folder}; run `lazygraph setup --s3a` first")
    return resolve_jars(folder, settings.spark.maven_repository, S3A_JARS)


def _spark_ships_hadoop_aws() -> bool:
    import pyspark

    homes = [
        Path(pyspark.__file__).parent,
        *([Path(os.environ["SPARK_HOME"])] if "SPARK_HOME" in os.environ else []),
    ]
    return any(any((home / "jars").glob("hadoop-aws-*.jar")) for home in homes)


def get_spark(settings: Settings, locations: Iterable[str] = ()):
    """Return the (singleton) SparkSession configured from settings, able to reach ``locations`` (the
    input and the index: a location on S3 brings the S3A connector's jars).

    A session already running (spark-submit's, a notebook's) is reused, with the storage settings'
    Hadoop keys added to it, so that it reaches the same object stores as a session built here.
    lazygraph's tuning defaults never replace what the user configured for Spark itself
    (``spark-defaults.conf``, ``spark-submit --conf``, ``PYSPARK_SUBMIT_ARGS``; see ``session_conf``).
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        _add_hadoop_conf(active, settings)
        _set_checkpointing(active, settings)
        return active
    check_java()
    submitted = _spark_submit_conf()
    user = submitted or user_spark_conf()
    conf = session_conf(settings, spark_jars(settings, locations=locations), user)
    builder = SparkSession.builder.master(_master(settings, user)).appName(settings.spark.app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    os.environ.setdefault("PYSPARK_PYTHON", _python())
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _set_checkpointing(spark, settings)
    return spark


def _set_checkpointing(spark: Any, settings: Settings) -> None:
    """Where reliable checkpoints go, and whether checkpoints are reliable (``runtime.checkpoint``)."""
    from lazygraph.runtime.checkpoint import MODE_KEY

    if "checkpoint_dir" in settings.spark.model_fields_set or spark.sparkContext.getCheckpointDir() is None:
        checkpoint_dir = settings.spark.checkpoint_dir or str(settings.home / "spark-checkpoints")
        spark.sparkContext.setCheckpointDir(storage.spark_uri(storage.normalise(checkpoint_dir)))
    spark.conf.set(MODE_KEY, settings.spark.checkpoint)


def _spark_submit_conf() -> dict[str, str]:
    """The properties spark-submit started this driver with (``--master``, ``--jars``, ``--conf`` and its
    ``spark-defaults.conf``); empty when pyspark starts its own JVM. Under spark-submit the JVM is up
    before the settings are read, and a value set on the builder replaces spark-submit's: without this,
    ``spark-submit --master spark://…`` would run the job on the settings' default ``local[*]``."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # set by spark-submit's Python runner only
        return {}
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connect to spark-submit's JVM: a SparkConf without it is empty
    return dict(SparkConf().getAll())


def user_spark_conf(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The Spark properties the user set outside lazygraph when pyspark starts its own JVM:
    ``spark-defaults.conf`` (in ``SPARK_CONF_DIR``, else ``SPARK_HOME/conf``, else pyspark's own
    ``conf``), then the ``--conf``/``--master``/``--driver-memory`` options of ``PYSPARK_SUBMIT_ARGS``,
    which the JVM's launcher applies over that file."""
    env = os.environ if environ is None else environ
    conf = _properties_file(_conf_dir(env) / "spark-defaults.conf")
    conf.update(_submit_args_conf(env.get("PYSPARK_SUBMIT_ARGS", "")))
    return conf


def _conf_dir(env: Any) -> Path:
    if env.get("SPARK_CONF_DIR"):
        return Path(env["SPARK_CONF_DIR"])
    if env.get("SPARK_HOME"):
        return Path(env["SPARK_HOME"]) / "conf"
    import pyspark

    return Path(pyspark.__file__).parent / "conf"


def _properties_file(path: Path) -> dict[str, str]:
    """A Java properties file as Spark reads spark-defaults.conf: ``key value``, ``key=value`` or
    ``key: value`` a line, ``#`` and ``!`` comments; values trimmed."""
    if not path.is_file():
        return {}
    conf = {}
    for raw in path.read_text(errors="replace").splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        parts = re.split(r"\s*[=:]\s*|\s+", line, maxsplit=1)
        conf[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return conf


# spark-submit options that are Spark properties under another name.
_SUBMIT_OPTIONS = {"--master": "spark.master", "--driver-memory": "spark.driver.memory"}


def _submit_args_conf(args: str) -> dict[str, str]:
    conf: dict[str, str] = {}
    words = shlex.split(args)
    for i, word in enumerate(words):
        value = words[i + 1] if i + 1 < len(words) else ""
        pair = (
            value
            if word in ("--conf", "-c")
            else word[len("--conf=") :]
            if word.startswith("--conf=")
            else ""
        )
        if "=" in pair:
            key, _, val = pair.partition("=")
            conf[key.strip()] = val.strip()
        elif word in _SUBMIT_OPTIONS and value:
            conf[_SUBMIT_OPTIONS[word]] = value
    return conf


def _master(settings: Settings, user: dict[str, str]) -> str:
    """The user's Spark master (spark-submit's, spark-defaults.conf's), unless the settings name one
    themselves (LAZYGRAPH_SPARK__MASTER, a file)."""
    if "master" in settings.spark.model_fields_set or "spark.master" not in user:
        return settings.spark.master
    return user["spark.master"]


def _merge_jars(submitted: str, own: str) -> str:
    """spark-submit's ``--jars`` with the session's own jars added, each file once (by name)."""
    jars: dict[str, str] = {}
    for jar in [*submitted.split(","), *own.split(",")]:
        if jar.strip():
            jars.setdefault(Path(jar.strip()).name, jar.strip())
    return ",".join(jars.values())


# Settings fields that set a Spark property; a field set explicitly (YAML, environment) is the user's own
# choice, and beats the Spark configuration too, as ``spark.conf`` does.
_FIELD_PROPERTIES = {
    "driver_memory": ("spark.driver.memory",),
    "shuffle_partitions": (
        "spark.sql.shuffle.partitions",
        "spark.databricks.delta.snapshotPartitions",
        "spark.default.parallelism",
    ),
    "arrow_batch_size": ("spark.sql.execution.arrow.maxRecordsPerBatch",),
}
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"


def session_conf(settings: Settings, jars: list[Path], user: dict[str, str] | None = None) -> dict[str, str]:
    """Every Spark property lazygraph sets on a session built from settings.

    Precedence, lowest first: lazygraph's tuning defaults below; the user's own Spark configuration
    (``user``: spark-defaults.conf, spark-submit's or PYSPARK_SUBMIT_ARGS' ``--conf``), whose keys are
    simply not set here, so that Spark's value stands; then what the lazygraph settings set explicitly
    (the fields above when given, the storage settings' Hadoop keys, and ``spark.conf`` verbatim). What
    Delta needs is always there: its jars and session extension are added to the user's lists."""
    cfg = settings.spark
    user = user or {}
    defaults = {
        "spark.driver.memory": cfg.driver_memory,
        "spark.sql.shuffle.partitions": str(cfg.shuffle_partitions),
        # Delta replays a table's log with this many partitions (default 50): every read and commit of
        # a small table would otherwise schedule 50 tasks, which dominates small indexes on few cores.
        "spark.databricks.delta.snapshotPartitions": str(cfg.shuffle_partitions),
        "spark.default.parallelism": str(cfg.shuffle_partitions),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(cfg.arrow_batch_size),
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # Schema changes are explicit (overwriteSchema on replaced tables), never merged implicitly.
        "spark.databricks.delta.schema.autoMerge.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        # Checkpoint files of label propagation are dropped once their RDDs are gone.
        "spark.cleaner.referenceTracking.cleanCheckpoints": "true",
    }
    conf = {key: value for key, value in defaults.items() if key not in user}
    for field, keys in _FIELD_PROPERTIES.items():
        if field in cfg.model_fields_set:
            conf.update({key: defaults[key] for key in keys})
    conf["spark.jars"] = _merge_jars(user.get("spark.jars", ""), ",".join(str(j) for j in jars))
    conf["spark.sql.extensions"] = _with_delta_extension(user.get("spark.sql.extensions", ""))
    # Credentials ride in these keys; Spark's default spark.redaction.regex hides secret/key/token
    # values in its UI and event logs.
    conf.update(storage.spark_conf(settings.storage))
    conf.update(cfg.conf)
    return conf


def _with_delta_extension(extensions: str) -> str:
    names = [name.strip() for name in extensions.split(",") if name.strip()]
    return ",".join(names if DELTA_EXTENSION in names else [*names, DELTA_EXTENSION])


def _add_hadoop_conf(session: Any, settings: Settings) -> None:
    hadoop = session.sparkContext._jsc.hadoopConfiguration()
    for key, value in storage.hadoop_conf(settings.storage).items():
        hadoop.set(key, value)


def _python() -> str:
    import sys

    return sys.executable
