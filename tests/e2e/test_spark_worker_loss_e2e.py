"""Losing an executor mid-run does not fail the index job: on a Spark standalone cluster (a master and two
one-core workers) the job is submitted with `spark-submit`, and one worker, with its executor, is killed
(SIGKILL of its process group) while the communities stage runs. Checkpoints there are reliable (written to
``spark.checkpoint_dir``), so the surviving executor recomputes what the dead one held and the run completes
with a complete, consistent index. Long: marked ``slow``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.spark_cluster import BIN, standalone_cluster

from lazygraph.demo_data import sample_corpus_path
from lazygraph.manifest import last_complete_run
from lazygraph.settings import load_settings
from lazygraph.stats import index_stats

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
# Seconds after the communities stage starts (the documents stage's line) at which a worker is killed.
KILL_AFTER_S = float(os.environ.get("LAZYGRAPH_TEST_KILL_AFTER_S", "4"))


def _delta_jars() -> list[str]:
    from lazygraph.runtime.spark import spark_jars

    return [str(jar) for jar in spark_jars(load_settings())]


def test_the_run_survives_a_worker_killed_during_the_communities_stage(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(sample_corpus_path().read_text())
    index = tmp_path / "index"
    driver_dir = tmp_path / "driver"
    driver_dir.mkdir()
    with standalone_cluster(tmp_path / "cluster") as cluster:
        env = {**cluster["env"], "LAZYGRAPH_SPARK__CHECKPOINT_DIR": str(tmp_path / "checkpoints")}
        submit = [
            str(BIN / "spark-submit"), "--master", cluster["url"], "--deploy-mode", "client",
            "--driver-memory", "1g", "--executor-memory", "768m",
            "--conf", "spark.executor.cores=1", "--conf", "spark.cores.max=2",
            "--jars", ",".join(_delta_jars()),
            str(ROOT / "jobs" / "index_job.py"), "--input", str(corpus), "--index", str(index),
        ]  # fmt: skip
        # spark-submit runs the Python driver with its stderr joined to its stdout (the stage lines, then
        # the report); the JVM's own log goes to stderr.
        spark_log = (tmp_path / "spark-submit.err").open("w")
        job = subprocess.Popen(
            submit, env=env, cwd=driver_dir, stdout=subprocess.PIPE, stderr=spark_log, text=True
        )
        events: dict[str, Any] = {"stdout": []}

        def follow() -> None:
            assert job.stdout is not None
            for line in job.stdout:
                events["stdout"].append(line)
                stage = line.split()[0] if line.split() else ""
                if stage == "documents" and "communities_started" not in events:
                    events["communities_started"] = time.monotonic()
                if stage == "communities":
                    events["communities_done"] = time.monotonic()

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        deadline = time.monotonic() + 1500
        while "communities_started" not in events:
            assert job.poll() is None, "".join(events["stdout"])[-4000:]
            assert time.monotonic() < deadline, "the run never reached the communities stage"
            time.sleep(0.2)
        time.sleep(KILL_AFTER_S)
        assert "communities_done" not in events, "the communities stage ended before the worker was killed"
        victim = cluster["workers"][0]
        os.killpg(victim.pid, signal.SIGKILL)  # the worker and its executor
        events["killed"] = time.monotonic()
        job.wait(timeout=1500)
        reader.join(timeout=30)
        spark_log.close()
    log = "".join(events["stdout"])
    assert job.returncode == 0, log[-4000:] + (tmp_path / "spark-submit.err").read_text()[-4000:]
    assert events["communities_done"] > events["killed"], "the stage finished after the loss"
    report = json.loads([line for line in log.splitlines() if line.startswith("{")][-1])
    assert report["counts"]["documents"] == 30 and report["counts"]["communities"] > 0
    stats = index_stats(load_settings(), str(index))
    assert (
        stats["communities"]["parent_links_ok"]
        and stats["communities"]["every_kept_concept_in_one_community_per_level"]
    )
    assert last_complete_run(str(index))["run_id"] == report["run_id"]
