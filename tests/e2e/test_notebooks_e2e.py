"""The notebooks in notebooks/, executed headlessly on a real kernel, so that they keep working.

One sample index is built for the session (real Spark, spaCy and embeddings) and handed to every
notebook through ``LAZYGRAPH_NOTEBOOK_INDEX``; files the notebooks write go to a temporary folder
(``LAZYGRAPH_NOTEBOOK_FIGURES``, ``LAZYGRAPH_NOTEBOOK_OUT``), never into the checkout. A cell that
raises fails its test (nbclient's ``CellExecutionError``, with the cell's traceback). Beyond running,
each notebook is checked for what it is there to show: the index notebook draws and saves the
community hierarchy, the trace notebook judges chunks within its budget and answers with citations,
the sweep notebook writes its table and plot. The queries use the real embedded LLM at small budgets;
the LLM cache beside the index lets the sweep reuse the trace notebook's query.

The notebooks are stored without outputs (checked without a kernel, below), so they diff small.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
INDEX_NOTEBOOK = "01_index.ipynb"
TRACE_NOTEBOOK = "02_query_trace.ipynb"
SWEEP_NOTEBOOK = "03_cost_quality.ipynb"
# The slowest cell (the sweep: six answers on the CPU model) takes a few minutes on two cores.
CELL_TIMEOUT_S = 1800


def read_notebook(name: str) -> Any:
    import nbformat

    return nbformat.read(NOTEBOOKS / name, as_version=4)


def execute(name: str, **env: str) -> Any:
    """The notebook executed in a fresh ``python3`` kernel from notebooks/, with ``env`` added."""
    from nbclient import NotebookClient

    notebook = read_notebook(name)
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    client.execute(env={**os.environ, "OMP_WAIT_POLICY": "passive", **env})
    return notebook


def text_of(notebook: Any) -> str:
    """Everything the notebook's cells printed or displayed as text."""
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                parts.append(output.text)
            elif "text/plain" in output.get("data", {}):
                parts.append(output.data["text/plain"])
    return "\n".join(parts)


def images_of(notebook: Any) -> int:
    return sum("image/png" in o.get("data", {}) for c in notebook.cells for o in c.get("outputs", []))


def is_png(path: Path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


# ---- without a kernel ---------------------------------------------------------------------------------
def test_the_notebooks_are_stored_without_outputs_and_read_their_index_from_the_environment() -> None:
    stored = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    # A notebook added here must be executed below too.
    assert stored == [INDEX_NOTEBOOK, TRACE_NOTEBOOK, SWEEP_NOTEBOOK]
    for name in stored:
        notebook = read_notebook(name)
        assert notebook.metadata.kernelspec.name == "python3", name
        code = [c for c in notebook.cells if c.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in code), f"{name} has outputs"
        parameters = [c for c in code if "parameters" in c.metadata.get("tags", [])]
        assert len(parameters) == 1 and "LAZYGRAPH_NOTEBOOK_INDEX" in parameters[0].source, name


# ---- executed -------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def sample_index(settings, spark, tmp_path_factory) -> str:
    """The bundled sample corpus indexed once for every notebook."""
    from rich.console import Console

    from lazygraph.demo_data import sample_corpus_path
    from lazygraph.pipeline import build_index

    index = str(tmp_path_factory.mktemp("notebooks") / "sample-index")
    report = build_index(settings, str(sample_corpus_path()), index, False, Console(stderr=True))
    assert report["counts"]["chunks"] == 30
    return index


@pytest.mark.e2e
def test_the_python3_kernel_is_this_environment() -> None:
    import nbformat.v4 as v4
    from nbclient import NotebookClient

    notebook = v4.new_notebook(cells=[v4.new_code_cell("import sys, lazygraph; print(sys.prefix)")])
    NotebookClient(notebook, kernel_name="python3", timeout=120).execute()
    assert text_of(notebook).strip() == sys.prefix


@pytest.mark.e2e
def test_the_index_notebook_draws_and_saves_the_community_hierarchy(sample_index, tmp_path) -> None:
    notebook = execute(
        INDEX_NOTEBOOK, LAZYGRAPH_NOTEBOOK_INDEX=sample_index, LAZYGRAPH_NOTEBOOK_FIGURES=str(tmp_path)
    )
    text = text_of(notebook)
    assert "30 documents, 30 chunks" in text
    assert "parent links consistent: True" in text
    assert images_of(notebook) >= 2  # the distributions and the sunburst
    assert is_png(tmp_path / "community-hierarchy.png")


@pytest.mark.e2e
def test_the_trace_notebook_tests_chunks_within_its_budget_and_cites_them(sample_index) -> None:
    notebook = execute(TRACE_NOTEBOOK, LAZYGRAPH_NOTEBOOK_INDEX=sample_index)
    text = text_of(notebook)
    judged = re.search(r"(\d+) chunks judged, (\d+) passed", text)
    assert judged and int(judged[1]) >= 1, text[-3000:]
    spent = re.search(r"relevance tests: (\d+) of a budget of (\d+)", text)
    assert spent and 1 <= int(spent[1]) <= int(spent[2]) == 6, text[-3000:]
    assert re.search(r"\d+ of \d+ claims kept within \d+ context tokens", text)
    assert re.search(r"\d+ passages after \d+ claims: \d+ of \d+ context tokens used", text)
    answer = re.search(r"^A: (.*)$", text, re.MULTILINE)
    assert answer and "[Data: Sources (" in answer[1], text[-3000:]
    # Every cited chunk is printed in full, with its document.
    cited = re.findall(r"[0-9a-f]{16}", answer[1])
    assert cited and all(f"chunk {chunk_id} — part" in text for chunk_id in cited[:2])


@pytest.mark.e2e
def test_the_sweep_notebook_writes_its_table_and_plot(sample_index, tmp_path) -> None:
    notebook = execute(
        SWEEP_NOTEBOOK, LAZYGRAPH_NOTEBOOK_INDEX=sample_index, LAZYGRAPH_NOTEBOOK_OUT=str(tmp_path)
    )
    assert is_png(tmp_path / "sweep.png")
    assert images_of(notebook) >= 1  # the plot, shown
    summary = json.loads((tmp_path / "sweep.summary.json").read_text())
    assert summary["quality"] == "recall" and summary["n_questions"] == 2
    cells = {(r["method"], r["budget"]): r for r in summary["results"]}
    assert set(cells) == {("lazy", 3), ("lazy", 6), ("vector", None)}
    for (_, budget), result in cells.items():
        assert result["n"] == 2 and 0.0 <= result["recall"] <= 1.0
        assert result["mean_relevance_tests"] <= (budget or 0)
        assert result["mean_llm_tokens"] > 0  # fresh and cached calls: every answer has its cost
    rows = [json.loads(line) for line in (tmp_path / "sweep.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and all(r["answer"] for r in rows)
