"""What a batch run tells its user: a live line while it runs and a summary at the end.

The counts come from the rows the driver writes; the LLM figures from each answer's cost record
(``result_json["cost"]``), so they add up what the answers cost, including the completions and
relevance verdicts an engine took from its LLM cache.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from lazygraph.query.cost import llm_tokens
from lazygraph.tables.results import STATUS_OK

# Where no live line can be drawn (a Ray job's log, a pipe), a plain line this often.
LOG_EVERY_S = 30.0


@dataclass
class BatchStats:
    """Running totals of one batch run; ``total`` is the number of queries this run answers."""

    total: int
    answered: int = 0
    failed: int = 0
    actor_restarts: int = 0
    retried: set[str] = field(default_factory=set)
    llm_tokens: int = 0
    llm_calls: int = 0
    llm_cache_hits: int = 0
    relevance_tests: int = 0
    costed_answers: int = 0
    answers_per_node: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)

    @property
    def done(self) -> int:
        return self.answered + self.failed

    @property
    def remaining(self) -> int:
        return self.total - self.done

    def record(self, row: dict[str, Any], node_id: str | None) -> None:
        """Count one written row; ``node_id`` is the node of the actor that answered (None: no actor did)."""
        if row["status"] == STATUS_OK:
            self.answered += 1
            self._add_cost(row.get("result_json"))
        else:
            self.failed += 1
        if node_id is not None:
            self.answers_per_node[node_id] += 1

    def _add_cost(self, result_json: str | None) -> None:
        cost = cost_record(result_json)
        if cost is None:
            return
        self.costed_answers += 1
        self.llm_tokens += llm_tokens(cost)
        self.llm_calls += int(cost.get("llm_calls", 0) or 0)
        self.llm_cache_hits += int(cost.get("llm_cache_hits", 0) or 0)
        self.relevance_tests += int(cost.get("relevance_tests", 0) or 0)

    def queries_per_minute(self) -> float:
        minutes = (time.monotonic() - self.started) / 60.0
        return self.done / minutes if minutes > 0 else 0.0

    def relevance_tests_per_second(self) -> float:
        seconds = time.monotonic() - self.started
        return self.relevance_tests / seconds if seconds > 0 else 0.0

    def cache_hit_rate(self) -> float | None:
        """Of the verdicts and completions the answers needed, the share the cache supplied."""
        base = self.llm_cache_hits + self.llm_calls
        return self.llm_cache_hits / base if base else None

    def status_line(self) -> str:
        rate = self.cache_hit_rate()
        return (
            f"{self.answered} done, {self.failed} failed, {len(self.retried)} retried, "
            f"{self.remaining} remaining, {self.queries_per_minute():.1f} queries/min, "
            f"{self.relevance_tests_per_second():.1f} relevance tests/s, "
            f"cache hits {'-' if rate is None else f'{rate:.0%}'}"
        )

    def to_report(self) -> dict[str, Any]:
        rate = self.cache_hit_rate()
        return {
            "actor_restarts": self.actor_restarts,
            "retried_queries": len(self.retried),
            "queries_per_minute": round(self.queries_per_minute(), 2),
            "llm_tokens": self.llm_tokens,
            "llm_tokens_per_answer": (
                round(self.llm_tokens / self.costed_answers, 1) if self.costed_answers else None
            ),
            "llm_calls": self.llm_calls,
            "llm_cache_hits": self.llm_cache_hits,
            "llm_cache_hit_rate": None if rate is None else round(rate, 4),
            "relevance_tests": self.relevance_tests,
            "relevance_tests_per_second": round(self.relevance_tests_per_second(), 3),
            "nodes": dict(self.answers_per_node),
        }


def cost_record(result_json: str | None) -> dict[str, Any] | None:
    """The ``cost`` of an answer's JSON record; None when it has none."""
    if not result_json:
        return None
    try:
        cost = json.loads(result_json).get("cost")
    except (ValueError, AttributeError):
        return None
    return cost if isinstance(cost, dict) else None


class BatchProgress:
    """A live progress line on a terminal; elsewhere a plain status line every ``LOG_EVERY_S`` seconds."""

    def __init__(self, console: Console, stats: BatchStats) -> None:
        self.console = console
        self.stats = stats
        self._progress: Progress | None = None
        self._task: Any = None
        self._last_line = time.monotonic()

    def __enter__(self) -> BatchProgress:
        if self.console.is_terminal:
            columns = (
                TextColumn("[bold]batch"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(),
            )
            self._progress = Progress(*columns, console=self.console, transient=False)
            self._progress.start()
            self._task = self._progress.add_task("queries", total=self.stats.total, status="")
        return self

    def update(self) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=self.stats.done, status=self.stats.status_line())
        elif time.monotonic() - self._last_line >= LOG_EVERY_S:
            self._print_line()

    def _print_line(self) -> None:
        self._last_line = time.monotonic()
        self.console.print(f"batch: {self.stats.status_line()}", highlight=False, soft_wrap=True)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self.update()
            self._progress.stop()
        else:
            self._print_line()


def summary_table(report: dict[str, Any]) -> Table:
    """The end-of-run summary of ``run_batch``'s report, for a person to read."""
    table = Table(title="batch summary", show_header=False, title_justify="left")
    table.add_column("what")
    table.add_column("value", justify="right")
    for label, value in _summary_rows(report):
        table.add_row(label, value)
    return table


def _summary_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    rate = report.get("llm_cache_hit_rate")
    per_answer = report.get("llm_tokens_per_answer")
    rows = [
        ("results table", str(report["out"])),
        ("queries in the file", str(report["queries"])),
        ("already answered before this run", str(report["skipped_already_ok"])),
        ("answered again: the index changed", str(report.get("stale_reanswered", 0))),
        ("answered now", str(report["answered"])),
        ("failed (error rows)", str(report["errors"])),
        ("not attempted", str(report["not_attempted"])),
        ("retried after an actor died", str(report.get("retried_queries", 0))),
        ("query actor restarts", str(report.get("actor_restarts", 0))),
        ("query actors / nodes", f"{report['actors']} / {len(report.get('nodes', {}))}"),
        ("seconds", f"{report['seconds']:.1f}"),
        ("queries per minute", f"{report.get('queries_per_minute', 0.0):.1f}"),
        ("LLM tokens per answer", "-" if per_answer is None else f"{per_answer:.0f}"),
        ("LLM cache hit rate", "-" if rate is None else f"{rate:.1%}"),
    ]
    if "llm_actor_restarts" in report:  # only when a shared LLM actor served the batch
        restarts = report["llm_actor_restarts"]
        rows.insert(8, ("shared LLM actor restarts", "unknown" if restarts is None else str(restarts)))
    return rows
