"""Run-mode decisions and error translation of the indexing pipeline (no Spark)."""

from __future__ import annotations

import json

import pytest

from lazygraph.errors import IndexStateError, InputError, SetupError
from lazygraph.manifest import documents_version as _documents_version
from lazygraph.pipeline import run_mode as _mode
from lazygraph.run_context import readable_error as _readable_error


def test_a_new_index_is_created() -> None:
    assert _mode(None, 10, append=False, input_path="in.jsonl", index="idx") == "create"
    # an interrupted first run is finished by the same command
    assert _mode(None, 0, append=False, input_path="in.jsonl", index="idx") == "create"


def test_same_input_again_is_a_rerun() -> None:
    assert _mode({"run_id": "r1"}, 0, append=False, input_path="in.jsonl", index="idx") == "rerun"
    assert _mode({"run_id": "r1"}, 0, append=True, input_path="in.jsonl", index="idx") == "rerun"


def test_new_documents_need_append() -> None:
    with pytest.raises(IndexStateError, match="--append"):
        _mode({"run_id": "r1"}, 3, append=False, input_path="in.jsonl", index="idx")
    assert _mode({"run_id": "r1"}, 3, append=True, input_path="in.jsonl", index="idx") == "append"


def test_documents_version_comes_from_the_manifest() -> None:
    run = {"versions_json": json.dumps({"tables": {"documents": [4, 120]}})}
    assert _documents_version(run) == 4
    assert _documents_version(None) is None


def test_spark_errors_become_one_line_messages() -> None:
    java = RuntimeError("An error occurred while calling o123.save.\n\tat org.apache.spark...")
    error = _readable_error("graph", java)
    assert isinstance(error, IndexStateError)
    assert "stage graph failed" in str(error) and "org.apache" not in str(error)
    assert isinstance(_readable_error("read", OSError("permission denied")), InputError)
    worker = RuntimeError("PythonException:\n  lazygraph.errors.SetupError: the spaCy model 'x' is missing")
    setup = _readable_error("concepts", worker)
    assert isinstance(setup, SetupError) and "spaCy model 'x'" in str(setup)
