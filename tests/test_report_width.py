"""Every report stays readable in an 80-column terminal: no line is wider, and no number is cut
(a long kernel name may fold; the numbers beside it never do)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from conftest import EAGER, GRAPH, ROOT
from kprof.commands.analyse import analyse_run, attribute
from kprof.commands.compare import compare
from kprof.commands.trace import run_trace
from kprof.report.attribution_report import attribution_document
from kprof.report.compare_report import compare_document
from kprof.report.run_report import run_document
from kprof.report.table import Cell, Document, Table, render_rich
from kprof.report.trace_report import trace_document

RUNS = ROOT / "docs" / "runs"
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?%?")


def _at_80(doc: Document) -> str:
    buf = io.StringIO()
    render_rich(doc, Console(file=buf, width=80, force_terminal=True, color_system=None))
    return buf.getvalue()


def _check(doc: Document) -> None:
    text = _at_80(doc)
    assert max(len(line) for line in text.splitlines()) <= 80
    words = set(re.split(r"[\s│┃]+", text))
    for table in (b for b in doc.blocks if isinstance(b, Table)):
        shown = [i for i, c in enumerate(table.columns) if not c.wide_only and not c.is_name]
        for row in table.rows:
            for i in shown:
                cell = row[i].text if isinstance(row[i], Cell) else row[i]
                for number in NUMBER.findall(cell):
                    assert any(number in w for w in words), (table.title, cell)


def _loop_trace(tmp_path: Path, name: str, scale: float) -> Path:
    from test_compare import _loop_trace as make

    return make(tmp_path / name, 12, scale, seed=int(scale * 10))


def test_trace_reports_fit_80_columns() -> None:
    _check(trace_document(run_trace([EAGER, GRAPH]).tables, top=None))


def test_compare_reports_fit_80_columns(tmp_path: Path) -> None:
    _check(compare_document(compare(EAGER, GRAPH), top=None))
    steps = compare(_loop_trace(tmp_path, "a.json", 1.0), _loop_trace(tmp_path, "b.json", 1.1))
    _check(compare_document(steps, top=None))


@pytest.mark.parametrize(
    "run",
    [
        "h200-2026-11-30-s4/gdn_rev",
        "h200-2026-11-30-s4/prog_env",
        pytest.param("h200-2026-11-30/gdn_pr", marks=pytest.mark.slow),  # 7 s: CI's slow step
    ],
)
def test_run_and_attribution_reports_fit_80_columns(run: str) -> None:
    _check(run_document(analyse_run(RUNS / run)))
    _check(attribution_document(attribute(RUNS / run)))


def test_names_break_at_their_joints_never_inside_a_word() -> None:
    """A leg named by its levers wraps after a '+', a lever inside itself only after a '_', and a
    cut only where no joint fits ('reuse_state+stream_state+chunke' / 'd_state' before)."""
    from kprof.report.table import wrapped_name

    assert wrapped_name("reuse_state+conv_warps+chunked_state", 31) == "reuse_state+conv_warps+\nchunked_state"
    assert wrapped_name("skip_masked_tiles_and_more", 12) == "skip_masked_\ntiles_and_\nmore"
    assert wrapped_name("abcdefghijklmnopqrstuvwxyz", 10) == "abcdefghij\nklmnopqrst\nuvwxyz"
    assert wrapped_name("short", 20) == "short"
    for text, width in (("grouped_heads+prefetch_pages+skip_masked_tiles + spin 0 (A/A 2)", 20), ("a+b_c", 1)):
        lines = wrapped_name(text, width).split("\n")
        assert all(len(line) <= width for line in lines) and "".join(lines).replace(" ", "") == text.replace(" ", "")
    text = _at_80(run_document(analyse_run(RUNS / "h200-2026-11-30-s3" / "gdn_pr")))
    legs = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    pieces = {p for leg in legs for p in re.split(r"[+ ]", leg) if p}
    levers = {"reuse_state", "conv_warps", "stream_state", "chunked_state", "early_state", "baseline", "all"}
    assert pieces <= levers | {"plain", "PyTorch", "(A/A)"}, pieces - levers


def test_a_split_table_repeats_its_key_columns_in_every_part() -> None:
    """compare of two runs at 80 columns: the per-leg table is cut in two, and the second part was
    keyed by ``case`` alone, the same value on every row, so no verdict could be matched to its leg."""
    run = RUNS / "h200-2026-11-30-s3" / "gdn_pr"
    text = _at_80(compare_document(compare(run, run), top=None))
    headers = [
        [h.strip() for h in line.split("┃")[1:-1]]
        for line in text.splitlines()
        if line.startswith("┃") and "case" in line
    ]
    parts = [h for h in headers if h[:2] == ["case", "leg"]]
    assert len(parts) >= 2 and len(parts) == len(headers)  # split, and every part names case and leg
    assert any("verdict" in h for h in parts[1:])  # the verdicts sit in a later part, beside their legs
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "(continued)" in line)
    first = next(line for line in lines[start:] if line.startswith("│"))
    assert first.split("│")[2].strip().startswith("conv_warps+stream_state")  # the leg, not only the case
