"""One model of what a report prints — paragraphs and tables — rendered four ways: a rich terminal,
markdown a PR can quote, CSV and JSON.

Report modules build a :class:`Document` from analysis results; they never format for a particular
output. A cell may carry a style (a verdict's colour): the terminal uses it, markdown ignores it,
so nothing is ever parsed back out of formatted text.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from kprof.report.console import output_console

VERDICT_STYLE = {
    "FASTER": "green",
    "SLOWER": "red",
    "SAME": "cyan",
    "UNRESOLVED": "yellow",
    "BIASED": "magenta",
    "REFERENCE": "dim",
    "MEASURED": "dim",
    "NO BASELINE": "dim",
}


@dataclass(frozen=True)
class Cell:
    text: str
    style: str = ""
    whole: bool = False  # never wrapped in a terminal (a verdict: 'ONLY IN' over 'A' reads as two)


def verdict_cell(text: str, verdict: str) -> Cell:
    return Cell(text, VERDICT_STYLE.get(verdict, ""), whole=text == verdict)


@dataclass(frozen=True)
class Column:
    header: str
    align: str = "right"  # "left" for names and labels
    is_name: bool = False  # may be folded to fit the terminal; numbers never are
    wide_only: bool = False  # left out of terminals narrower than WIDE_TERMINAL (kept in files)
    key: bool = False  # names the row with the other key columns: repeated when a table is split


WIDE_TERMINAL = 150
NAME_MIN_WIDTH = 20


@dataclass
class Table:
    title: str
    columns: list[Column]
    rows: list[list[str | Cell]] = field(default_factory=list)
    row_styles: list[str] = field(default_factory=list)  # per row ("" for none): e.g. dim warm-up steps
    notes: list[str] = field(default_factory=list)  # lines printed under the table

    def add(self, *cells: str | Cell, style: str = "") -> None:
        self.rows.append(list(cells))
        self.row_styles.append(style)


@dataclass
class Paragraph:
    text: str
    style: str = ""  # terminal only: "bold", "warning", "error", "rule"


Block = Paragraph | Table


@dataclass
class Document:
    """What a command prints, and (``data``) the machine-readable payload of ``--format json``;
    ``records`` is the flat table of ``--format csv``."""

    blocks: list[Block] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    records: pd.DataFrame | None = None

    def text(self, text: str, style: str = "") -> None:
        self.blocks.append(Paragraph(text, style))

    def table(self, table: Table) -> Table:
        self.blocks.append(table)
        return table

    def extend(self, other: Document) -> None:
        self.blocks += other.blocks


def _plain(cell: str | Cell) -> str:
    return cell.text if isinstance(cell, Cell) else cell


def _rich_cell(cell: str | Cell, width: int | None = None) -> str:
    """Markup for one cell; a name given a ``width`` is wrapped first at the joints of identifiers."""
    text = cell.text if isinstance(cell, Cell) else cell
    text = escape(wrapped_name(text, width) if width else text)
    style = cell.style if isinstance(cell, Cell) else ""
    return f"[{style}]{text}[/{style}]" if style else text


# where a name may break, the stronger joints first: a leg is levers joined by +, a lever is words
# joined by _, a C++ name is arguments joined by , and spaces
_JOINTS = (re.compile(r"(?<=[+,/ (])"), re.compile(r"(?<=_)"))


def wrapped_name(text: str, width: int) -> str:
    """``text`` in lines of at most ``width``, broken after a joint where one fits:
    ``reuse_state+conv_warps+`` / ``chunked_state``, never ``…chunke`` / ``d_state``; an ``_`` only
    inside a piece too long for a line, and a cut only where no joint fits."""
    return "\n".join(_packed(text, width, 0))


def _packed(text: str, width: int, level: int) -> list[str]:
    pieces: list[str] = []
    for piece in _JOINTS[level].split(text):
        if len(piece) <= width:
            pieces.append(piece)
        elif level + 1 < len(_JOINTS):
            pieces += _packed(piece, width, level + 1)
        else:
            pieces += [piece[k : k + width] for k in range(0, len(piece), width)]
    lines = [""]
    for piece in pieces:
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines.append("")
        lines[-1] += piece
    return [line.rstrip() or line for line in lines]


PARAGRAPH_STYLE = {"warning": "[yellow]warning:[/yellow] ", "error": "[red]error:[/red] "}


def render_rich(doc: Document, console: Console) -> None:
    for block in doc.blocks:
        if isinstance(block, Paragraph):
            if block.style == "rule" and console.is_terminal:
                console.rule(f"[bold]{escape(block.text)}")
            elif block.style == "rule":  # a rule as wide as a file's layout would be thousands of ─
                console.print(f"── {escape(block.text)} ──")  # folded at COLUMNS, if given
            elif block.style == "bold":
                console.print(f"[bold]{escape(block.text)}[/bold]")
            else:
                console.print(PARAGRAPH_STYLE.get(block.style, "") + escape(block.text))
            continue
        shown = [i for i, c in enumerate(block.columns) if console.width >= WIDE_TERMINAL or not c.wide_only]
        for part, columns in enumerate(_column_groups(block, shown, console.width)):
            title = block.title if part == 0 else f"{block.title} (continued)"
            console.print(_rich_table(block, columns, title, _fitted_widths(block, columns, console.width)))
        if dropped := [c.header for i, c in enumerate(block.columns) if i not in shown]:
            said = f"not shown at {console.width} columns: {', '.join(dropped)} (in --format csv, json)"
            console.print("  " + escape(said))
        for note in block.notes:
            console.print("  " + escape(note))


def _min_width(block: Table, i: int) -> int:
    """Numbers are never cut: a cell may wrap at its spaces, never inside a word; a name may fold
    anywhere once it is NAME_MIN_WIDTH wide. A header wraps at its spaces too."""
    c = block.columns[i]
    texts = [_plain(row[i]) for row in block.rows] or [""]
    header = max((len(w) for w in c.header.split()), default=0)
    if c.is_name:
        return max(min(max(len(t) for t in texts), NAME_MIN_WIDTH), min(header, NAME_MIN_WIDTH))
    whole = max((len(cell.text) for row in block.rows if isinstance(cell := row[i], Cell) and cell.whole), default=0)
    return max(header, whole, max((len(w) for t in texts for w in t.split()), default=0))


def _natural_width(block: Table, i: int) -> int:
    return max([len(block.columns[i].header)] + [len(_plain(row[i])) for row in block.rows])


_CELL_FRAME = 3  # a column's padding and its border


def _column_groups(block: Table, shown: list[int], width: int) -> list[list[int]]:
    """Columns that fit ``width`` side by side, as one group; a wider table (a case × lever matrix)
    is cut into groups that each repeat the key columns (else the first), so no column is cropped
    and every row of every group says what it is."""
    need = {i: _min_width(block, i) + _CELL_FRAME for i in shown}
    keys = [i for i in shown if block.columns[i].key] or shown[:1]
    if sum(need.values()) + 1 <= width or len(shown) < len(keys) + 2:
        return [shown]
    start = sum(need[i] for i in keys) + 1
    groups, current, used = [], list(keys), start
    for i in (i for i in shown if i not in keys):
        if used + need[i] > width and len(current) > len(keys):
            groups.append(current)
            current, used = list(keys), start
        current.append(i)
        used += need[i]
    groups.append(current)
    return groups


def _fitted_widths(block: Table, columns: list[int], width: int) -> list[int] | None:
    """Column widths when the table does not fit as it is: every column gets its minimum, and the
    space left goes to the columns that want more, in proportion (rich's own shrinking can crop
    the last column of a matrix)."""
    natural = [_natural_width(block, i) for i in columns]
    room = width - _CELL_FRAME * len(columns) - 1
    if sum(natural) <= room:
        return None
    least = [_min_width(block, i) for i in columns]
    spare = max(room - sum(least), 0)
    want = [n - m for n, m in zip(natural, least)]
    total = sum(want) or 1
    return [m + (spare * w) // total for m, w in zip(least, want)]


def _rich_table(block: Table, columns: list[int], title: str, widths: list[int] | None) -> RichTable:
    t = RichTable(title=escape(title), title_justify="left")
    for k, i in enumerate(columns):
        c = block.columns[i]
        fixed = widths[k] if widths else None
        t.add_column(escape(c.header), justify=c.align, overflow="fold", min_width=_min_width(block, i), width=fixed)
    wraps = [widths[k] if widths and block.columns[i].is_name else None for k, i in enumerate(columns)]
    for cells, style in zip(block.rows, block.row_styles):
        t.add_row(*(_rich_cell(cells[i], w) for i, w in zip(columns, wraps)), style=style or None)
    return t


_MARKDOWN_SPECIAL = str.maketrans({c: "\\" + c for c in "\\|<*`"})


def _md_escape(text: str) -> str:
    """Kernel names as text, not markup: ``|`` would end a cell, ``<float>`` is an HTML tag to
    GitHub (dropped from the page), ``*`` and backticks start emphasis and code."""
    return text.translate(_MARKDOWN_SPECIAL)


def markdown_table(columns: Sequence[Column], rows: Sequence[Sequence[str | Cell]], bold: Sequence[bool]) -> list[str]:
    """Cells escaped, then the rows marked in ``bold`` emphasised (escaping after would show the ``**``)."""

    def cells(row: Sequence[str | Cell], strong: bool) -> str:
        texts = [_md_escape(_plain(c)) for c in row]
        return " | ".join(f"**{t}**" if strong and t else t for t in texts)

    lines = ["| " + " | ".join(_md_escape(c.header) for c in columns) + " |"]
    lines.append("|" + "|".join(":---" if c.align == "left" else "---:" for c in columns) + "|")
    lines += ["| " + cells(row, b) + " |" for row, b in zip(rows, bold, strict=True)]
    return lines


def render_markdown(doc: Document) -> str:
    """Every text is escaped (kernel names reach titles, notes and warnings too); styles add markup.
    A table keeps the columns a narrow terminal keeps: a pull request shows a few before it scrolls
    (a trace's kernel table had 12)."""
    lines: list[str] = []
    for block in doc.blocks:
        if isinstance(block, Paragraph):
            prefix = {"rule": "### ", "bold": "**", "warning": "> warning: ", "error": "> error: "}.get(block.style, "")
            suffix = "**" if block.style == "bold" else ""
            lines += [f"{prefix}{_md_escape(block.text)}{suffix}", ""]
            continue
        if block.title:
            lines += [f"**{_md_escape(block.title)}**", ""]
        kept = [i for i, c in enumerate(block.columns) if not c.wide_only]  # GitHub shows few columns
        rows = [[row[i] for i in kept] for row in block.rows]
        lines += markdown_table([block.columns[i] for i in kept], rows, [s == "bold" for s in block.row_styles])
        lines.append("")
        if left_out := [c.header for c in block.columns if c.wide_only]:
            lines += [_md_escape(f"not shown here: {', '.join(left_out)} (in --format csv and json)"), ""]
        for note in block.notes:
            lines += [_md_escape(note), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _clean(value: Any) -> Any:
    """Floats as the shortest text that reads back as the same number; NaN as empty."""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return float(f"{value:.12g}")
    return value


def render_csv(doc: Document) -> str:
    """The document's rows as CSV; a result with columns and no rows is its header line (an empty
    answer is an answer), a document without a table of rows is nothing."""
    if doc.records is None or not len(doc.records.columns):
        return ""
    buf = io.StringIO()
    doc.records.map(_clean).to_csv(buf, index=False)
    return buf.getvalue()


def render_json(doc: Document) -> str:
    """Strict JSON: a number that is not finite (a NaN a damaged status file held) is null, never
    the NaN token other readers refuse."""
    return json.dumps(_finite(doc.data), indent=2, default=str, allow_nan=False) + "\n"


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame as JSON-ready rows (NaN → null, numpy scalars → Python)."""
    return json.loads(frame.to_json(orient="records")) if len(frame) else []


def render(doc: Document, fmt: str, console: Console | None = None) -> str:
    """``table`` prints to ``console`` and returns ""; the others return the text to write."""
    if fmt == "table":
        render_rich(doc, console or output_console())
        return ""
    if fmt == "md":
        return render_markdown(doc)
    if fmt == "csv":
        return render_csv(doc)
    if fmt == "json":
        return render_json(doc)
    raise ValueError(fmt)
