"""docs/reliability.md's fault matrix names the tests that prove each row; keep the two in step."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MATRIX_MODULE = "tests/integration/test_fault_matrix.py"
NODE_ID = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def fault_matrix_rows() -> list[str]:
    text = (ROOT / "docs" / "reliability.md").read_text()
    section = text.split("## Fault matrix", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| scenario")]


def defined_tests(path: str) -> set[str]:
    tree = ast.parse((ROOT / path).read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_every_row_names_one_test_and_says_what_was_expected_and_observed():
    rows = fault_matrix_rows()
    assert len(rows) >= 7
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert len(cells) == 4, row
        scenario, expected, observed, test = cells
        assert scenario and expected and observed and observed != "TBD", row
        assert len(NODE_ID.findall(test)) == 1, row


def test_every_test_named_in_the_fault_matrix_exists():
    for row in fault_matrix_rows():
        for path, name in NODE_ID.findall(row):
            assert (ROOT / path).is_file(), f"{path} named in docs/reliability.md does not exist"
            assert name in defined_tests(path), f"{path}::{name} named in docs/reliability.md does not exist"


def test_every_fault_matrix_test_is_named_in_the_table():
    named = {(path, name) for row in fault_matrix_rows() for path, name in NODE_ID.findall(row)}
    missing = {name for name in defined_tests(MATRIX_MODULE) if (MATRIX_MODULE, name) not in named}
    assert missing == set(), f"tests of the fault matrix missing from docs/reliability.md: {sorted(missing)}"
