"""The fault table of BENCHMARKS.md names tests that exist, and reads their outcomes right."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_faults  # noqa: E402


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test")
    }


@pytest.mark.parametrize("fault", sorted(bench_faults.FAULTS))
def test_every_fault_names_a_test_that_exists(fault: str) -> None:
    """A test renamed or moved would leave its fault in the table with no run behind it."""
    node = bench_faults.FAULTS[fault][2]
    file, _, name = node.partition("::")
    assert (ROOT / file).is_file(), f"{fault}: {file} does not exist"
    names = _test_names(ROOT / file)
    assert names, f"{fault}: {file} holds no test"
    if name:
        assert name in names, f"{fault}: {file} has no test {name}"


def test_a_fault_passes_a_round_only_when_every_one_of_its_tests_passed() -> None:
    outcomes = {
        "tests/a_test.py::test_one": (True, 1.0),
        "tests/a_test.py::test_two[x]": (False, 2.0),
        "tests/b_test.py::test_three": (True, 3.0),
    }
    assert bench_faults.fault_outcome("tests/a_test.py", outcomes) == (False, 3.0, 2)
    assert bench_faults.fault_outcome("tests/a_test.py::test_one", outcomes) == (True, 1.0, 1)
    assert bench_faults.fault_outcome("tests/a_test.py::test_two", outcomes) == (False, 2.0, 1)
    assert bench_faults.fault_outcome("tests/b_test.py", outcomes) == (True, 3.0, 1)
    assert bench_faults.fault_outcome("tests/c_test.py", outcomes) == (False, 0, 0), "a test that never ran"
