"""Calls to an LLM server that survive its failures: timeouts, retries with backoff, a circuit breaker.

A nightly batch against a shared server must neither hang on a request nobody answers nor turn a
server restart into a table of error rows. Three mechanisms, used by the OpenAI-compatible backend
(``openai_backend``) and, for the deadline, by every client:

- **Deadlines.** Every request has a timeout (``llm.*.timeout_s``); a query may also have a limit on its
  *active* time (``query.timeout_s``: time spent waiting for a server that is down does not count),
  checked before each LLM call and capping each request's timeout (``query_deadline``).
- **Retries.** A request that fails for a reason that may pass (no connection, a timeout, 408/409/429,
  5xx) is sent again after an exponentially growing pause with full jitter (``Backoff``), at most
  ``llm.*.max_retries`` times while the server answers other requests. Any other failure (400, 401,
  404: a bad request, key or model) fails at once.
- **A circuit breaker** per server (``breaker_for``, shared by every client of one endpoint in the
  process). Once ``llm.*.breaker_failures`` different calls have failed with no success between them
  (the retries of one call count once, so one request the server always fails cannot trip it), or a
  call has spent its retries while nothing at all succeeded, the server counts as down: requests stop
  going out, and every caller waits. The server's model list is probed at growing intervals up to
  ``llm.*.breaker_probe_max_s``; the first probe that succeeds closes the breaker and every caller
  resumes at once. Waiting callers are not failed and spend none of
  their retries, so a server that is down for minutes costs a batch those minutes and nothing else;
  only after ``llm.*.outage_max_s`` of outage do the waiting calls fail.
"""

from __future__ import annotations

import contextvars
import itertools
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from lazygraph.errors import LLMError

# ---- deadlines ---------------------------------------------------------------------------------------


class QueryTimeoutError(LLMError):
    """A query used up its active time (``query.timeout_s``)."""


@dataclass
class Deadline:
    """A limit on a query's active time: wall time less the time it spent paused for a server outage."""

    limit_s: float
    started: float = field(default_factory=time.monotonic)
    paused_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def remaining(self) -> float:
        with self._lock:
            return self.limit_s - (time.monotonic() - self.started - self.paused_s)

    def add_pause(self, seconds: float) -> None:
        with self._lock:
            self.paused_s += max(0.0, seconds)

    def check(self) -> None:
        if self.remaining() <= 0:
            raise QueryTimeoutError(
                f"the query used up its {self.limit_s:g} s (query.timeout_s) before its LLM work was done; "
                "raise query.timeout_s, lower the budget, or check the LLM server's speed"
            )


_DEADLINE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "lazygraph_deadline", default=None
)


@contextmanager
def query_deadline(limit_s: float | None) -> Iterator[Deadline | None]:
    """Every LLM call made inside the block (in this thread, or a thread started with a copy of its
    context) is checked against, and bounded by, one deadline of ``limit_s`` active seconds."""
    deadline = Deadline(limit_s) if limit_s else None
    token = _DEADLINE.set(deadline)
    try:
        yield deadline
    finally:
        _DEADLINE.reset(token)


def current_deadline() -> Deadline | None:
    return _DEADLINE.get()


def call_timeout(per_call_s: float) -> float:
    """A request's timeout: the per-call limit, or less when the query's active time runs out first."""
    deadline = current_deadline()
    if deadline is None:
        return per_call_s
    deadline.check()
    return max(0.001, min(per_call_s, deadline.remaining()))


def in_context(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` to be run in a pool thread with the caller's context (and so its deadline)."""
    context = contextvars.copy_context()
    # One copy per call: a context can be entered by one thread at a time.
    return lambda *args, **kwargs: context.copy().run(function, *args, **kwargs)


# ---- retries -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter: before retry n (1, 2, ...), a pause drawn uniformly from
    [0, min(max_s, base_s * 2**(n-1))]."""

    base_s: float = 0.5
    max_s: float = 8.0

    def pause(self, retry: int, rng: random.Random | None = None) -> float:
        ceiling = min(self.max_s, self.base_s * 2 ** max(0, retry - 1))
        return (rng or random).uniform(0.0, ceiling)


TRANSIENT_STATUS = frozenset({408, 409, 425, 429})


def is_transient(exc: BaseException) -> bool:
    """Whether a failed request may succeed if sent again (the server was unreachable, slow or
    overloaded), as opposed to a request the server refused for what it is."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status >= 500 or status in TRANSIENT_STATUS
    try:
        import openai

        if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
            return True
    except ImportError:  # pragma: no cover - openai is a hard dependency
        pass
    return isinstance(exc, (TimeoutError, ConnectionError))


# ---- the circuit breaker -----------------------------------------------------------------------------


class ServerDownError(LLMError):
    """The server stayed down longer than ``llm.*.outage_max_s``."""


@dataclass
class BreakerState:
    opened_at: float | None = None
    probe_at: float = 0.0
    interval_s: float = 0.0
    probing: int | None = None  # the ticket of the caller running the probe


# A probe of the server's health: returns normally when the server answers (whatever it answers, other
# than a passing failure), raises when it does not. Given the request timeout.
Probe = Callable[[float], Any]


class CircuitBreaker:
    """Tells whether one server is up; while it is down (open), callers wait in ``admit``.

    It opens when ``failures`` different calls have failed in a row with no success between them, or
    when a call has spent its retries and no request at all has succeeded since it first failed
    (``trip``). While open, the waiting caller with the lowest ticket probes the server when the next
    probe is due, with ``probe`` (a cheap health request, e.g. the model list) or, without one, by
    sending its own request (``admit`` then returns its ticket); a failed probe puts that caller at the
    back of the line, so a request that fails for reasons of its own cannot hold the probes. The first
    probe that succeeds closes the breaker and every waiting caller goes on at once.
    """

    def __init__(
        self,
        name: str,
        failures: int = 5,
        probe_min_s: float = 0.25,
        probe_max_s: float = 2.0,
        outage_max_s: float = 3600.0,
        probe: Probe | None = None,
        probe_timeout_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.threshold = failures
        self.probe_min_s = min(probe_min_s, probe_max_s)
        self.probe_max_s = probe_max_s
        self.outage_max_s = outage_max_s
        self.probe = probe
        self.probe_timeout_s = probe_timeout_s
        self._clock = clock
        self._cond = threading.Condition()
        self._tickets = itertools.count()
        self._waiting: set[int] = set()
        self.consecutive = 0  # different calls failed since the last success
        self._counted: set[int] = set()  # the calls counted in ``consecutive``
        self.successes = 0  # requests (and probes) that succeeded, ever
        self.state = BreakerState()
        self.opened = 0  # how many times it opened (outages seen)
        self.paused_s = 0.0  # caller-seconds spent waiting

    @property
    def enabled(self) -> bool:
        return self.threshold > 0

    @property
    def is_open(self) -> bool:
        return self.state.opened_at is not None

    def admit(self) -> tuple[int | None, bool]:
        """Wait until a request may go out. Returns (ticket, waited): ``ticket`` is set when the caller's
        own request is the probe (pass it to ``succeeded``/``failed``); ``waited`` tells that the server
        was down. The time waited is a pause of the query's deadline; ServerDownError once the outage
        has lasted ``outage_max_s``."""
        with self._cond:
            if not self.is_open:
                return None, False
            ticket = next(self._tickets)
            self._waiting.add(ticket)
        started = self._clock()
        try:
            while True:
                if self._wait_for_turn(ticket):
                    return None, True  # closed while waiting
                if self.probe is None:
                    return ticket, True
                if self._run_probe():
                    self.succeeded(ticket)
                    return None, True
                self.failed(ticket)
        finally:
            with self._cond:
                self._waiting.discard(ticket)
                waited = self._clock() - started
                self.paused_s += waited
            deadline = current_deadline()
            if deadline is not None:
                deadline.add_pause(waited)

    def _wait_for_turn(self, ticket: int) -> bool:
        """Wait until the breaker closes (True) or this caller is to probe (False; it is marked so)."""
        with self._cond:
            while True:
                state = self.state
                if state.opened_at is None:
                    return True
                now = self._clock()
                if now - state.opened_at > self.outage_max_s:
                    raise ServerDownError(
                        f"{self.name} has been unreachable for {now - state.opened_at:.0f} s "
                        f"(llm.*.outage_max_s is {self.outage_max_s:g}); start it, or check "
                        "llm.*.base_url, then run the same command again to finish the work"
                    )
                if state.probing is None and now >= state.probe_at and ticket == min(self._waiting):
                    state.probing = ticket
                    return False
                wake = state.probe_at - now if state.probing is None else self.probe_max_s
                self._cond.wait(timeout=max(0.01, min(wake, 1.0)))

    def _run_probe(self) -> bool:
        assert self.probe is not None
        try:
            self.probe(self.probe_timeout_s)
        except Exception as exc:  # noqa: BLE001 - any answer but a passing failure means the server is up
            return not is_transient(exc)
        return True

    def succeeded(self, ticket: int | None = None) -> None:
        with self._cond:
            self.consecutive = 0
            self._counted.clear()
            self.successes += 1
            if self.is_open:
                self.state = BreakerState()
                self._cond.notify_all()

    def failed(self, ticket: int | None = None, call: object | None = None) -> None:
        """A passing failure of ``call`` (any object standing for one logical call; None: a call of its
        own); opens the breaker at the threshold, or re-arms the next probe after a failed one."""
        with self._cond:
            key = id(call) if call is not None else -next(self._tickets) - 1
            if key not in self._counted:
                self._counted.add(key)
                self.consecutive += 1
            state = self.state
            if state.opened_at is None:
                if self.enabled and self.consecutive >= self.threshold:
                    self._open()
                return
            if ticket is not None and state.probing == ticket:
                state.interval_s = min(self.probe_max_s, max(self.probe_min_s, state.interval_s * 2))
                state.probe_at = self._clock() + state.interval_s
                state.probing = None
                self._cond.notify_all()

    def trip(self) -> None:
        """Open the breaker now: a call spent its retries while no request succeeded."""
        with self._cond:
            if self.enabled and not self.is_open:
                self._open()

    def _open(self) -> None:
        now = self._clock()
        self.opened += 1
        self.state = BreakerState(opened_at=now, probe_at=now + self.probe_min_s, interval_s=self.probe_min_s)

    def released(self, ticket: int | None) -> None:
        """The probe ended without telling anything about the server (a refused request)."""
        with self._cond:
            if ticket is not None and self.state.probing == ticket:
                self.state.probing = None
                self._cond.notify_all()

    def stats(self) -> dict[str, Any]:
        with self._cond:
            return {"open": self.is_open, "opened": self.opened, "paused_s": round(self.paused_s, 3)}


_BREAKERS: dict[str, CircuitBreaker] = {}
_BREAKERS_LOCK = threading.Lock()


def breaker_for(endpoint: str, cfg: Any, probe: Probe | None = None) -> CircuitBreaker:
    """The process's breaker of one server (by its base URL), built from the first client's settings."""
    key = endpoint.rstrip("/")
    with _BREAKERS_LOCK:
        if key not in _BREAKERS:
            _BREAKERS[key] = CircuitBreaker(
                key,
                failures=cfg.breaker_failures,
                probe_max_s=cfg.breaker_probe_max_s,
                outage_max_s=cfg.outage_max_s,
                probe=probe,
                probe_timeout_s=min(cfg.timeout_s, 10.0),
            )
        return _BREAKERS[key]


# ---- the retry loop ----------------------------------------------------------------------------------


@dataclass
class CallOutcome:
    """What one logical call took: requests sent and retries spent (for messages and tests)."""

    requests: int = 0
    retries: int = 0
    successes_at_failure: int | None = None  # the breaker's success count when this call first failed
    tripped: bool = False


def resilient_call(
    send: Callable[[float], Any],
    *,
    breaker: CircuitBreaker,
    timeout_s: float,
    max_retries: int,
    backoff: Backoff,
    describe: Callable[[BaseException, CallOutcome], LLMError],
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """``send(timeout)`` until it succeeds.

    A passing failure is retried with backoff (``max_retries`` times); while the breaker is open the
    call waits instead, spending no retry, and starts its retries afresh once the server is back. A call
    that spends its retries while no request at all has succeeded since it first failed takes the
    server for down (``trip``) and waits once; any other failure, or running out of retries again,
    becomes ``describe(exc, outcome)``."""
    outcome = CallOutcome()
    while True:
        ticket, waited = breaker.admit()
        if waited:  # the server was down: a fresh start once it is back
            outcome.retries, outcome.successes_at_failure = 0, None
        try:
            timeout = call_timeout(timeout_s)
        except LLMError:
            breaker.released(ticket)
            raise
        outcome.requests += 1
        try:
            result = send(timeout)
        except Exception as exc:
            if not is_transient(exc):
                breaker.released(ticket)
                raise describe(exc, outcome) from exc
            if outcome.successes_at_failure is None:
                outcome.successes_at_failure = breaker.successes
            was_open = breaker.is_open
            breaker.failed(ticket, outcome)
            if was_open or breaker.is_open:
                continue  # the breaker decides when to send it again; no retry spent
            if outcome.retries >= max_retries:
                if (
                    breaker.enabled
                    and not outcome.tripped
                    and breaker.successes == outcome.successes_at_failure
                ):
                    outcome.tripped = True  # nothing has succeeded since: the server is down, not this call
                    breaker.trip()
                    continue
                raise describe(exc, outcome) from exc
            outcome.retries += 1
            pause = backoff.pause(outcome.retries)
            deadline = current_deadline()
            if deadline is not None and pause >= deadline.remaining():
                raise describe(exc, outcome) from exc
            sleep(pause)
            continue
        breaker.succeeded(ticket)
        return result
