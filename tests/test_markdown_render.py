"""Every command's markdown, read by a CommonMark parser with GitHub's tables (markdown-it-py, which
rich already installs): each table a reader sees has the cells kprof meant — the same count in
every row, each cell's text exactly the document's (kernel names with `|`, `<float>`, `*` or
backticks included), titles and notes as text, nothing swallowed as HTML."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from conftest import EAGER, GRAPH, ROOT
from kprof.cli import app
from kprof.report import table as table_module
from kprof.report.table import Cell, Column, Document, Table, render_markdown

RUNS = ROOT / "docs" / "runs"
TWICE = RUNS / "h200-2026-12-02-s17"  # one command run twice on the H200
COMMANDS = {
    "report": ["report", str(RUNS / "h200-2026-11-30-s3" / "gdn_pr")],
    "report-bisect": ["report", str(RUNS / "h200-2026-12-02-s16" / "fla_bisect")],
    "attribute": ["attribute", str(RUNS / "h200-2026-12-02-s16" / "fla_loo")],
    "attribute-sweep": ["attribute", str(RUNS / "h200-2026-11-30" / "mla_mechanism")],
    "compare": ["compare", str(TWICE / "mla_end_1"), str(TWICE / "mla_end_2")],
    "compare-traces": ["compare", str(EAGER), str(GRAPH)],
    "trace": ["trace", str(EAGER)],
    "kernels": ["kernels"],
}
PARSER = MarkdownIt("commonmark").enable("table")


def parsed_tables(markdown: str) -> list[list[list[str]]]:
    """Each table as rows of cell texts, header row first, as the parser reads them."""
    tables, rows, row, cell = [], [], [], None
    for token in PARSER.parse(markdown):
        if token.type == "table_open":
            rows = []
        elif token.type == "tr_open":
            row = []
        elif token.type in ("th_open", "td_open"):
            cell = ""
        elif token.type == "inline" and cell is not None:
            cell = "".join(child.content for child in token.children or [] if child.type in ("text", "code_inline"))
        elif token.type in ("th_close", "td_close"):
            row.append(cell)
            cell = None
        elif token.type == "tr_close":
            rows.append(row)
        elif token.type == "table_close":
            tables.append(rows)
    return tables


def document_tables(doc: Document) -> list[list[list[str]]]:
    def text(c: str | Cell) -> str:
        return c.text if isinstance(c, Cell) else c

    tables = []
    for b in (b for b in doc.blocks if isinstance(b, Table)):
        kept = [i for i, c in enumerate(b.columns) if not c.wide_only]  # markdown keeps the narrow set
        tables.append([[b.columns[i].header for i in kept], *[[text(row[i]) for i in kept] for row in b.rows]])
    return tables


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_commands_markdown_reads_as_its_tables(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Document] = []

    def keep(doc: Document) -> str:
        seen.append(doc)
        return render_markdown(doc)

    monkeypatch.setattr(table_module, "render_markdown", keep)
    res = CliRunner().invoke(app, [*COMMANDS[name], "--format", "md"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert len(seen) == 1
    expected = document_tables(seen[0])
    assert expected, "the command printed no table"
    assert parsed_tables(res.stdout) == expected
    assert "<" not in "".join(t.content for t in PARSER.parse(res.stdout) if t.type == "html_block")
    assert all(len(t[0]) <= 8 for t in expected), [t[0] for t in expected if len(t[0]) > 8]


def test_names_that_are_markup_stay_text() -> None:
    """A cell, title or note holding markdown's own characters reads back as written."""
    name = "void gemm<float, 4>(half*, int*) | `x` **y** \\z"
    doc = Document()
    t = doc.table(Table(f"kernels of {name}", [Column("kernel", "left", is_name=True), Column("µs")]))
    t.add(name, "1.0")
    t.add(Cell(name, "green"), "2.0", style="bold")
    t.notes.append(f"note on {name}")
    md = render_markdown(doc)
    assert parsed_tables(md) == [[["kernel", "µs"], [name, "1.0"], [name, "2.0"]]]
    html = PARSER.render(md)
    assert "<float" not in html and "&lt;float, 4&gt;" in html
    paragraphs = [t for t in PARSER.parse(md) if t.type == "inline" and "note on" in t.content]
    assert len(paragraphs) == 1 and "".join(c.content for c in paragraphs[0].children) == f"note on {name}"
