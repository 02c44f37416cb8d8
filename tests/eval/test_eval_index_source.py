"""Evaluation always reads the in-memory snapshot: its rows need per-chunk data (ranks, breadth, the
relevance focus) that only the snapshot holds, so ``query.index_source: store`` must not reach it."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from lazygraph.eval import relevance, retrieval
from lazygraph.query.engine import QueryEngine
from lazygraph.settings import load_settings


class Opened(Exception):
    """Raised by the stand-in engine opener once it has seen the settings it was given."""


@pytest.fixture()
def opened_with(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    sources: list[str] = []

    def record(settings, index, console=None, **kwargs):
        sources.append(settings.query.index_source)
        raise Opened

    monkeypatch.setattr(QueryEngine, "open", staticmethod(record))
    return sources


@pytest.fixture()
def store_settings(tmp_path: Path):
    settings = load_settings(home=tmp_path)
    query = settings.query.model_copy(update={"index_source": "store"})
    return settings.model_copy(update={"query": query})


def test_relevance_calibration_opens_the_snapshot_whatever_the_source(
    store_settings, opened_with, questions_file: Path, tmp_path: Path
) -> None:
    with pytest.raises(Opened):
        relevance.calibrate_relevance(
            store_settings, "idx", questions_file, tmp_path / "out.json", Console(quiet=True)
        )
    assert opened_with == ["snapshot"]


def test_retrieval_eval_opens_the_snapshot_whatever_the_source(
    store_settings, opened_with, questions_file: Path, tmp_path: Path
) -> None:
    with pytest.raises(Opened):
        retrieval.run_retrieval_eval(
            store_settings, "idx", questions_file, 20, 1000, None, tmp_path / "out.json", Console(quiet=True)
        )
    assert opened_with == ["snapshot"]
