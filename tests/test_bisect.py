"""Statistical bisect: the search finds a planted bad commit among 16 and, on a range with no
change, names none; the error over the whole search is bounded (Bonferroni over steps and
segments), checked on synthetic run folders; and end to end on a repository built in the test."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from fake_runs import write_run
from test_revisions import _commit, workload_repo
from typer.testing import CliRunner

from kprof.cli import app
from kprof.revisions.bisect import probes, run_bisect
from kprof.revisions.git import Commit
from kprof.run_model import Leg, Role

N = 16


def _commits(n: int = N) -> tuple[Commit, list[Commit]]:
    return Commit("0" * 40, "base"), [Commit(f"{i:040x}", f"commit {i}") for i in range(1, n + 1)]


def _timer(effects: dict[int, float], seed: int, noise: float = 0.003):
    """time_revisions for run_bisect: a synthetic run whose revision ri has ln t = Σ effects of
    commits ≤ i, with shared round drift and noise; the first revision is the baseline."""

    def time_revisions(shas: list[str], folder: Path):
        index = [int(s, 16) for s in shas]
        legs = [
            Leg(s[:7] + f"-{i}", roles=frozenset({Role.BASELINE if j == 0 else Role.LEG}))
            for j, (s, i) in enumerate(zip(shas, index))
        ]
        legs.append(Leg("aa", roles=frozenset({Role.AA}), replica=1))
        level = {leg.name: sum(e for c, e in effects.items() if c <= i) for leg, i in zip(legs, index)}
        level["aa"] = level[legs[0].name]
        return write_run(folder, legs, lambda leg, case: level[leg.name], rounds=10, noise=noise, seed=seed)

    return time_revisions


def test_probes_split_the_span_evenly() -> None:
    assert probes(0, 16) == [0, 4, 8, 12, 16]
    assert probes(8, 12) == [8, 9, 10, 11, 12]
    assert probes(3, 5) == [3, 4, 5]


def test_finds_the_bad_commit(tmp_path: Path) -> None:
    base, commits = _commits()
    result = run_bisect(base, commits, "c", 0.5, _timer({11: math.log(1.05)}, seed=1), tmp_path)
    assert result.verdict == "FOUND" and result.culprits == [11]
    assert [(s.lo, s.hi) for s in result.steps] == [(0, 16), (8, 12)]
    assert all(s.total.resolved for s in result.steps)


@pytest.mark.slow  # a simulation of many searches (20 s)
def test_error_over_the_whole_search_is_bounded(tmp_path: Path) -> None:
    """100 searches of a range with no change name no commit in more than 5% (Bonferroni makes it
    far rarer); 50 searches for a 3% commit find exactly it in at least 95%, never another."""
    base, commits = _commits()
    named = sum(
        bool(run_bisect(base, commits, "c", 0.5, _timer({}, seed=s), tmp_path / f"null{s}").culprits)
        for s in range(100)
    )
    assert named <= 5
    found = [
        run_bisect(base, commits, "c", 0.5, _timer({7: math.log(1.03)}, seed=s), tmp_path / f"hit{s}").culprits
        for s in range(50)
    ]
    assert sum(f == [7] for f in found) >= 48
    assert not any(f and f != [7] for f in found)  # never the wrong commit


@pytest.mark.slow
def test_bisect_end_to_end_over_16_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = workload_repo(tmp_path, monkeypatch)
    shas = [
        _commit(repo, f"note {i}", "", f"# note {i}\n")
        if i != 11
        else _commit(repo, "double the work", "REPEATS = 4", "REPEATS = 8")
        for i in range(1, N + 1)
    ]
    out = tmp_path / "bisect"
    args = ["run", str(repo / "wl.py"), "--revisions", f"HEAD~{N}..HEAD", "--design", "bisect", "--device", "cpu"]
    args += ["--preset", "smoke", "--rounds", "10", "--samples", "3", "--threshold", "5", "--out", str(out)]
    res = CliRunner().invoke(app, [*args, "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    assert result["verdict"] == "FOUND" and [result["commits"][c - 1]["sha"][:7] for c in result["culprits"]] == [
        shas[10]
    ]
    md = CliRunner().invoke(app, ["report", str(out), "--format", "md"], catch_exceptions=False).stdout
    assert "double the work" in md and "verdict: FOUND" in md
    assert np.all([(out / f"step-{i}" / "meta.json").is_file() for i in (1, 2)])
