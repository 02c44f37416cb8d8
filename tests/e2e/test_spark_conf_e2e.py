"""A real Spark driver started as users start one keeps their Spark configuration: `spark-submit --conf`, and
`spark-defaults.conf` when pyspark starts its own JVM, beat lazygraph's tuning defaults (8 shuffle
partitions, no UI); an explicit lazygraph setting still beats both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from lazygraph.runtime.spark import spark_jars
from lazygraph.settings import load_settings

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
KEYS = ("spark.sql.shuffle.partitions", "spark.ui.enabled", "spark.sql.session.timeZone", "spark.master")
SCRIPT = f"""
import json
from lazygraph.runtime.spark import get_spark
from lazygraph.settings import load_settings

spark = get_spark(load_settings())
conf = {{key: spark.conf.get(key, None) for key in {KEYS!r}}}
conf["delta"] = spark.range(3).write.format("delta").mode("overwrite").save(__import__("sys").argv[1]) is None
print("CONF " + json.dumps(conf))
spark.stop()
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("LAZYGRAPH_SPARK__", "PYSPARK_", "SPARK_"))
    }
    env.update(PYTHONPATH=f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}", PYSPARK_PYTHON=sys.executable)
    env.update(extra)
    return env


def _conf(command: list[str], env: dict[str, str], cwd: Path) -> dict:
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("CONF ")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(lines[-1][5:])


def test_spark_submit_conf_wins_over_lazygraphs_defaults(tmp_path: Path) -> None:
    script = tmp_path / "show_conf.py"
    script.write_text(SCRIPT)
    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    # Under spark-submit the driver's JVM is up before lazygraph runs: Delta's jars come as --jars.
    jars = ",".join(str(jar) for jar in spark_jars(load_settings(), allow_download=False))
    command = [
        str(spark_submit), "--master", "local[1]", "--jars", jars,
        "--conf", "spark.sql.shuffle.partitions=3", "--conf", "spark.ui.enabled=true",
        str(script), str(tmp_path / "table"),
    ]  # fmt: skip
    conf = _conf(command, _env(tmp_path), tmp_path)
    assert conf["spark.sql.shuffle.partitions"] == "3"
    assert conf["spark.ui.enabled"] == "true"
    assert conf["spark.master"] == "local[1]"
    assert conf["spark.sql.session.timeZone"] == "UTC", "keys the user left alone keep lazygraph's value"
    assert conf["delta"], "Delta still works"


def test_spark_defaults_conf_wins_and_an_explicit_setting_wins_over_it(tmp_path: Path) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.sql.shuffle.partitions 5\nspark.ui.enabled true\nspark.master local[1]\n"
    )
    script = tmp_path / "show_conf.py"
    script.write_text(SCRIPT)
    env = _env(tmp_path, SPARK_CONF_DIR=str(conf_dir))
    conf = _conf([sys.executable, str(script), str(tmp_path / "t1")], env, tmp_path)
    assert (conf["spark.sql.shuffle.partitions"], conf["spark.ui.enabled"]) == ("5", "true")
    assert conf["spark.master"] == "local[1]"

    env["LAZYGRAPH_SPARK__SHUFFLE_PARTITIONS"] = "7"
    conf = _conf([sys.executable, str(script), str(tmp_path / "t2")], env, tmp_path)
    assert conf["spark.sql.shuffle.partitions"] == "7"
