"""The typed run model and its meta.json format: every stored run still loads (version 1 folders
are migrated), bad descriptions are one-line errors, and the analysis finds legs by role, never by
name (a baseline named "base" crashed a report on the GPU)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from fake_runs import as_version_3, write_run

from conftest import ROOT
from kprof.commands.analyse import analyse_run
from kprof.commands.compare import load_side
from kprof.errors import KprofInputError
from kprof.report.run_report import run_document
from kprof.report.table import render_markdown
from kprof.run_model import RUN_FORMAT_VERSION, Leg, ProgramSubject, Protocol, Role, Run, WorkloadSubject, migrate
from kprof.store.run_folder import RunFolder

STORED = sorted((ROOT / "docs" / "runs").glob("*/*/meta.json")) + sorted(
    (ROOT / "docs" / "runs").glob("*/*/step-*/meta.json")
)


def test_there_are_stored_runs_of_older_versions_to_check() -> None:
    versions = [json.loads(p.read_text()).get("run_format_version") for p in STORED]
    assert versions.count(1) >= 20 and versions.count(2) >= 5


@pytest.mark.parametrize("meta", STORED, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_every_stored_run_loads_through_the_migration(meta: Path) -> None:
    raw = json.loads(meta.read_text())
    run = RunFolder(meta.parent).read_run()
    assert [leg.name for leg in run.legs] == [d["name"] for d in raw["legs"]]
    assert run.baseline.has(Role.BASELINE) and run.aa_legs
    if raw["run_format_version"] == 1:  # written by the first sessions: migrated on read
        assert not run.is_program and run.case_names == raw["cases"]
        for case in run.cases:
            assert case.params == raw["case_params"][case.name]
            assert case.bytes_per_call == raw["bytes_per_call"][case.name]
    else:
        assert run.case_names == [c["name"] for c in raw["cases"]]
    # the migrated description writes and reads back unchanged
    again = Run.from_json(run.to_json())
    assert again.record() == run.record()


def test_a_stored_run_renders_with_the_migrated_model() -> None:
    report = analyse_run(ROOT / "docs" / "runs" / "h200-2026-11-30" / "paged_endpoints")
    md = render_markdown(run_document(report))
    assert "| baseline (A/A) |" in md and "cuda-events" in md


def test_version_1_program_run_is_migrated() -> None:
    v1 = {
        "mode": "program",
        "workload": "python bench.py",
        "cases": ["GPU busy per process"],
        "legs": [
            {"name": "base", "env": {}, "roles": ["baseline"], "features": [], "params": [], "replica": 0},
            {"name": "base (A/A)", "env": {"X": "1"}, "roles": ["aa"], "features": [], "params": [], "replica": 1},
        ],
        "rounds": 8,
        "run_format_version": 1,
    }
    d = migrate(v1)
    assert d["subject"] == {"kind": "program", "name": "python bench.py", "command": ["python", "bench.py"]}
    assert d["run_format_version"] == RUN_FORMAT_VERSION
    assert d["cases"][0]["name"] == "GPU busy per process"
    run = Run.from_record(v1)
    assert run.baseline.name == "base" and run.aa_legs[0].env == (("X", "1"),)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({}, "not a kprof run description"),
        ([], "a JSON object was expected"),
        (42, "a JSON object was expected"),
        ({"legs": "oops", "cases": [], "rounds": 1, "workload": "w", "kind": "workload"}, "not a kprof run"),
        ({"run_format_version": 99}, "newer kprof"),
        ({"run_format_version": "two"}, "not a version"),
    ],
)
def test_bad_descriptions_are_one_line_errors(raw: object, words: str) -> None:
    with pytest.raises(KprofInputError, match=words):
        Run.from_record(raw, "x/meta.json")


def test_a_run_needs_exactly_one_baseline() -> None:
    legs = [Leg("a", roles=frozenset({Role.LEG})), Leg("b", roles=frozenset({Role.AA}), replica=1)]
    raw = Run(ProgramSubject(command=["p"], name="p"), legs, [], Protocol(rounds=6)).record()
    with pytest.raises(KprofInputError, match="exactly one leg with the baseline role"):
        Run.from_record(raw)


def test_a_spread_between_runs_is_kept_and_a_negative_one_named() -> None:
    """--between-runs travels in meta.json (an older folder, without it, reads 0); a negative or
    absurd one is a one-line error naming the field."""
    legs = [Leg("a", roles=frozenset({Role.BASELINE}))]
    run = Run(ProgramSubject(command=["p"], name="p"), legs, [], Protocol(rounds=6), between_runs_pct=0.3)
    assert Run.from_record(run.record()).between_runs_pct == 0.3
    older = {k: v for k, v in run.record().items() if k != "between_runs_pct"}
    assert Run.from_record(older).between_runs_pct == 0.0
    for bad in (-0.1, 100.0):
        with pytest.raises(KprofInputError, match="holds between_runs_pct"):
            Run.from_record({**run.record(), "between_runs_pct": bad}, "x/meta.json")


def test_non_utf8_meta_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "meta.json").write_bytes(b'{"kind": "\xff"}')
    with pytest.raises(KprofInputError, match="not UTF-8"):
        RunFolder(tmp_path).read_run()


def test_program_run_with_arbitrary_names_and_a_kernel_one_leg_lacks(tmp_path: Path) -> None:
    """The GPU defect: a whole-program run with legs 'base' and 'slow' ended in KeyError: 'base'
    when a kernel ran in one leg only. Legs are found by role now, and such a case is reported
    with its time and no comparison instead of crashing the report."""
    legs = [
        Leg("base", roles=frozenset({Role.BASELINE})),
        Leg("slow", roles=frozenset({Role.LEG}), env=(("SLOW", "1"),)),
        Leg("base (A/A)", roles=frozenset({Role.AA}), replica=1),
    ]
    effects = {"base": 0.0, "slow": math.log(1.10), "base (A/A)": 0.0}
    folder = write_run(tmp_path / "run", legs, lambda leg, case: effects[leg.name], program=True)
    # a kernel that only the slow leg launches: its own case, with no baseline rounds
    extra = folder.read("samples").query("leg == 'slow'").assign(case="extra_kernel (per call)")
    folder.write_part("samples", 9, 0, extra)
    report = analyse_run(folder.root)
    slow = report.effects.query("case == 'c' and leg == 'slow'").iloc[0]
    assert slow["verdict"] == "SLOWER"
    assert slow["ci_low_pct"] <= 100 * (1 / 1.10 - 1) <= slow["ci_high_pct"]
    assert report.calibration.empty
    extra_row = report.effects.query("case == 'extra_kernel (per call)'").iloc[0]
    assert extra_row["leg"] == "slow" and extra_row["verdict"] == "NO BASELINE" and extra_row["time_us"] > 0
    md = render_markdown(run_document(report))
    assert "| slow |" in md and "the baseline has none" in md


@pytest.mark.parametrize("damage", [b"", b"PAR1 truncated", b"not parquet at all"])
def test_a_damaged_part_is_skipped_with_a_warning_and_the_rest_reported(tmp_path: Path, damage: bytes) -> None:
    legs = [Leg("base", roles=frozenset({Role.BASELINE})), Leg("b (A/A)", roles=frozenset({Role.AA}), replica=1)]
    folder = write_run(tmp_path / "run", legs, lambda leg, case: 0.0, rounds=12)
    broken = folder.part_path("samples", 0, 7)
    broken.write_bytes(damage)
    report = analyse_run(folder.root)
    assert report.summaries["c"].rounds == 11  # every intact timed round
    assert len(report.warnings) == 1 and str(broken) in report.warnings[0]
    assert "skipped a damaged part" in render_markdown(run_document(report))
    with pytest.raises(KprofInputError, match="c000-r0007"):
        folder.read("samples")  # a plain read still refuses it, naming the part


def test_a_part_with_unrelated_columns_is_named(tmp_path: Path) -> None:
    legs = [Leg("base", roles=frozenset({Role.BASELINE})), Leg("b (A/A)", roles=frozenset({Role.AA}), replica=1)]
    folder = write_run(tmp_path / "run", legs, lambda leg, case: 0.0, rounds=8)
    import pandas as pd

    pd.DataFrame({"x": [1]}).to_parquet(folder.part_path("samples", 0, 3))
    report = analyse_run(folder.root)
    assert "no column case" in report.warnings[0] and report.summaries["c"].rounds == 7


def test_a_run_folder_is_held_by_one_process(tmp_path: Path) -> None:
    from kprof.engine.parent import execute

    legs = [Leg("base", roles=frozenset({Role.BASELINE})), Leg("b (A/A)", roles=frozenset({Role.AA}), replica=1)]
    folder = write_run(tmp_path / "run", legs, lambda leg, case: 0.0, rounds=6)
    with folder.lock(), pytest.raises(KprofInputError, match="another kprof process"):
        execute(RunFolder(folder.root), lambda event: None)
    with folder.lock():  # released: it can be taken again
        pass


def test_a_leg_that_failed_in_a_later_process_is_not_reported_from_earlier_rounds(tmp_path: Path) -> None:
    """With a case in two processes, a leg can pass the first's gate, time its rounds, then fail
    the second's check or take its worker down: its earlier rounds are not reported as an effect."""
    legs = [
        Leg("base", roles=frozenset({Role.BASELINE})),
        Leg("fast", features=frozenset({"a"})),
        Leg("odd", features=frozenset({"b"})),
        Leg("gone", features=frozenset({"c"})),
    ]
    folder = write_run(tmp_path / "run", legs, lambda leg, case: -0.05 * len(leg.features), features=("a", "b", "c"))
    assert {"fast", "odd", "gone"} <= set(analyse_run(folder.root).effects["leg"])
    folder.update_case("c", failed={"odd": "correctness: 3 of 64 elements differ"}, crashed_legs=["gone"])
    effects = analyse_run(folder.root).effects
    assert "fast" in set(effects["leg"]) and not {"odd", "gone"} & set(effects["leg"])
    compared = load_side(folder.root, None).run_rounds  # `kprof compare` reads the same rounds
    assert compared is not None and "fast" in set(compared["leg"]) and not {"odd", "gone"} & set(compared["leg"])


def _v3(**changes: object) -> dict:
    legs = [Leg("base", roles=frozenset({Role.BASELINE})), Leg("fast", roles=frozenset({Role.LEG}))]
    raw = Run(WorkloadSubject(spec="w", name="w"), legs, [], Protocol(rounds=6)).record()
    return {**as_version_3(raw), **changes}


def test_an_older_folder_gets_the_values_its_kprof_had_and_a_new_one_the_defaults() -> None:
    old = _v3()
    del old["timer_mode"], old["captures"]
    run = Run.from_record(old)
    assert (run.protocol.timer_mode, run.protocol.captures) == ("events", "once")  # from before those choices
    assert run.protocol.rounds == 6 and run.placement.device == "cpu"  # the flat keys, grouped
    new = Run(WorkloadSubject(spec="w", name="w"), run.legs, [], Protocol(rounds=6)).record()
    del new["protocol"]["timer_mode"], new["protocol"]["captures"]
    assert RUN_FORMAT_VERSION == new["run_format_version"] == 5
    protocol = Run.from_record(new).protocol
    assert (protocol.timer_mode, protocol.captures) == ("auto", "per-round")


def test_nulls_in_an_older_folder_read_as_defaults_and_in_a_new_one_are_errors() -> None:
    assert Run.from_record(_v3(dtype=None, buffer_sets=None)).protocol.buffer_sets == 4
    new = Run.from_record(_v3()).record()
    new["protocol"]["buffer_sets"] = None
    with pytest.raises(KprofInputError, match="Expected `int`, got `null` - at `\\$.protocol.buffer_sets`"):
        Run.from_record(new)


def test_a_value_of_the_wrong_type_is_named_with_its_field() -> None:
    with pytest.raises(KprofInputError, match="at `\\$.cases\\[0\\].flops_per_call`"):
        Run.from_record({**_v3(), "cases": [{"name": "a", "flops_per_call": "many"}]})


def test_keys_this_version_does_not_model_are_kept() -> None:
    run = Run.from_record({**_v3(), "from_a_later_kprof": {"x": 1}})
    assert run.extra == {"from_a_later_kprof": {"x": 1}} and run.record()["from_a_later_kprof"] == {"x": 1}


def _v4(kind: str, **changes: object) -> dict:
    """A meta.json as format 4 wrote it: the subject's and the revisions' keys at the top level."""
    legs = [Leg("base", roles=frozenset({Role.BASELINE}), revision="base"), Leg("head", roles=frozenset({Role.LEG}))]
    raw = Run(WorkloadSubject(spec="w", name="w"), legs, [], Protocol(rounds=6)).record()
    del raw["subject"], raw["revisions"]
    flat = dict(kind=kind, workload="w", workload_name="w", program=[], step_pattern="", metric="")
    flat |= dict(reference_rtol=0.02, workload_in_tree="", repo=None, commits=[], revisions={}, benchmark=None)
    flat |= dict(paths=[], left_out=[], setup_command="", allow_changed_outputs=False)
    return {**raw, **flat, "run_format_version": 4, **changes}


def test_a_version_4_folder_gets_its_subject_and_revisions_grouped() -> None:
    plain = Run.from_record(_v4("workload", reference_rtol=0.05))
    assert plain.subject == WorkloadSubject(spec="w", name="w", reference_rtol=0.05)
    assert plain.revisions is None and not plain.extra
    tree = {"path": "/cache/t", "base": "abc", "ops": [], "worktree": False, "refused": "", "setup": {}}
    bench = {"path": "/home/u/bench.py", "sha256": "0" * 64, "in_tree": ""}
    program = _v4(
        "program",
        workload="python bench.py --n 3",
        workload_name="bench.py",
        program=["python", "bench.py", "--n", "3"],
        metric="gemm",
        repo="/src/repo",
        commits=[{"sha": "abc"}],
        revisions={"base": tree},
        benchmark=bench,
        setup_command="make",
    )
    run = Run.from_record(program)
    assert run.is_program and run.subject == ProgramSubject(
        command=["python", "bench.py", "--n", "3"], name="bench.py", metric="gemm"
    )
    assert run.revisions is not None and run.revisions.repo == "/src/repo" and run.revisions.setup_command == "make"
    assert run.tree("base") is not None and run.tree("base").path == "/cache/t" and run.tree("head") is None
    assert run.revisions.benchmark is not None and run.revisions.benchmark.path == "/home/u/bench.py"
    assert not run.extra  # every flat key found its place
    again = Run.from_record(run.record())  # format 5 reads back as it was written
    assert again.subject == run.subject and again.revisions == run.revisions
    assert run.record()["subject"]["kind"] == "program" and run.record()["run_format_version"] == 5
