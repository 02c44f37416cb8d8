"""Run-mode decisions and error translation of the indexing pipeline (no Spark)."""

from __future__ import annotations

import json

import pytest

from lazygraph.errors import IndexStateError, InputError, SetupError, SparkMemoryError
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


def test_a_task_out_of_heap_says_which_memory_to_raise() -> None:
    # as Spark reported it when the graph stage of a million synthetic chunks ran on a 4g local driver
    java = RuntimeError(
        "An error occurred while calling o446.save.\n: org.apache.spark.SparkException: Job aborted due to "
        "stage failure: Task 13 in stage 42.0 failed 1 times, most recent failure: Lost task 13.0 in stage "
        "42.0 (TID 165) (192.0.2.2 executor driver): scala.MatchError: java.lang.OutOfMemoryError: Java "
        "heap space"
    )
    error = _readable_error("graph", java)
    assert isinstance(error, SparkMemoryError)
    assert "LAZYGRAPH_SPARK__DRIVER_MEMORY" in str(error) and "stage graph" in str(error)
    assert "org.apache" not in str(error)
    # any other failure keeps the general message
    assert not isinstance(
        _readable_error("graph", RuntimeError("o1.save failed: disk full")), SparkMemoryError
    )
