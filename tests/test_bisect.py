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
from kprof.errors import KprofInputError
from kprof.revisions.bisect import probes, run_bisect
from kprof.revisions.git import Commit
from kprof.run_model import Leg, Role
from kprof.store.run_folder import RunFolder

N = 16


def _commits(n: int = N) -> tuple[Commit, list[Commit]]:
    return Commit("0" * 40, "base"), [Commit(f"{i:040x}", f"commit {i}") for i in range(1, n + 1)]


def _timer(effects: dict[int, float], seed: int, noise: float = 0.003, rounds: int = 10):
    """time_revisions for run_bisect: a synthetic run whose revision ri has ln t = Σ effects of
    commits ≤ i, with shared round drift and noise; the first revision is the baseline."""

    def time_revisions(shas: list[str], folder: Path, gpu: int | None = None, offset: float = 0.0):
        index = [int(s, 16) for s in shas]
        legs = [
            Leg(s[:7] + f"-{i}", roles=frozenset({Role.BASELINE if j == 0 else Role.LEG}))
            for j, (s, i) in enumerate(zip(shas, index))
        ]
        legs.append(Leg("aa", roles=frozenset({Role.AA}), replica=1))
        level = {leg.name: offset + sum(e for c, e in effects.items() if c <= i) for leg, i in zip(legs, index)}
        level["aa"] = level[legs[0].name]
        return write_run(folder, legs, lambda leg, case: level[leg.name], rounds=rounds, noise=noise, seed=seed)

    return time_revisions


def test_two_gpus_search_with_twice_the_segments_each_formed_on_one_gpu(tmp_path: Path) -> None:
    """GPU 1 runs everything 7% slower than GPU 0: a search that formed any difference across the
    two would see a 7% step where the shares meet. Sharded, each GPU times a contiguous share of
    the probes, and the search finds the commit in fewer steps."""
    base, commits = _commits()
    timed: list[tuple[int | None, list[int]]] = []
    inner = _timer({11: math.log(1.05)}, seed=1, rounds=12)  # 16 segments a step: 10 rounds cannot resolve

    def time_revisions(shas: list[str], folder: Path, gpu: int | None):
        timed.append((gpu, [int(s, 16) for s in shas]))
        return inner(shas, folder, gpu, offset=math.log(1.07) if gpu == 1 else 0.0)

    result = run_bisect(base, commits, "c", 0.5, time_revisions, tmp_path, gpus=[0, 1])
    assert result.verdict == "FOUND" and result.culprits == [11]
    assert timed[:2] == [(0, [0, 2, 4, 6, 8]), (1, [8, 10, 12, 14, 16])]  # 8 segments, 2 shares
    assert [(s.lo, s.hi) for s in result.steps] == [(0, 16), (10, 12)]  # 2 steps, the second of 2 commits
    assert abs(result.steps[0].total.effect_pct - (100 / 1.05 - 100)) < 0.5  # no 7% where shares meet
    assert {s.gpu for s in result.steps[0].segments} == {0, 1}
    assert (tmp_path / "step-1" / "gpu-0" / "meta.json").is_file() and (tmp_path / "step-1" / "gpu-1").is_dir()
    # 2 steps at most per change, 3 changes, 8 segments a step
    assert result.alpha_per_interval == pytest.approx(0.05 / (3 * 2 * 8))


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


def test_every_change_of_a_history_is_found(tmp_path: Path) -> None:
    """Two changes in one range (a gain at commit 3, another at 12): each resolved segment is
    followed to its commit, where the search once stopped at the first split with SPREAD."""
    base, commits = _commits()
    result = run_bisect(base, commits, "c", 0.5, _timer({3: math.log(1.05), 12: math.log(1.04)}, seed=2), tmp_path)
    assert result.verdict == "FOUND" and result.culprits == [3, 12]
    assert [(c.hi, c.verdict) for c in result.changes] == [(3, "FOUND"), (12, "FOUND")]
    first, second = result.changes
    assert first.ci_low_pct <= 100 * (1 / 1.05 - 1) <= first.ci_high_pct  # each with its own interval
    assert second.ci_low_pct <= 100 * (1 / 1.04 - 1) <= second.ci_high_pct
    assert [(s.lo, s.hi) for s in result.steps] == [(0, 16), (0, 4), (8, 12)]


def test_a_regression_and_its_fix_are_both_found(tmp_path: Path) -> None:
    """A regression at commit 3 and a fix at commit 10 cancel in the total: the segments on either
    side are followed all the same, each to its commit, with opposite signs."""
    base, commits = _commits()
    timer = _timer({3: math.log(1.06), 10: -math.log(1.06)}, seed=3)
    result = run_bisect(base, commits, "c", 0.5, timer, tmp_path)
    assert result.culprits == [3, 10] and result.verdict == "FOUND"
    assert result.changes[0].effect_pct < 0 < result.changes[1].effect_pct  # slower, then faster again
    assert not result.steps[0].total.resolved


def test_an_effect_spread_over_many_commits_is_spread(tmp_path: Path) -> None:
    """Every commit 0.2% slower: each quarter of the range resolves, no single commit does (each is
    under the 0.5% threshold), so each quarter is SPREAD — never a commit named alone."""
    base, commits = _commits()
    timer = _timer({i: math.log(1.002) for i in range(1, N + 1)}, seed=5, noise=0.0005, rounds=12)
    result = run_bisect(base, commits, "c", 0.5, timer, tmp_path)
    assert result.verdict == "SPREAD" and {c.verdict for c in result.changes} == {"SPREAD"}
    assert all(c.hi - c.lo > 1 for c in result.changes)


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
@pytest.mark.parametrize("gpus", [[], ["--gpus", "2"]], ids=["one", "two-slots"])
def test_bisect_end_to_end_over_16_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus: list[str]) -> None:
    repo = workload_repo(tmp_path, monkeypatch)
    shas = [
        _commit(repo, f"note {i}", "", f"# note {i}\n")
        if i != 11
        else _commit(repo, "double the work", "REPEATS = 4", "REPEATS = 8")
        for i in range(1, N + 1)
    ]
    out = tmp_path / "bisect"
    args = ["run", str(repo / "wl.py"), "--in-tree", "--revisions", f"HEAD~{N}..HEAD", "--design", "bisect"]
    args += ["--device", "cpu"]
    # two slots: 8 segments a step, each interval at 1 − 0.05/48, which 10 rounds cannot reach
    args += ["--preset", "smoke", "--rounds", "12", "--samples", "3", "--threshold", "5", "--out", str(out), *gpus]
    res = CliRunner().invoke(app, [*args, "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    assert result["verdict"] == "FOUND" and [result["commits"][c - 1]["sha"][:7] for c in result["culprits"]] == [
        shas[10]
    ]
    md = CliRunner().invoke(app, ["report", str(out), "--format", "md"], catch_exceptions=False).stdout
    assert "double the work" in md and "verdict: FOUND" in md
    if gpus:  # two stand-in slots: 8 segments a step, each share's hosts pinned to its slot
        assert len(result["steps"]) == 2 and result["steps"][1]["hi"] - result["steps"][1]["lo"] == 2
        for slot in ("0", "1"):
            share = RunFolder(out / "step-1" / f"gpu-{slot}")
            assert share.read_statuses().of("n").gpu == slot and share.read_run().placement.gpus == [int(slot)]
    else:
        assert np.all([(out / f"step-{i}" / "meta.json").is_file() for i in (1, 2)])


def _broken(timer, broken: dict[int, str]):
    """time_revisions whose revisions in ``broken`` could not be timed (their legs failed, as a
    revision that does not import is recorded by the engine)."""

    def time_revisions(shas: list[str], folder: Path, gpu: int | None = None):
        run_folder = timer(shas, folder, gpu)
        run = run_folder.read_run()
        failed = {leg.name: broken[int(s, 16)] for leg, s in zip(run.legs, shas) if int(s, 16) in broken}
        run_folder.update_case("c", failed=failed)
        return run_folder

    return time_revisions


def test_probes_step_around_revisions_that_cannot_be_timed() -> None:
    assert probes(0, 16, skipped={4}) == [0, 3, 8, 12, 16]
    assert probes(8, 12, skipped={9, 10}) == [8, 11, 12]
    assert probes(8, 12, skipped={9, 10, 11}) == [8, 12]


def test_a_broken_revision_is_skipped_and_the_commit_still_found(tmp_path: Path) -> None:
    """Revision 9 does not import: it is left out of the step's segments (8 → 10 spans it) and the
    search still names commit 11."""
    base, commits = _commits()
    timer = _broken(_timer({11: math.log(1.05)}, seed=1), {9: "failed to import: SyntaxError"})
    result = run_bisect(base, commits, "c", 0.5, timer, tmp_path)
    assert result.verdict == "FOUND" and result.culprits == [11]
    assert result.skipped == {9: "failed to import: SyntaxError"}
    assert result.culprit_commits == [{"number": 11, "sha": commits[10].sha, "subject": "commit 11"}]
    assert [(s.lo, s.hi) for s in result.steps[1].segments] == [(8, 10), (10, 11), (11, 12)]
    again = type(result).load(tmp_path)  # JSON keys are text: read back as revision numbers
    assert again.skipped == result.skipped and again.steps[-1].skipped == result.steps[-1].skipped


def test_only_untimeable_revisions_left_gives_the_range(tmp_path: Path) -> None:
    """The change is at commit 11, and revisions 10 and 11 cannot be timed: the search can say only
    that the change lies in commits 10–12 (git bisect's "only skipped commits left")."""
    base, commits = _commits()
    timer = _broken(_timer({11: math.log(1.05)}, seed=2), {10: "broken", 11: "broken"})
    result = run_bisect(base, commits, "c", 0.5, timer, tmp_path)
    assert result.verdict == "RANGE" and result.culprits == [10, 11, 12]
    assert set(result.skipped) == {10, 11}


def test_a_broken_head_is_one_line(tmp_path: Path) -> None:
    base, commits = _commits()
    timer = _broken(_timer({}, seed=3), {N: "failed to import: NameError"})
    with pytest.raises(KprofInputError, match=r"the head \w+ cannot be timed: failed to import: NameError"):
        run_bisect(base, commits, "c", 0.5, timer, tmp_path)


def test_a_broken_revision_where_two_gpus_meet_is_planned_again(tmp_path: Path) -> None:
    """Revision 8 ends GPU 0's share and starts GPU 1's: without it the chain of differences has a
    gap, so the step is timed again with other probes (its folder kept, renamed)."""
    base, commits = _commits()
    timer = _broken(_timer({11: math.log(1.05)}, seed=4, rounds=12), {8: "broken"})
    result = run_bisect(base, commits, "c", 0.5, lambda s, f, g: timer(s, f, g), tmp_path, gpus=[0, 1])
    assert result.verdict == "FOUND" and result.culprits == [11] and result.skipped == {8: "broken"}
    assert (tmp_path / "step-1-redone-1").is_dir() and 8 not in result.steps[0].probes
