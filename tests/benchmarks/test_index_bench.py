"""``lazygraph bench index``'s per-stage CPU figures: which samples each stage of a run gets."""

from __future__ import annotations

import time

from lazygraph.bench.index import CpuTimeline, stage_cpu


def test_each_stage_gets_the_samples_that_end_inside_it() -> None:
    started = 100.0
    timings = {"spark": 0.2, "concepts": 3.0, "graph": 2.0, "manifest": 0.5, "store": 2.0}
    # one sample a second, each covering the second before it
    samples = [(101.0, 100.0), (102.0, 98.0), (103.0, 96.0), (104.0, 50.0), (105.0, 40.0), (106.0, 90.0)]
    cpu = stage_cpu(samples, started, timings)
    # concepts: (100.2, 103.2]; graph: (103.2, 105.2]; manifest: (105.2, 105.7] holds no sample
    assert cpu == {"concepts": 98.0, "graph": 45.0, "store": 90.0}


def test_the_timeline_samples_in_the_background() -> None:
    with CpuTimeline(interval=0.2) as cpu:
        deadline = time.perf_counter() + 1.0
        while time.perf_counter() < deadline:  # keep one core busy
            sum(range(1000))
    assert len(cpu.samples) >= 3
    assert all(0.0 <= pct <= 100.0 for _, pct in cpu.samples) and max(p for _, p in cpu.samples) > 0
    times = [at for at, _ in cpu.samples]
    assert times == sorted(times)
