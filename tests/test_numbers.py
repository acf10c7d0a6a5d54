"""Numbers in a column share one count of decimals (kprof.report.numbers), in every report."""

from __future__ import annotations

import re

from conftest import EAGER, ROOT
from kprof.commands.analyse import analyse_run
from kprof.commands.trace import run_trace
from kprof.report.numbers import column_decimals, number_column
from kprof.report.run_report import run_document
from kprof.report.table import Cell, Table
from kprof.report.trace_report import trace_document


def test_a_column_gets_the_decimals_its_smallest_value_needs() -> None:
    assert number_column([13.011, 159.86, 3987.82]) == ["13.01", "159.86", "3,987.82"]
    assert number_column([276.7, 54.34, 11.65]) == ["276.70", "54.34", "11.65"]
    assert number_column([0.5123, 12.0]) == ["0.512", "12.000"]  # at most three decimals
    assert number_column([12.493, 1.518], significant=3) == ["12.49", "1.52"]
    assert number_column([None, float("nan"), 2.5]) == ["–", "–", "2.500"]
    assert column_decimals([0.0, 0.0]) == 0 and column_decimals([]) == 0


def _decimals(cell: str | Cell) -> int | None:
    text = cell.text if isinstance(cell, Cell) else cell
    match = re.fullmatch(r"-?[\d,]+(?:\.(\d+))?", text)
    return None if match is None else len(match.group(1) or "")


def _uniform(table: Table, header: str) -> None:
    i = [c.header for c in table.columns].index(header)
    counts = {_decimals(row[i]) for row in table.rows} - {None}
    assert len(counts) == 1, (table.title, header, [row[i] for row in table.rows])


def test_every_time_column_of_a_report_has_one_count_of_decimals() -> None:
    doc = run_document(analyse_run(ROOT / "docs" / "runs" / "h200-2026-11-30-s3" / "gdn_pr"))
    cases = [b for b in doc.blocks if isinstance(b, Table) and b.columns[1].header == "µs (median)"]
    assert cases
    for table in cases:  # 13.011 sat above 159.9 in one column
        _uniform(table, "µs (median)")
    trace = trace_document(run_trace([EAGER]).tables, top=None)
    kernels = next(b for b in trace.blocks if isinstance(b, Table) and b.title.startswith("per kernel"))
    for header in ("total µs", "mean", "median", "p90", "% busy"):  # 276.7 sat above 54.34
        _uniform(kernels, header)
