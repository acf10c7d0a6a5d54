"""What a table shows: --hide-same and --sort on report and compare, and each case's one-line
summary (the leg with the largest gain, with its interval and verdict). JSON keeps every row."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from conftest import ROOT
from kprof.cli import app
from kprof.report.effects import View, best_leg_line, shown_rows

RUNS = ROOT / "docs" / "runs"
GDN = RUNS / "h200-2026-11-30-s3" / "gdn_pr"  # 18 legs per case, some SAME
TWICE = RUNS / "h200-2026-12-02-s17"  # one command run twice: every leg SAME between them


def invoke(*args: str) -> str:
    res = CliRunner().invoke(app, [*args], catch_exceptions=False, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return res.stdout


def md_rows(markdown: str, title: str) -> list[list[str]]:
    """The body rows of the markdown table under ``**title**``."""
    block = markdown.split(f"**{title}**", 1)[1].strip().split("\n\n", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()[2:]]


def test_hide_same_leaves_same_rows_out_of_tables_and_says_so() -> None:
    legs = json.loads(invoke("report", str(GDN), "--format", "json"))["legs"]
    case = "recurrent-b128-hv32"
    same = [r["leg"] for r in legs if r["case"] == case and r["verdict"] == "SAME"]
    assert same, "the stored run has SAME legs in this case"
    full = md_rows(invoke("report", str(GDN), "--format", "md"), case)
    thin = md_rows(invoke("report", str(GDN), "--format", "md", "--hide-same"), case)
    assert len(full) - len(thin) == len(same)
    assert not {r[0] for r in thin} & set(same) and all(r[-1] != "SAME" for r in thin)
    assert f"{len(same)} SAME row(s) hidden (--hide-same)" in invoke(
        "report", str(GDN), "--hide-same", "--format", "md"
    )
    kept = json.loads(invoke("report", str(GDN), "--format", "json", "--hide-same"))["legs"]
    assert kept == legs  # JSON keeps every row


def test_sort_by_effect_puts_the_largest_gain_first_under_the_reference() -> None:
    rows = md_rows(invoke("report", str(GDN), "--format", "md", "--sort", "effect"), "step-b32-hv32")
    assert rows[0][-1] == "REFERENCE"
    effects = [float(re.match(r"([+-][\d,.]+)%", r[-3]).group(1).replace(",", "")) for r in rows[1:]]
    assert effects == sorted(effects, reverse=True) and len(effects) >= 10
    by_time = md_rows(invoke("report", str(GDN), "--format", "md", "--sort", "time"), "step-b32-hv32")
    times = [float(r[1].replace(",", "")) for r in by_time[1:]]
    assert times == sorted(times, reverse=True)


def test_each_case_says_its_fastest_leg_with_interval_and_verdict() -> None:
    out = invoke("report", str(TWICE / "mla_end_1"), "--format", "md")
    assert "fastest: all, +226.69% [+225.54, +227.75] (3.27× faster) against baseline, FASTER" in out
    rows = pd.DataFrame(
        {
            "leg": ["base", "a", "b", "base (A/A)"],
            "roles": [["baseline"], [], [], ["aa"]],
            "effect_pct": [0.0, 0.3, -1.0, 0.9],
            "ci_low_pct": [0.0, -0.5, -1.5, -0.1],
            "ci_high_pct": [0.0, 1.1, -0.5, 1.9],
            "verdict": ["REFERENCE", "UNRESOLVED", "SLOWER", "UNRESOLVED"],
        }
    )
    line = best_leg_line(rows, "base")
    assert (
        line
        == "no leg is resolved faster than base; largest estimate: a, +0.30% [-0.50, +1.10] against base, UNRESOLVED"
    )
    assert best_leg_line(rows.iloc[:1], "base") is None


def test_compare_hides_same_rows_too() -> None:
    a, b = str(TWICE / "mla_end_1"), str(TWICE / "mla_end_2")
    assert len(md_rows(invoke("compare", a, b, "--format", "md"), "per leg (µs, median of rounds)")) == 4
    thin = invoke("compare", a, b, "--format", "md", "--hide-same")
    assert md_rows(thin, "per leg (µs, median of rounds)") == [] and "4 SAME row(s) hidden" in thin


def test_shown_rows_keep_the_run_order_by_default() -> None:
    rows = pd.DataFrame(
        {"leg": list("rab"), "effect_pct": [0.0, -1.0, 2.0], "verdict": ["REFERENCE", "SAME", "FASTER"]}
    )
    assert list(shown_rows(rows, View())["leg"]) == ["r", "a", "b"]
    assert list(shown_rows(rows, View(sort="effect"))["leg"]) == ["r", "b", "a"]
    assert list(shown_rows(rows, View(hide_same=True))["leg"]) == ["r", "b"]


def test_the_cases_pooled_placement_spread_is_in_the_json_and_the_placement_line() -> None:
    """The floor every interval of a case carries comes from the spread pooled over its legs: the
    case's JSON record holds it, and the table's placement line prints the same number."""
    aa = json.loads(invoke("report", str(TWICE / "mla_end_1"), "--format", "json"))["aa"][0]
    assert aa["pooled_placement_pct"] > 0
    line = f"spread pooled over the legs ±{aa['pooled_placement_pct']:.2f}%, in every interval"
    assert line in invoke("report", str(TWICE / "mla_end_1"), "--format", "md")


def test_a_spread_between_runs_widens_every_interval_and_the_rerun_column_says_where_a_run_lands() -> None:
    """`kprof report --between-runs 0.3`: each leg's interval gains 1.96·0.3% in quadrature on each
    side, the rerun column is that interval √2 wider about the estimate, the footer names the
    spread; a negative one is refused in one line."""
    run = str(TWICE / "mla_end_1")
    plain = {r["leg"]: r for r in json.loads(invoke("report", run, "--format", "json"))["legs"]}
    told = {r["leg"]: r for r in json.loads(invoke("report", run, "--format", "json", "--between-runs", "0.3"))["legs"]}
    row, wide = plain["plain PyTorch"], told["plain PyTorch"]
    assert wide["effect_pct"] == row["effect_pct"]
    assert json.loads(invoke("report", run, "--format", "json", "--between-runs", "0.3"))["between_runs_pct"] == 0.3

    def high_side(r: dict, low: str) -> float:  # log distance from the estimate to the interval's slow end
        return float(np.log1p(r["effect_pct"] / 100) - np.log1p(r[low] / 100))

    grown = np.sqrt(high_side(wide, "ci_low_pct") ** 2 - high_side(row, "ci_low_pct") ** 2)
    assert grown == pytest.approx(1.959964 * np.log1p(0.003), rel=1e-4)
    assert high_side(wide, "rerun_low_pct") == pytest.approx(np.sqrt(2) * high_side(wide, "ci_low_pct"), rel=1e-9)
    md = invoke("report", run, "--format", "md", "--between-runs", "0.3")
    assert "fresh runs differ by ±0.30% SD per leg (--between-runs), in every interval" in md
    assert "a rerun lands in" in md.split("**h12-c16**", 1)[1].splitlines()[2]
    res = CliRunner().invoke(app, ["report", run, "--between-runs", "-1"])
    assert res.exit_code == 2 and res.stderr.startswith("kprof: error: --between-runs: is -1")


def test_an_aa_bias_in_fewer_processes_than_buffer_sets_names_the_processes_as_a_cause(tmp_path) -> None:
    """A case whose A/A copy is 0.4% off, timed in 2 processes over 4 buffer sets: the footer says
    the offset may be the processes' and how to tell (one set per process); with 4 processes it
    does not."""
    from fake_runs import write_run

    from kprof.analysis.simulation import legs_for
    from kprof.run_model import Protocol

    legs = legs_for({"x": 0.0})
    hint = "the A/A's offset may be its worker processes', not a bias: 2 processes over 4 buffer sets"
    for processes in (2, 4):
        root = tmp_path / f"p{processes}"
        write_run(root, legs, lambda leg, case: 0.004 if leg.name == "A/A" else 0.0,
                  protocol=Protocol(rounds=16, processes=processes), noise=0.001)  # fmt: skip
        md = invoke("report", str(root), "--format", "md")
        assert "A/A excludes 0" in md
        assert (hint in md and "--processes 4 (one set each) can" in md) == (processes == 2), md
