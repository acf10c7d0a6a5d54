"""Tab completion (kprof.completion) as a shell asks for it: workload, design, preset and case
names, each narrowed to what is typed; a workload that cannot be loaded offers nothing, never an
error."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kprof.cli import app
from kprof.designs import names
from kprof.workload import bundled_names, load_workload

runner = CliRunner()


def _complete(line: str) -> list[str]:
    words = line.split(" ")
    env = {"_KPROF_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)}
    res = runner.invoke(app, [], prog_name="kprof", env=env)
    assert res.exit_code == 0, res.output
    return res.stdout.split()


def test_workload_names_complete_for_every_command_that_takes_one() -> None:
    assert _complete("kprof run ") == bundled_names()
    assert _complete("kprof run ml") == ["mla_decode"]
    assert _complete("kprof attribute gdn") == ["gdn_decode"]
    assert _complete("kprof calibrate pa") == ["paged_decode"]


def test_designs_complete() -> None:
    assert _complete("kprof run mla_decode --design ") == [*names(True), "bisect"]
    assert _complete("kprof run mla_decode --design le") == ["leave-one-out"]


def test_presets_and_cases_are_those_of_the_workload_on_the_line() -> None:
    workload = load_workload("mla_decode")
    assert _complete("kprof run mla_decode --preset ") == list(workload.presets)
    smoke = [c.name for c in workload.cases("smoke")]
    assert _complete("kprof run mla_decode --preset smoke --case ") == smoke
    first = smoke[0]
    assert first in _complete(f"kprof run mla_decode --preset smoke --case {first[:3]}")
    assert _complete("kprof run mla_decode --case ") == [c.name for c in workload.cases("pr")]  # the default preset


@pytest.mark.parametrize("line", ["kprof run no_such.py --preset ", "kprof run --case ", "kprof run x/y --case "])
def test_nothing_to_offer_is_no_error(line: str) -> None:
    assert _complete(line) == []
