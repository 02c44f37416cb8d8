"""The writer lease of an index: one holder at a time among real processes, a one-line refusal naming the
holder, waiting, expiry, a holder that died, and a holder that lost its lease publishing nothing."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lazygraph.errors import IndexStateError
from lazygraph.settings import load_settings
from lazygraph.tables.lease import IndexBusyError, WriterLease, writer_lease

ROOT = Path(__file__).resolve().parents[2]


def _settings(**writer: float):
    return load_settings(writer={"lease_ttl_s": 30.0, "poll_s": 0.05, **writer})


def _contend(index: str, name: str, hold_s: float, start: float, log: str) -> None:
    """Take the lease (waiting for it), note the time held, release it."""
    while time.time() < start:
        time.sleep(0.001)
    with writer_lease(_settings(), index, name, wait_s=60):
        entered = time.time()
        time.sleep(hold_s)
        left = time.time()
    with open(log, "a") as f:
        f.write(f"{name} {entered} {left}\n")


def test_processes_started_together_hold_the_lease_one_at_a_time(tmp_path: Path) -> None:
    index = str(tmp_path / "index")
    log = str(tmp_path / "held.log")
    start = time.time() + 1.5
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_contend, args=(index, f"run-{i}", 0.3, start, log)) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    spans = sorted(
        (float(a), float(b)) for _, a, b in (line.split() for line in Path(log).read_text().splitlines())
    )
    assert len(spans) == 4
    for (_, left), (entered, _) in zip(spans, spans[1:], strict=False):
        assert entered >= left, "two holders at once"


def test_a_held_index_is_refused_in_one_line_naming_the_holder(tmp_path: Path) -> None:
    index = str(tmp_path / "index")
    first = WriterLease(index, "run-a", _settings(), command="lazygraph index --append --input a.jsonl")
    first.acquire(0)
    try:
        started = time.monotonic()
        with pytest.raises(IndexBusyError) as info:
            WriterLease(index, "run-b", _settings()).acquire(0.3)
        assert time.monotonic() - started >= 0.3, "it waited writer.wait_s"
        message = str(info.value)
        assert "run run-a" in message and "lazygraph index --append --input a.jsonl" in message
        assert f"pid {os.getpid()}" in message and "writer.wait_s" in message and "\n" not in message
    finally:
        first.release()
    second = WriterLease(index, "run-b", _settings())
    second.acquire(0)  # free once released
    second.release()


def test_an_expired_lease_is_taken_over_and_its_holder_publishes_nothing(tmp_path: Path) -> None:
    index = str(tmp_path / "index")
    now = [datetime.now(UTC)]
    stale = WriterLease(index, "run-old", _settings(lease_ttl_s=60), clock=lambda: now[0])
    stale.acquire(0)
    stale._stop_heartbeat()  # a holder whose renewals stopped (a paused process, a partition)
    stale.host = "elsewhere"
    stale.held = True
    now[0] += timedelta(seconds=61)
    newer = WriterLease(index, "run-new", _settings(lease_ttl_s=60), clock=lambda: now[0])
    newer.host = "another-host"
    newer.acquire(0)
    with pytest.raises(
        IndexStateError, match="did not publish: its writer lease .* was taken by run run-new"
    ):
        stale.check()
    newer.check()
    newer.release()


def test_a_holder_killed_on_this_machine_frees_the_index_at_once(tmp_path: Path) -> None:
    index = str(tmp_path / "index")
    script = (
        "import sys, time\n"
        "from lazygraph.settings import load_settings\n"
        "from lazygraph.tables.lease import WriterLease\n"
        "WriterLease(sys.argv[1], 'run-killed', load_settings(writer={'lease_ttl_s': 600})).acquire(0)\n"
        "print('held', flush=True)\n"
        "time.sleep(600)\n"
    )
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    holder = subprocess.Popen(
        [sys.executable, "-c", script, index], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(IndexBusyError, match="run-killed"):
            WriterLease(index, "run-next", _settings()).acquire(0)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        lease = WriterLease(index, "run-next", _settings())
        lease.acquire(0)  # 600 s of time to live left, but its process is gone
        lease.release()
    finally:
        if holder.poll() is None:
            holder.kill()


def test_a_first_run_that_wrote_nothing_leaves_no_index_directory(tmp_path: Path) -> None:
    """A first run refused for its input leaves nothing behind; a run that wrote a table keeps its index,
    and so does an index that existed before the run."""
    empty = tmp_path / "never"
    with writer_lease(_settings(), str(empty), "run-refused"):
        assert (empty / "_writer_lease").is_dir()
    assert not empty.exists()

    written = tmp_path / "written"
    with writer_lease(_settings(), str(written), "run-wrote"):
        (written / "documents").mkdir()
    assert (written / "_writer_lease").is_dir() and (written / "documents").is_dir()

    with writer_lease(_settings(), str(written), "run-refused-later"):
        (written / "documents").rmdir()  # an index of the lease alone, which this run did not create
    assert (written / "_writer_lease").is_dir()
