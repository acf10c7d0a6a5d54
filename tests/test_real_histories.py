"""Which commit bought it, on a history as untidy as real ones (tests/untidy_history.py): patches
cut to --paths, every commit against its parent (sequence) with stand-ins where a patch still
conflicts, the effect of a commit measured across one that could not be timed, a src/ layout put on
the import path and a shadowing copy refused."""

from __future__ import annotations

import json
import math
import shutil
import sys
import types
from pathlib import Path

import pytest
from fake_runs import write_run
from typer.testing import CliRunner
from untidy_history import Untidy, build

from kprof.cli import app
from kprof.commands.analyse import attribute
from kprof.revisions.benchmark import package_roots, shadowed, tree_packages
from kprof.revisions.design import range_legs
from kprof.revisions.git import Repo
from kprof.revisions.plan import revision_legs
from kprof.revisions.trees import TreeSpec, materialise
from kprof.run_model import Leg, Role

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
runner = CliRunner()


@pytest.fixture()
def untidy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Untidy:
    monkeypatch.setenv("KPROF_CACHE", str(tmp_path / "cache"))
    return build(tmp_path)


def test_a_revert_cut_to_paths_applies_where_the_whole_commit_conflicts(untidy: Untidy) -> None:
    """Every commit edits the changelog: reverting the last code commit whole conflicts there;
    its part under src/ applies, and the tree has the comment as it was before it."""
    repo = Repo(untidy.repo)
    reword = repo.resolve(untidy.shas["reword"])
    whole = materialise(repo, TreeSpec(repo.resolve("HEAD"), (("revert", reword),)))
    assert whole.path is None and "conflict in CHANGELOG.md" in whole.refused
    cut = materialise(repo, TreeSpec(repo.resolve("HEAD"), (("revert", reword),), paths=("src",)))
    assert cut.path is not None and "# passes over the input" in (cut.path / "src/untidy/ops.py").read_text()
    assert (cut.path / "CHANGELOG.md").read_text().endswith("- docs\n")  # the changelog as the head has it
    # a commit whose code a later one rewrote still conflicts, and says where
    slower = repo.resolve(untidy.shas["slower"])
    code = materialise(repo, TreeSpec(repo.resolve("HEAD"), (("revert", slower),), paths=("src",)))
    assert code.path is None and "conflict in src/untidy/ops.py" in code.refused


def test_sequence_legs_are_the_commits_as_committed(untidy: Untidy) -> None:
    span = Repo(untidy.repo).range(untidy.range, ["src"])
    assert [c.subject for c in span.commits] == ["slower", "comment", "broken", "faster", "reword"]
    legs, specs = range_legs(span.base, span.head, span.commits, "sequence", paths=("src",))
    sequence = [leg for leg in legs if leg.has(Role.SEQUENCE)]
    assert [len(leg.features) for leg in sequence] == [0, 1, 2, 3, 4, 5]
    assert [specs[leg.revision or ""] for leg in sequence[1:]] == [TreeSpec(c.sha) for c in span.commits]
    assert sequence[0].has(Role.BASELINE) and not any(spec.ops for spec in specs.values())  # nothing applied
    assert any(leg.has(Role.TARGET) for leg in legs) and any(leg.has(Role.AA) for leg in legs)


def test_the_default_design_of_a_range_is_sequence_and_a_long_one_is_refused(untidy: Untidy) -> None:
    plan = revision_legs(Repo(untidy.repo), untidy.range, [], None, 1, 2e-2, ["src"])
    assert plan.design == "sequence" and not any(t.refused for t in plan.trees.values())
    from kprof.errors import KprofInputError
    from kprof.revisions.plan import default_design

    with pytest.raises(KprofInputError, match="17 commits are too many to time whole by default"):
        default_design(list(range(17)))  # type: ignore[arg-type]


def test_leave_one_out_gives_a_conflicting_commit_its_sequence_stand_ins(untidy: Untidy) -> None:
    """Three of five reverts conflict in the code (later commits rewrote those lines): each of those
    commits gets its revision and its parent's as sequence legs, so it still has an effect. The
    broken half's revert merges as nothing (the fix already took its line out)."""
    repo = Repo(untidy.repo)
    plan = revision_legs(repo, untidy.range, [], "leave-one-out", 1, 2e-2, ["src"])
    refused = {leg.name for leg in plan.legs if plan.trees[leg.revision or ""].refused}
    shas = untidy.shas
    assert refused == {f"head − {shas[r]}" for r in ("slower", "comment", "faster")}
    assert all("CHANGELOG" not in plan.trees[k].refused for k in plan.trees)  # cut to --paths: code conflicts only
    points = {len(leg.features) for leg in plan.legs if leg.has(Role.SEQUENCE)}
    assert points == {0, 1, 2, 3, 4}  # each refused commit and the revision before it
    assert not any(plan.trees[leg.revision or ""].refused for leg in plan.legs if leg.has(Role.SEQUENCE))


def test_add_one_gives_a_conflicting_pick_its_sequence_stand_ins(untidy: Untidy) -> None:
    """Picked onto the base alone, the comment, the faster half and the reword conflict (each edits
    lines an earlier commit of the range wrote); the slower commit and the broken half apply."""
    plan = revision_legs(Repo(untidy.repo), untidy.range, [], "add-one", 1, 2e-2, ["src"])
    refused = {leg.name for leg in plan.legs if plan.trees[leg.revision or ""].refused}
    shas = untidy.shas
    assert refused == {f"base + {shas[r]}" for r in ("comment", "faster", "reword")}
    points = {len(leg.features) for leg in plan.legs if leg.has(Role.SEQUENCE)}
    assert points == {1, 2, 3, 4, 5}  # each refused commit and the revision before it


def _sequence_legs(shorts: list[str]) -> list[Leg]:
    legs = [Leg("base", roles=frozenset({Role.BASELINE, Role.SEQUENCE}))]
    for i, short in enumerate(shorts, 1):
        roles = {Role.SEQUENCE} | ({Role.TARGET} if i == len(shorts) else set())
        legs.append(Leg(f"{short} subject", frozenset(shorts[:i]), roles=frozenset(roles)))
    return [*legs, Leg("base (A/A)", roles=frozenset({Role.AA}), replica=1)]


def test_sequence_effects_step_over_a_revision_that_was_not_timed(tmp_path: Path) -> None:
    """c1 makes it 10% slower, c3 could not be timed (no samples), c4 makes it 20% faster: c4 is
    measured against c2, its row says it spans c3 and c4; cumulative rows are each leg's own."""
    shorts = ["c1", "c2", "c3", "c4"]
    legs = _sequence_legs(shorts)
    level = {"base": 0.0, "c1 subject": 0.1, "c2 subject": 0.1, "c3 subject": 0.1, "c4 subject": -0.1}
    level["base (A/A)"] = 0.0
    timed = [leg for leg in legs if leg.name != "c3 subject"]
    folder = write_run(tmp_path / "run", timed, lambda leg, case: level[leg.name], features=tuple(shorts))
    # the run declares every leg; c3's has no samples, as a revision that could not be imported
    meta = json.loads((folder.root / "meta.json").read_text())
    meta["legs"] = [leg.record() for leg in legs]
    (folder.root / "meta.json").write_text(json.dumps(meta))
    table = attribute(folder.root).levers
    rows = {(r["design"], r["lever"]): r for _, r in table.iterrows()}
    assert rows[("sequence", "c1")]["verdict"] == "SLOWER" and list(rows[("sequence", "c1")]["spans"]) == ["c1"]
    assert rows[("sequence", "c2")]["verdict"] == "SAME"
    assert ("sequence", "c3") not in rows and ("cumulative", "c3") not in rows
    c4 = rows[("sequence", "c4")]
    assert list(c4["spans"]) == ["c3", "c4"] and c4["verdict"] == "FASTER"
    assert abs(c4["effect_pct"] - 100 * (math.exp(0.2) - 1)) < 1.5
    assert rows[("cumulative", "c4")]["verdict"] == "FASTER" and rows[("total", "(all levers)")]["verdict"] == "FASTER"
    md = runner.invoke(app, ["attribute", str(folder.root), "--format", "md"], catch_exceptions=False).stdout
    assert "each commit against the revision before it" in md and "its effect spans c3, c4" in md


def test_a_src_layout_is_on_the_import_path(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "src" / "pkg").mkdir(parents=True)
    (tree / "src" / "pkg" / "__init__.py").write_text("")
    assert package_roots(tree) == [tree / "src", tree]
    hatch = tmp_path / "hatch"
    (hatch / "lib" / "pkg").mkdir(parents=True)
    (hatch / "pyproject.toml").write_text('[tool.hatch.build.targets.wheel]\npackages = ["lib/pkg"]\n')
    assert package_roots(hatch) == [hatch / "lib", hatch]
    declared = tmp_path / "declared"
    (declared / "python" / "pkg").mkdir(parents=True)
    (declared / "pyproject.toml").write_text('[tool.setuptools]\npackage-dir = {"" = "python"}\n')
    assert package_roots(declared) == [declared / "python", declared]
    (declared / "pyproject.toml").write_text("[tool.setuptools\n")  # a broken pyproject: the tree alone
    assert package_roots(declared) == [declared]


def test_a_package_imported_from_outside_the_tree_is_refused(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "python" / "pkg").mkdir(parents=True)  # a layout kprof does not put on the path
    (tree / "python" / "pkg" / "__init__.py").write_text("")
    assert tree_packages(tree) == {"pkg"}
    installed = types.ModuleType("pkg")
    installed.__file__ = str(tmp_path / "site-packages" / "pkg" / "__init__.py")
    said = shadowed(tree, {"pkg": installed})
    assert said.startswith(f"imported pkg from {installed.__file__}, not from the revision's tree")
    own = types.ModuleType("pkg")
    own.__file__ = str(tree / "python" / "pkg" / "__init__.py")
    assert shadowed(tree, {"pkg": own}) == "" and shadowed(tree, dict(sys.modules)) == ""


@pytest.mark.slow  # a leg host per revision, each refusing (9 s on two cores); shadowed() itself is tested above
def test_a_shadowing_copy_is_refused_in_every_revision(untidy: Untidy, tmp_path: Path) -> None:
    """A copy of the package installed where Python finds it first (here: imported before the tree
    is on the path, by a sitecustomize): every revision would time that copy and read SAME. Each
    revision's host refuses it in one line naming where it came from; nothing is timed."""
    site = tmp_path / "site"
    (site / "untidy").mkdir(parents=True)
    (site / "untidy" / "__init__.py").write_text("def work(x, out):\n    return out.copy_(x * 2)\n")
    (site / "sitecustomize.py").write_text("import untidy\n")
    env = {"PYTHONPATH": str(site)}
    args = ["run", str(untidy.benchmark), "--revisions", untidy.range, "--repo", str(untidy.repo), "--paths", "src"]
    args += ["--device", "cpu", "--rounds", "6", "--samples", "1", "--out", str(tmp_path / "run")]
    res = runner.invoke(app, args, env=env)
    assert res.exit_code != 0
    assert f"imported untidy from {site / 'untidy' / '__init__.py'}, not from the revision's tree" in res.output
    assert "Traceback" not in res.output


CPU = ["--device", "cpu", "--rounds", "10", "--samples", "3", "--threshold", "5"]


def _run(untidy: Untidy, out: Path, *extra: str) -> dict:
    args = ["run", str(untidy.benchmark), "--revisions", untidy.range, "--repo", str(untidy.repo), "--paths", "src"]
    res = runner.invoke(app, [*args, *CPU, *extra, "--out", str(out), "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output[-3000:]
    return json.loads(res.stdout)


def _signs_hold(row: dict, slower: bool, biased: bool) -> bool:
    """The row's verdict for a commit that doubles (or cuts to an eighth) the work: the host
    clock's A/A can exclude 0 on a busy CPU, and its bias bound may then explain a verdict."""
    want = "SLOWER" if slower else "FASTER"
    return row["verdict"] == want or (biased and row["verdict"] in ("BIASED", "UNRESOLVED"))


@pytest.mark.slow  # eight revision hosts, then ten, then two bisect steps, under the host clock (about 70 s)
def test_sequence_leave_one_out_and_bisect_on_an_untidy_history(untidy: Untidy, tmp_path: Path) -> None:
    """The issue's built history, end to end: the sequence names both changes with their signs and
    steps over the commit that does not compile; leave-one-out with --paths times every revert that
    applies and gives the rest their sequence rows; the bisect reports both changes."""
    shas = untidy.shas
    seq = _run(untidy, tmp_path / "seq")
    biased = seq["aa"][0]["verdict"] == "BIASED"
    rows = {(r["design"], r["lever"]): r for r in seq["sequence"]}
    assert _signs_hold(rows[("sequence", shas["slower"])], slower=True, biased=biased)
    faster = rows[("sequence", shas["faster"])]
    assert _signs_hold(faster, slower=False, biased=biased)
    assert faster["spans"] == [shas["broken"], shas["faster"]]  # measured across the broken half
    assert ("sequence", shas["broken"]) not in rows
    assert rows[("sequence", shas["comment"])]["verdict"] in ("SAME", "UNRESOLVED")

    loo = _run(untidy, tmp_path / "loo", "--design", "leave-one-out")
    status = loo["case_status"]["n"]["failed"]
    assert not any("CHANGELOG" in why for why in status.values())  # cut to --paths: code conflicts only
    attribution = runner.invoke(app, ["attribute", str(tmp_path / "loo"), "--format", "json"], catch_exceptions=False)
    levers = {(r["design"], r["lever"]): r for r in json.loads(attribution.stdout)["levers"]}
    assert ("leave_one_out", shas["reword"]) in levers  # its revert applied: timed
    for commit in ("slower", "comment", "faster"):  # their reverts conflict: each has its sequence row
        assert ("sequence", shas[commit]) in levers and ("leave_one_out", shas[commit]) not in levers
    assert levers[("sequence", shas["slower"])]["effect_pct"] < -30

    out = tmp_path / "bisect"
    args = ["run", str(untidy.benchmark), "--revisions", untidy.range, "--repo", str(untidy.repo), "--paths", "src"]
    res = runner.invoke(app, [*args, *CPU, "--design", "bisect", "--out", str(out), "--format", "json"])
    assert res.exit_code == 0, res.output[-3000:]
    found = json.loads(res.stdout)
    commits = [c["sha"][:7] for c in found["commits"]]
    numbers = {c["hi"]: c for c in found["changes"]}
    assert commits.index(shas["slower"]) + 1 in numbers  # the slower commit, found on its own
    fast = commits.index(shas["faster"]) + 1
    assert fast in numbers and numbers[fast]["lo"] in (fast - 1, fast - 2)  # alone, or with the broken half
    assert numbers[fast]["effect_pct"] > 0 > numbers[commits.index(shas["slower"]) + 1]["effect_pct"]
