"""A Spark standalone cluster on loopback for the end-to-end tests: a master and workers, each a JVM of its
own started from the pyspark installation (`spark-class …Master`, `…Worker`), every process killed by
process group when the cluster stops (an executor is a child of its worker and shares its group)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_env(work: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LAZYGRAPH_SPARK__")}
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(work / "logs"),
        # The daemons only schedule: keep their heaps small beside two executors on a small machine.
        SPARK_DAEMON_MEMORY="256m",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        OMP_WAIT_POLICY="passive",
        TOKENIZERS_PARALLELISM="false",
        LAZYGRAPH_SPARK__SHUFFLE_PARTITIONS="2",
    )
    return env


def start(command: list[str], env: dict[str, str], log: Path, cwd: Path) -> subprocess.Popen:
    with log.open("w") as sink:
        return subprocess.Popen(
            command, env=env, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(process: subprocess.Popen) -> None:
    """SIGTERM the process group (a worker's executors with it), then SIGKILL what is left."""
    for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 20)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait_s)


def processes_in(folder: Path) -> list[int]:
    """Pids of the processes whose working directory lies in ``folder`` (daemons, executors, their Python
    workers): none may be left once the cluster is stopped."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if Path(os.readlink(proc / "cwd")).is_relative_to(folder):
                    found.append(int(proc.name))
    return found


def master_state(ui_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as response:
        return json.loads(response.read())


def wait_for_workers(ui_port: int, processes: list[subprocess.Popen], logs: list[Path], n: int) -> None:
    deadline = time.monotonic() + 180
    while True:
        for process, log in zip(processes, logs, strict=True):
            assert process.poll() is None, f"{log.name} exited: {log.read_text()[-3000:]}"
        with contextlib.suppress(OSError, ValueError):
            if master_state(ui_port).get("aliveworkers", 0) >= n:
                return
        assert time.monotonic() < deadline, f"fewer than {n} workers registered in 180 s"
        time.sleep(1)


@contextlib.contextmanager
def standalone_cluster(work: Path, workers: int = 2) -> Iterator[dict[str, Any]]:
    """A master and ``workers`` workers (one core, 1 GB each); yields the master URL, its web UI port, the
    environment, the folders and the worker processes."""
    (work / "logs").mkdir(parents=True, exist_ok=True)
    env = spark_env(work)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port, ui_port = free_port(), free_port()
    processes: list[subprocess.Popen] = []
    logs: list[Path] = []
    try:
        logs.append(work / "master.log")
        processes.append(
            start(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(ui_port)],
                env, logs[-1], work,
            )
        )  # fmt: skip
        worker_dirs = []
        for i in range(1, workers + 1):
            worker_dirs.append(work / f"worker-{i}")
            worker_dirs[-1].mkdir()
            logs.append(work / f"worker-{i}.log")
            processes.append(
                start(
                    [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                     "--cores", "1", "--memory", "1g", "--work-dir", str(worker_dirs[-1]),
                     "--port", str(free_port()), "--webui-port", str(free_port()),
                     f"spark://127.0.0.1:{port}"],
                    env, logs[-1], worker_dirs[-1],
                )
            )  # fmt: skip
        wait_for_workers(ui_port, processes, logs, n=workers)
        yield {
            "url": f"spark://127.0.0.1:{port}",
            "ui_port": ui_port,
            "env": env,
            "work": work,
            "worker_dirs": worker_dirs,
            "workers": processes[1:],
        }
    finally:
        for process in reversed(processes):
            stop(process)
        left = processes_in(work)
        assert not left, f"processes of the test cluster still running after teardown: {left}"
