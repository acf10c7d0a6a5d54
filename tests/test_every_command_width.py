"""Every command that prints a result, as a user's terminal or pipe gets it: at 80 and 120 columns
no line is wider than the terminal and nothing fails; piped (a file, another program) nothing is
folded. The renderer's own checks (no number cut, names broken at joints) are test_report_width.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import EAGER, GRAPH, ROOT
from kprof.cli import app

RUNS = ROOT / "docs" / "runs"
STORED = str(RUNS / "h200-2026-11-30-s4" / "gdn_rev")
BISECT = str(RUNS / "h200-2026-12-02-s16" / "fla_bisect")
COMMANDS = {
    "trace": ["trace", str(EAGER), "--top", "8"],
    "compare traces": ["compare", str(EAGER), str(GRAPH), "--top", "8"],
    "compare runs": ["compare", STORED, STORED],
    "report": ["report", STORED],
    "report of a bisect": ["report", BISECT],
    "attribute": ["attribute", STORED],
    "kernels": ["kernels"],
    "sql": ["sql", 'SELECT "case", count(*) AS n FROM samples GROUP BY 1 ORDER BY 1', STORED],
}
runner = CliRunner()


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_fits_its_terminal(name: str, width: int) -> None:
    res = runner.invoke(app, COMMANDS[name], env={"COLUMNS": str(width)})
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines and max(len(line) for line in lines) <= width, max(lines, key=len)


@pytest.mark.parametrize("name", ["trace", "compare runs", "report", "kernels"])
def test_piped_output_folds_nothing(name: str, tmp_path: Path) -> None:
    """Piped (no COLUMNS): tables take the width they need, so a row is one line and a name whole."""
    res = runner.invoke(app, COMMANDS[name], env={"COLUMNS": None})
    assert res.exit_code == 0, res.output
    body = [line for line in res.stdout.splitlines() if line.startswith("│")]
    assert body and all(line.split("│")[1].strip() != "" for line in body)  # no continuation lines


def test_columns_left_out_of_a_narrow_terminal_are_named() -> None:
    """A terminal narrower than a table's optional columns gets the table without them and one
    line naming them; piped (no COLUMNS), every column is there and nothing is said."""
    narrow = runner.invoke(app, COMMANDS["trace"], env={"COLUMNS": "80"})
    said = [line for line in narrow.stdout.splitlines() if "not shown at 80 columns:" in line]
    assert said and "min" in said[0] and said[0].endswith("(in --format csv, json)")
    piped = runner.invoke(app, COMMANDS["trace"], env={"COLUMNS": None})
    assert "not shown" not in piped.stdout and "│ kind" not in narrow.stdout
