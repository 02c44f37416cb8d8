"""The user's Spark configuration (spark-defaults.conf, --conf) wins over lazygraph's tuning defaults, and
what the lazygraph settings set explicitly wins over both."""

from __future__ import annotations

from pathlib import Path

from lazygraph.runtime import spark as spark_runtime
from lazygraph.runtime.spark import session_conf, user_spark_conf
from lazygraph.settings import load_settings

JARS = [Path("/jars/delta-spark.jar")]


def test_keys_the_user_configured_are_left_to_spark() -> None:
    user = {"spark.sql.shuffle.partitions": "400", "spark.ui.enabled": "true", "spark.driver.memory": "16g"}
    conf = session_conf(load_settings(), JARS, user)
    for key in user:
        assert key not in conf, f"{key} would replace the user's value"
    assert conf["spark.sql.session.timeZone"] == "UTC", "unconfigured keys keep lazygraph's default"
    assert conf["spark.databricks.delta.snapshotPartitions"] == "8"


def test_explicit_lazygraph_settings_beat_the_spark_configuration() -> None:
    user = {"spark.sql.shuffle.partitions": "400", "spark.executor.memory": "2g", "spark.driver.memory": "1g"}
    settings = load_settings(spark={"shuffle_partitions": 16, "conf": {"spark.executor.memory": "8g"}})
    conf = session_conf(settings, JARS, user)
    assert conf["spark.sql.shuffle.partitions"] == "16" and conf["spark.default.parallelism"] == "16"
    assert conf["spark.executor.memory"] == "8g"
    assert "spark.driver.memory" not in conf  # driver_memory was not set explicitly


def test_delta_is_added_to_the_users_jars_and_extensions() -> None:
    user = {"spark.jars": "/opt/extra.jar", "spark.sql.extensions": "com.example.Ext"}
    conf = session_conf(load_settings(), JARS, user)
    assert conf["spark.jars"] == "/opt/extra.jar,/jars/delta-spark.jar"
    assert conf["spark.sql.extensions"] == "com.example.Ext,io.delta.sql.DeltaSparkSessionExtension"
    again = session_conf(load_settings(), JARS, {"spark.sql.extensions": conf["spark.sql.extensions"]})
    assert again["spark.sql.extensions"] == conf["spark.sql.extensions"]


def test_the_user_configuration_is_read_from_spark_defaults_and_pyspark_submit_args(tmp_path: Path) -> None:
    (tmp_path / "spark-defaults.conf").write_text(
        "# cluster defaults\n"
        "spark.master                 spark://head:7077\n"
        "spark.sql.shuffle.partitions=200\n"
        "spark.ui.enabled: true\n"
        "! a comment\n"
    )
    args = (
        "--conf spark.sql.shuffle.partitions=3 --conf=spark.executor.cores=2 --driver-memory 6g pyspark-shell"
    )
    conf = user_spark_conf({"SPARK_CONF_DIR": str(tmp_path), "PYSPARK_SUBMIT_ARGS": args})
    assert conf == {
        "spark.master": "spark://head:7077",
        "spark.sql.shuffle.partitions": "3",  # --conf over the file, as spark-submit applies them
        "spark.ui.enabled": "true",
        "spark.executor.cores": "2",
        "spark.driver.memory": "6g",
    }
    assert spark_runtime._master(load_settings(), conf) == "spark://head:7077"
    assert spark_runtime._master(load_settings(spark={"master": "local[2]"}), conf) == "local[2]"
    assert user_spark_conf({"SPARK_CONF_DIR": str(tmp_path / "none")}) == {}
