"""The user's own benchmark over a repository's history: the benchmark file lives outside the
repository (as a real PR's benchmark does), each revision's code comes from its tree, a build step
runs once per tree, --paths keeps the commits that touch the code under test, and a revision that
cannot be built or imported is said once and skipped. The repository is built in the test
(tests/own_benchmark_repo.py): a package with a Triton kernel, run under the interpreter."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from own_benchmark_repo import History, build_repo, git
from typer.testing import CliRunner

from conftest import ROOT
from kprof.cli import app
from kprof.engine.request import RunRequest, plan_run
from kprof.errors import KprofInputError
from kprof.events import Note
from kprof.revisions.benchmark import (
    BenchmarkChanged,
    check_unchanged,
    import_path,
    locate,
    locate_program,
    program_env,
    script_index,
)
from kprof.revisions.git import Commit, Repo, cut_words
from kprof.revisions.tree_setup import SETUP_MARK, refusal, run_setup
from kprof.store.run_folder import RunFolder

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
runner = CliRunner()
FAKE = ROOT / "tests" / "fake_bin"
CPU = ["--device", "cpu", "--preset", "smoke", "--samples", "3", "--threshold", "5"]


@pytest.fixture()
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> History:
    monkeypatch.setenv("KPROF_CACHE", str(tmp_path / "cache"))
    return build_repo(tmp_path)


def _range(h: History) -> list[str]:
    return ["--revisions", f"{h.shas['base']}..{h.shas['tests']}", "--repo", str(h.repo)]


def test_paths_keep_the_commits_that_touch_them(history: History) -> None:
    span = Repo(history.repo).range(f"{history.shas['base']}..HEAD", ["minikern"])
    kept = ["api", "slow", "broken", "fix", "comment", "tests"]
    assert [c.short for c in span.commits] == [history.shas[r] for r in kept]
    assert [c.short for c in span.left_out] == [history.shas["readme"], history.shas["docs"]]
    assert Repo(history.repo).range("HEAD~8..HEAD").left_out == []
    with pytest.raises(KprofInputError, match="no commit of HEAD~8..HEAD touches nowhere/"):
        Repo(history.repo).range("HEAD~8..HEAD", ["nowhere/"])


def test_commit_labels_are_cut_at_a_word_boundary() -> None:
    subject = "[Fix] Fix invalid launch above 65535 blocks in decode-path kernels (#1097)"
    assert cut_words(subject, 40) == "[Fix] Fix invalid launch above 65535…"
    assert cut_words("short", 40) == "short"
    assert cut_words("x" * 50, 20) == "x" * 19 + "…"  # one long word: cut inside it
    label = Commit("a4a2624b" + "0" * 32, subject).label()
    assert label.startswith("a4a2624 [Fix] Fix invalid") and label.endswith("…") and len(label) <= 48


def test_the_benchmark_comes_from_where_it_is_with_the_revisions_code(history: History) -> None:
    """Planning reads the benchmark outside the repository with the base revision's code (built by
    --setup); the run records the file and its hash; without the build step the revision cannot
    import and the one-line error names the benchmark, never a cache folder."""
    req = RunRequest(
        workload=str(history.benchmark), revs=[history.shas["base"], "HEAD"], repo=str(history.repo), device="cpu"
    )
    with pytest.raises(KprofInputError) as e:
        plan_run(req)
    message = str(e.value)
    assert message.startswith(str(history.benchmark)) and "No module named 'minikern._built'" in message
    assert os.environ["KPROF_CACHE"] not in message
    run = plan_run(RunRequest(**{**req.__dict__, "setup": "python build.py"}))
    revisions = run.revisions
    assert revisions is not None and revisions.benchmark is not None
    assert revisions.benchmark.path == str(history.benchmark.resolve()) and len(revisions.benchmark.sha256) == 64
    assert run.subject.name == "minikern_scale" and [c.name for c in run.cases] == ["n256"]
    assert all(t.setup["exit_code"] == 0 for t in revisions.trees.values())


def test_setup_runs_once_per_tree_and_a_failure_is_not_cached(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    started: list[int] = []
    first = run_setup(tree, "echo built >> log", dict(os.environ), lambda: started.append(1))
    again = run_setup(tree, "echo built >> log", dict(os.environ), lambda: started.append(1))
    assert first["exit_code"] == 0 and not first["cached"] and again["cached"] and started == [1]
    assert (tree / "log").read_text() == "built\n" and (tree / SETUP_MARK).is_file()
    other = run_setup(tree, "echo other", dict(os.environ))  # another command is run, not taken from the cache
    assert not other["cached"]
    failed = run_setup(tree, "echo compiling; echo 'error: no compiler' >&2; exit 3", dict(os.environ))
    assert failed["exit_code"] == 3 and refusal(failed) == "--setup exited with 3: error: no compiler"
    assert not run_setup(tree, "echo compiling; exit 3", dict(os.environ))["cached"]


def test_a_changed_benchmark_is_refused(tmp_path: Path) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text("x = 1\n")
    record = locate(str(bench), tmp_path / "elsewhere", in_tree=False)
    check_unchanged(record)
    bench.write_text("x = 2\n")
    with pytest.raises(BenchmarkChanged, match="changed since the run started"):
        check_unchanged(record)
    bench.unlink()
    with pytest.raises(BenchmarkChanged, match="gone"):
        check_unchanged(record)
    (tmp_path / "x.py").write_text("")
    with pytest.raises(KprofInputError, match="--in-tree needs the benchmark inside the repository"):
        locate(str(tmp_path / "x.py"), tmp_path / "r", in_tree=True)


def test_a_revisions_code_comes_first_on_the_import_path(tmp_path: Path) -> None:
    """Outside the repository: the tree, then the benchmark's folder. Inside the user's checkout: the
    tree's copy of that folder, never the checkout (its code would stand in for the revision's)."""
    repo, tree = tmp_path / "repo", tmp_path / "cache" / "tree"
    (repo / "bench").mkdir(parents=True)
    outside, inside = tmp_path / "b.py", repo / "bench" / "b.py"
    for f in (outside, inside):
        f.write_text("")
    assert import_path(tree, locate(str(outside), repo, False), repo) == [str(tree), str(tmp_path)]
    assert import_path(tree, locate(str(inside), repo, False), repo) == [str(tree), str(tree / "bench")]
    env = program_env({"PYTHONPATH": "/site"}, [str(tree)])
    assert env["PYTHONPATH"] == f"{tree}{os.pathsep}/site" and env["PYTHONSAFEPATH"] == "1"


def test_a_programs_script_runs_from_where_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bench.py").write_text("")
    assert script_index(["python3", "-u", "bench.py", "--n", "4"]) == 2
    assert script_index(["python", "-m", "pkg.bench"]) is None and script_index(["./run.sh"]) == 0
    program, bench = locate_program(["python", "-X", "dev", "bench.py", "8"], tmp_path / "repo", False)
    assert program == ["python", "-X", "dev", str(tmp_path / "bench.py"), "8"] and bench is not None
    with pytest.raises(KprofInputError, match="missing.py: no such file"):
        locate_program(["python", "missing.py"], tmp_path, False)


def _no_cache_path(text: str) -> None:
    assert os.environ["KPROF_CACHE"] not in text and "/trees/" not in text


@pytest.mark.slow  # twelve revision trees built, imported and timed under the interpreter (about 50 s)
def test_add_one_and_leave_one_out_name_the_slow_commit(history: History, tmp_path: Path) -> None:
    """The PR workflow: the benchmark outside the repository, --paths to the package, --setup to
    build each tree; the slow commit is named by add-one and by leave-one-out, each revision that
    cannot be made or imported is said once, and no cache folder is printed."""
    out = tmp_path / "run"
    args = ["run", str(history.benchmark), *_range(history), "--paths", "minikern", "--setup", "python build.py"]
    args += ["--design", "all"]
    res = runner.invoke(app, [*args, *CPU, "--rounds", "10", "--out", str(out), "--format", "json"])
    assert res.exit_code == 0, res.output
    _no_cache_path(res.output)
    said = [line for line in res.stderr.splitlines() if "cannot be run" in line]
    assert len(said) == len({line.split(":")[0] for line in said}) >= 3  # once each
    assert any("failed to import: SyntaxError" in line for line in said)  # reverting the fix breaks the import
    report = json.loads(res.stdout)
    assert report["benchmark"]["path"] == str(history.benchmark.resolve())
    assert [c["sha"][:7] for c in report["left_out"]] == [history.shas["readme"], history.shas["docs"]]
    legs = {r["leg"]: r for r in report["legs"]}
    biased = report["aa"][0]["verdict"] == "BIASED"  # the host clock's A/A can exclude 0 on a busy CPU
    slow = history.shas["slow"]
    assert legs[f"base + {slow}"]["effect_pct"] < -40 and legs[f"head − {slow}"]["effect_pct"] > -20
    assert legs[f"base + {slow}"]["verdict"] in ({"SLOWER", "BIASED", "UNRESOLVED"} if biased else {"SLOWER"})
    attribution = runner.invoke(app, ["attribute", str(out), "--format", "json"], catch_exceptions=False)
    levers = {(r["design"], r["lever"]): r for r in json.loads(attribution.stdout)["levers"]}
    for design in ("add_one", "leave_one_out"):
        assert levers[(design, slow)]["effect_pct"] < -40
        others = [r["effect_pct"] for (d, lever), r in levers.items() if d == design and lever != slow]
        assert all(abs(e) < 40 for e in others), (design, others)  # no other commit looks like the slow one
    md = runner.invoke(app, ["attribute", str(out), "--format", "md"], catch_exceptions=False).stdout
    assert "against the head − commit" in md and history.subjects["slow"] in md
    _no_cache_path(md)


@pytest.mark.slow  # two bisect steps of revision runs under the interpreter (about 40 s)
def test_bisect_with_paths_skips_the_revision_that_does_not_import(history: History, tmp_path: Path) -> None:
    out = tmp_path / "bisect"
    args = ["run", str(history.benchmark), *_range(history), "--paths", "minikern", "--setup", "python build.py"]
    res = runner.invoke(
        app, [*args, "--design", "bisect", *CPU, "--rounds", "10", "--out", str(out), "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    _no_cache_path(res.output)
    result = json.loads(res.stdout)
    assert result["verdict"] == "FOUND", res.output
    assert result["culprit_commits"][0]["subject"] == history.subjects["slow"]
    assert result["culprit_commits"][0]["sha"].startswith(history.shas["slow"])
    broken = [c["sha"][:7] for c in result["commits"]].index(history.shas["broken"]) + 1
    assert list(result["skipped"]) == [str(broken)] and "SyntaxError" in result["skipped"][str(broken)]
    assert [c["subject"] for c in result["left_out"]] == [history.subjects["readme"], history.subjects["docs"]]
    said = [line for line in res.stderr.splitlines() if "cannot be run" in line]
    assert len(said) == 1 and history.shas["broken"] in said[0]


def _program_repo(root: Path) -> tuple[Path, dict[str, str]]:
    """A repository whose package the benchmark imports and whose fake_kernel_scale.txt the stand-in
    profiler reads in the working directory: base, 5% slower kernels, a broken import, its fix, docs."""
    repo = root / "prog"
    (repo / "pkg").mkdir(parents=True)
    git(repo, "init", "-q")
    (repo / "pkg" / "__init__.py").write_text("VERSION = 1\n")
    (repo / "fake_kernel_scale.txt").write_text("1.0")
    shas = {}

    def commit(role: str, path: str, text: str) -> None:
        (repo / path).write_text(text)
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", role)
        shas[role] = git(repo, "rev-parse", "--short=7", "HEAD")

    commit("base", "pkg/__init__.py", "VERSION = 1\n")
    commit("slower", "fake_kernel_scale.txt", "1.05")
    commit("broken", "pkg/__init__.py", "VERSION = (\n")
    commit("fixed", "pkg/__init__.py", "VERSION = 2\n")
    commit("docs", "README", "notes\n")
    return repo, shas


@pytest.mark.slow  # whole programs per revision per round with the stand-in profiler (about 15 s)
def test_whole_programs_per_step_broken_revisions_once_and_bisect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The benchmark script outside the repository imports the revision's package; the stand-in
    profiler's traces have steps (the first 4× slower, as autotuning is) and a process-wide offset
    that varies between processes: GPU busy per steady step is the headline, the broken revision
    runs once, and a bisect on --metric names the slower commit."""
    monkeypatch.setenv("KPROF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", f"{FAKE}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_STEPS", "4")
    monkeypatch.setenv("FAKE_WARMUP", "4")
    repo, shas = _program_repo(tmp_path)
    bench = tmp_path / "bench" / "bench.py"
    bench.parent.mkdir()
    bench.write_text("import pkg\nprint('version', pkg.VERSION)\n")
    program = ["--", sys.executable, str(bench)]
    common = ["--repo", str(repo), "--collector", "rocprofv3", "--rounds", "8"]
    out = tmp_path / "listed"
    revs = ["--rev", shas["base"], "--rev", shas["broken"], "--rev", shas["docs"]]
    res = runner.invoke(app, ["run", *revs, *common, "--out", str(out), "--format", "json", *program])
    assert res.exit_code == 0, res.output
    said = [line for line in res.stderr.splitlines() if "cannot be run" in line]
    assert len(said) == 1 and shas["broken"] in said[0] and "SyntaxError" in said[0]
    _no_cache_path(res.output)
    report = json.loads(res.stdout)
    rows = {(r["case"], r["leg"]): r for r in report["legs"]}
    cases = list(dict.fromkeys(r["case"] for r in report["legs"]))
    assert cases[:2] == ["GPU busy per step", "GPU busy per process"]
    docs = next(leg for case, leg in rows if leg.startswith(shas["docs"]))
    assert rows[("GPU busy per step", docs)]["verdict"] == "SLOWER"
    assert abs(rows[("GPU busy per step", docs)]["effect_pct"] - 100 * (1 / 1.05 - 1)) < 0.5
    status = RunFolder(out).read_statuses().of("GPU busy per process").record()
    broken = next(leg for leg in status["failed"])
    assert broken.startswith(shas["broken"]) and not status.get("failures")  # its probe alone, no round after

    bisect = tmp_path / "bisect"
    args = ["run", "--revisions", f"{shas['base']}..{shas['docs']}", *common[:-1], "12", "--design", "bisect"]
    res = runner.invoke(app, [*args, "--metric", "attn_kernel", "--out", str(bisect), "--format", "json", *program])
    assert res.exit_code == 0, res.output
    found = json.loads(res.stdout)
    assert found["case"] == "kernels /attn_kernel/ per step"
    assert found["verdict"] == "FOUND" and found["culprit_commits"][0]["sha"].startswith(shas["slower"])
    assert "SyntaxError" in next(iter(found["skipped"].values()))


def test_a_program_whose_baseline_fails_stops_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One probe, one line with the command and its error, exit 2, and no run folder left behind."""
    monkeypatch.setenv("PATH", f"{FAKE}{os.pathsep}{os.environ['PATH']}")
    bench = tmp_path / "bench.py"
    bench.write_text("raise SystemExit('no GPU found')\n")
    out = tmp_path / "run"
    res = runner.invoke(
        app,
        [
            "run",
            "--leg",
            "a",
            "--leg",
            "b:X=1",
            "--collector",
            "rocprofv3",
            "--out",
            str(out),
            "--",
            sys.executable,
            str(bench),
        ],
    )
    assert res.exit_code == 2 and not out.exists()
    plan, *lines = res.stderr.strip().splitlines()  # what the run was to do, then why it stopped
    assert plan.startswith("bench.py: 1 case × 3 legs")
    assert len(lines) == 1 and "its command failed its first run" in lines[0] and "no GPU found" in lines[0]


def test_a_tracked_benchmark_that_revisions_change_is_noted(history: History) -> None:
    """A benchmark inside the repository that the history changes: the user's copy runs for every
    revision (as asked), and the plan says so once, pointing at --in-tree."""
    tracked = history.repo / "bench_in_repo.py"
    shutil.copy(history.benchmark, tracked)
    git(history.repo, "add", tracked.name)
    git(history.repo, "commit", "-q", "-m", "Add a benchmark")
    tracked.write_text(tracked.read_text() + "# edited since\n")
    events: list[dict] = []
    req = RunRequest(
        workload=str(tracked), revs=["HEAD~1", "HEAD"], repo=str(history.repo), device="cpu", setup="python build.py"
    )
    plan_run(req, events.append)
    notes = [e.text for e in events if isinstance(e, Note)]
    assert len(notes) == 1 and "bench_in_repo.py is in the repository and differs at" in notes[0]
    assert "--in-tree" in notes[0]
