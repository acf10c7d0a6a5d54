"""The README's examples: every command of its runnable blocks runs as pasted in a clean folder
(with the clone's docs/ and traces/ beside it), and every other `kprof` line is in a block marked
as a template. A README example that fails when pasted is a defect a new user meets first."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from conftest import ROOT
from kprof.cli import app

README = (ROOT / "README.md").read_text()
FENCE = re.compile(r"```bash\n(.*?)```", re.S)
MARK = re.compile(r"<!-- readme: (\w+) -->\s*```bash\n(.*?)```", re.S)
SLOW_COMMANDS = ("kprof run ",)  # the CPU pipeline takes minutes on two cores


def commands(block: str) -> list[str]:
    return [line.strip() for line in block.splitlines() if line.strip().startswith("kprof")]


def marked(kind: str) -> list[str]:
    return [c for mark, block in MARK.findall(README) if mark == kind for c in commands(block)]


def main_job() -> list[str]:
    section = README.split("## Run the main job", 1)[1]
    return commands(FENCE.search(section).group(1))


def runnable() -> list[object]:
    return [
        pytest.param(c, marks=pytest.mark.slow) if c.startswith(SLOW_COMMANDS) else c
        for c in [*main_job(), *marked("runnable")]
    ]


def test_every_kprof_line_is_runnable_or_marked_as_a_template() -> None:
    every = [c for block in FENCE.findall(README) for c in commands(block)]
    placed = [*main_job(), *marked("runnable"), *marked("template")]
    assert sorted(every) == sorted(placed)
    assert len(marked("runnable")) >= 8 and len(marked("template")) >= 5
    known = set(typer.main.get_command(app).commands)
    for line in every:
        assert shlex.split(line, comments=True)[1] in known, line


@pytest.mark.parametrize("line", runnable())
def test_the_readme_example_runs_as_pasted(line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("docs", "traces"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "120")
    args = shlex.split(line, comments=True)[1:]
    res = CliRunner().invoke(app, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    if "-o" in args:  # the result in the file, one line on the terminal saying so
        written = tmp_path / args[args.index("-o") + 1]
        assert json.loads(written.read_text())
        assert res.stdout == "" and res.stderr.startswith(f"wrote {written.name} (")
    else:
        assert len(res.stdout.splitlines()) >= 5, res.stdout
    if "--save" in args:
        assert any((tmp_path / args[args.index("--save") + 1]).rglob("*.parquet"))
