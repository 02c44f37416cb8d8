"""`lazygraph batch` through the real command line, its driver stopped mid-batch: first politely (SIGTERM,
as `ray job stop` does), then hard (SIGKILL). Each re-run answers only what is missing, and the results
table ends with exactly one ok row per query. A stand-in engine (``standins.SlowEngine``, loaded through
``ray.engine_factory``) keeps it fast: killing a driver needs no model."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

CLI = str(Path(sys.executable).parent / "lazygraph")
HERE = Path(__file__).parent
QUESTIONS = 24


def table_rows(out: Path) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(str(out)):
        return []
    return DeltaTable(str(out)).to_pyarrow_table().to_pylist()


@pytest.fixture()
def batch_command(tmp_path: Path) -> tuple[list[str], dict[str, str], Path]:
    index = tmp_path / "index"
    index.mkdir()
    queries = tmp_path / "queries.txt"
    queries.write_text("".join(f"question {i}\n" for i in range(QUESTIONS)))
    out = tmp_path / "answers"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
        "LAZYGRAPH_RAY__ENGINE_FACTORY": "standins:SlowEngine",
        "LAZYGRAPH_RAY__QUERY_ACTORS": "2",
        "LAZYGRAPH_RAY__ACTOR_NUM_CPUS": "0.5",
        "LAZYGRAPH_RAY__FLUSH_EVERY": "2",
        "STANDIN_SECONDS": "0.5",
        "OMP_WAIT_POLICY": "passive",
    }
    command = [CLI, "batch", "--index", str(index), "--queries", str(queries), "--out", str(out)]
    return command, env, out


def stop_after_rows(command: list[str], env: dict[str, str], out: Path, rows: int, sig: int) -> int:
    """Start the batch, send ``sig`` to its driver once ``rows`` rows are committed; its exit status."""
    driver = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 180
        while len(table_rows(out)) < rows:
            assert driver.poll() is None, (
                f"the batch ended before it was stopped: {driver.stderr.read()[-3000:]}"
            )
            assert time.monotonic() < deadline, "the batch committed too few answers"
            time.sleep(0.1)
        driver.send_signal(sig)
        return driver.wait(timeout=60)
    finally:
        _kill_group(driver)


def _kill_group(driver: subprocess.Popen) -> None:
    """Whatever the driver started (its local Ray) goes with it, also when the test fails."""
    if driver.poll() is None:
        driver.kill()
        driver.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):  # nothing of it is left
        os.killpg(driver.pid, signal.SIGKILL)
    for stream in (driver.stdout, driver.stderr):
        if stream is not None:
            stream.close()


def test_a_stopped_driver_resumes_without_duplicate_rows(batch_command) -> None:
    command, env, out = batch_command

    # SIGTERM: Ray's driver turns it into SystemExit, so the driver writes the answers it holds and
    # stops its actors on the way out (an exit status, not death by the signal).
    status = stop_after_rows(command, env, out, rows=4, sig=signal.SIGTERM)
    assert status == signal.SIGTERM
    after_term = table_rows(out)
    assert 4 <= len(after_term) < QUESTIONS, "stopped mid-batch"

    # SIGKILL: nothing is flushed; what was committed stays.
    status = stop_after_rows(command, env, out, rows=len(after_term) + 4, sig=signal.SIGKILL)
    assert status == -signal.SIGKILL
    after_kill = table_rows(out)
    assert len(after_kill) < QUESTIONS, "killed mid-batch"
    assert len({r["query_id"] for r in after_kill}) == len(after_kill), "no duplicate rows"

    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-3000:]
    report = json.loads(finished.stdout)
    assert report["skipped_already_ok"] == len(after_kill)
    assert report["answered"] == QUESTIONS - len(after_kill) and report["errors"] == 0
    assert "LLM cache hit rate" in finished.stderr and "33.3%" in finished.stderr, "the summary"

    rows = table_rows(out)
    ids = Counter(r["query_id"] for r in rows)
    assert len(rows) == QUESTIONS and len(ids) == QUESTIONS and max(ids.values()) == 1
    assert all(r["status"] == "ok" for r in rows)
    kept = {r["query_id"]: r["finished_at"] for r in after_kill}
    assert all(r["finished_at"] == kept[r["query_id"]] for r in rows if r["query_id"] in kept), (
        "answers committed before the kill are kept, not answered again"
    )
