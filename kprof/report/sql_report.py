"""`kprof sql` output: the result table, as any other kprof table (terminal, markdown, CSV, JSON)."""

from __future__ import annotations

import pandas as pd

from kprof.report.table import Column, Document, Table, records
from kprof.report.trace_report import frame_rows


def sql_document(result: pd.DataFrame, tables: list[str], cut: bool = False) -> Document:
    doc = Document()
    text_columns = {c for c in result.columns if not pd.api.types.is_numeric_dtype(result[c])}
    table = Table(
        f"{len(result):,} rows",
        [Column(str(c), "left" if c in text_columns else "right", is_name=c in text_columns) for c in result.columns],
    )
    for row in frame_rows(result):
        table.add(*row)
    if cut:
        table.notes.append(f"the first {len(result):,} rows of a longer result (add LIMIT, or aggregate)")
    doc.table(table)
    doc.data = {"rows": records(result), "tables": tables, "cut": cut}
    doc.records = result
    return doc
