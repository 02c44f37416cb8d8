"""The logic that carries LLM calls through server failures: backoff, which failures pass, the circuit
breaker that pauses callers during an outage and resumes them together, and query deadlines that do not
count the pause."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import httpx
import openai
import pytest

from lazygraph.llm.resilience import (
    Backoff,
    CircuitBreaker,
    QueryTimeoutError,
    ServerDownError,
    call_timeout,
    in_context,
    is_transient,
    query_deadline,
    resilient_call,
)


def _status_error(status: int) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://llm/v1/chat/completions")
    return openai.APIStatusError(
        f"status {status}", response=httpx.Response(status, request=request), body=None
    )


def test_backoff_grows_exponentially_with_full_jitter_up_to_its_ceiling() -> None:
    backoff, rng = Backoff(base_s=0.5, max_s=4.0), random.Random(1)
    for retry, ceiling in ((1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (9, 4.0)):
        pauses = [backoff.pause(retry, rng) for _ in range(400)]
        assert min(pauses) >= 0 and max(pauses) <= ceiling
        assert max(pauses) > 0.9 * ceiling and min(pauses) < 0.1 * ceiling, "spread over the whole range"


def test_passing_failures_are_told_from_refusals() -> None:
    request = httpx.Request("POST", "http://llm/v1/chat/completions")
    assert is_transient(openai.APIConnectionError(request=request))
    assert is_transient(openai.APITimeoutError(request=request))
    for status in (408, 429, 500, 502, 503, 504):
        assert is_transient(_status_error(status)), status
    for status in (400, 401, 404, 422):
        assert not is_transient(_status_error(status)), status
    assert is_transient(TimeoutError()) and not is_transient(ValueError("bad json"))


class Server:
    """Stands in for a server: down (503) while ``down`` is set; counts what reached it."""

    def __init__(self) -> None:
        self.down = threading.Event()
        self.served = 0
        self.refused = 0
        self._lock = threading.Lock()

    def send(self, timeout: float) -> str:
        with self._lock:
            if self.down.is_set():
                self.refused += 1
                raise _status_error(503)
            self.served += 1
        return "ok"


def _call(server: Server, breaker: CircuitBreaker, max_retries: int = 2) -> Any:
    return resilient_call(
        server.send,
        breaker=breaker,
        timeout_s=5.0,
        max_retries=max_retries,
        backoff=Backoff(0.001, 0.01),
        describe=lambda exc, outcome: RuntimeError(f"gave up after {outcome.requests}"),
    )


def test_an_outage_pauses_every_caller_and_each_call_completes_once_it_is_over() -> None:
    server, breaker = Server(), CircuitBreaker("http://llm/v1", failures=3, probe_min_s=0.05, probe_max_s=0.1)
    server.down.set()
    results: list[Any] = []

    def worker() -> None:
        try:
            results.append(_call(server, breaker, max_retries=1))
        except Exception as exc:  # noqa: BLE001 - a lost call is what the test looks for
            results.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # far longer than one retry's backoff: without the breaker the calls would have failed
    assert breaker.is_open and not results, "callers wait while the server is down"
    refused_while_open = server.refused
    time.sleep(0.5)
    assert server.refused - refused_while_open <= 8, "only probes reach a server that is down"
    server.down.clear()
    for thread in threads:
        thread.join(timeout=5)
    assert results == ["ok"] * 8 and server.served == 8
    assert not breaker.is_open and breaker.stats()["opened"] == 1


def _settle(send: Any, breaker: CircuitBreaker, max_retries: int = 2) -> Any:
    try:
        return resilient_call(
            send,
            breaker=breaker,
            timeout_s=1.0,
            max_retries=max_retries,
            backoff=Backoff(0.001, 0.01),
            describe=lambda exc, o: RuntimeError(f"failed after {o.requests} requests"),
        )
    except RuntimeError as exc:
        return exc


def test_a_request_that_always_fails_fails_alone_while_the_server_is_up() -> None:
    """Its retries count as one failure, so it does not trip the breaker for others; alone, with nothing
    else succeeding, it takes the server for down once, the health probe finds it up, and after one more
    round of retries it fails."""
    probes: list[float] = []
    breaker = CircuitBreaker(
        "http://llm/v1", failures=2, probe_min_s=0.02, probe_max_s=0.05, probe=probes.append
    )
    sent: list[float] = []

    def poisoned(timeout: float) -> str:
        sent.append(timeout)
        raise _status_error(500)

    result = _settle(poisoned, breaker, max_retries=3)
    assert str(result) == "failed after 8 requests" and len(sent) == 8
    assert len(probes) == 1 and not breaker.is_open and breaker.opened == 1

    assert _settle(Server().send, breaker) == "ok", "the others go on"


def test_a_request_that_always_fails_cannot_hold_the_probes() -> None:
    """While the breaker is open, a poisoned request probes, fails and goes to the back of the line: a
    healthy one probes next and closes the breaker; the poisoned one then fails alone."""
    healthy, poisoned_sent = Server(), []
    breaker = CircuitBreaker("http://llm/v1", failures=2, probe_min_s=0.02, probe_max_s=0.05)

    def poisoned(timeout: float) -> str:
        poisoned_sent.append(timeout)
        raise _status_error(500)

    breaker.failed()
    breaker.failed()  # two calls failed in a row: the server looks down
    assert breaker.is_open
    outcome: dict[str, Any] = {}
    bad = threading.Thread(target=lambda: outcome.update(poisoned=_settle(poisoned, breaker)))
    bad.start()
    time.sleep(0.1)
    assert poisoned_sent, "the poisoned request was the first probe"
    good = threading.Thread(target=lambda: outcome.update(healthy=_settle(healthy.send, breaker)))
    good.start()
    good.join(timeout=5)
    assert outcome["healthy"] == "ok" and not breaker.is_open
    # Alone now, the poisoned call takes the server for down once; a health probe finds it up.
    breaker.probe = healthy.send
    bad.join(timeout=5)
    assert isinstance(outcome["poisoned"], RuntimeError) and not breaker.is_open


def test_an_outage_longer_than_the_limit_fails_the_waiting_calls() -> None:
    server = Server()
    server.down.set()
    breaker = CircuitBreaker(
        "http://llm/v1", failures=1, probe_min_s=0.01, probe_max_s=0.02, outage_max_s=0.3
    )
    started = time.monotonic()
    with pytest.raises(ServerDownError, match="unreachable for"):
        _call(server, breaker)
    assert 0.3 <= time.monotonic() - started < 3


def test_the_deadline_does_not_count_the_pause_and_bounds_each_request() -> None:
    server = Server()
    server.down.set()
    breaker = CircuitBreaker("http://llm/v1", failures=1, probe_min_s=0.05, probe_max_s=0.05)
    timeouts: list[float] = []

    def send(timeout: float) -> str:
        timeouts.append(timeout)
        return server.send(timeout)

    threading.Timer(0.6, server.down.clear).start()
    with query_deadline(0.5) as deadline:
        assert deadline is not None
        result = resilient_call(
            send,
            breaker=breaker,
            timeout_s=30.0,
            max_retries=0,
            backoff=Backoff(0.001, 0.01),
            describe=lambda exc, o: RuntimeError("lost"),
        )
        assert result == "ok", "0.6 s of outage did not use up 0.5 s of active time"
        assert deadline.paused_s >= 0.4 and max(timeouts) <= 0.5
        time.sleep(0.5)
        with pytest.raises(QueryTimeoutError, match=r"query\.timeout_s"):
            call_timeout(30.0)


def test_pool_threads_keep_the_callers_deadline() -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool, query_deadline(100.0):
        seen = list(pool.map(in_context(lambda _: call_timeout(500.0)), range(4)))
    assert all(90 < t <= 100 for t in seen)
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(call_timeout, 500.0).result() == 500.0
