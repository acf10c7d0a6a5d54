"""meta.json is written once: each case's status lives in its own file (status/cNNN.json) and what
the run finds out while it runs in state.json. Folders from before keep reading their statuses from
meta.json, and a damaged status or state file is one line naming it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fake_runs import write_run

from kprof.errors import KprofInputError
from kprof.run_model import Leg, RevisionSet, Role
from kprof.store.layout import STATUS, status_file
from kprof.store.run_folder import RunFolder

LEGS = [Leg("base", roles=frozenset({Role.BASELINE})), Leg("fast", roles=frozenset({Role.LEG}))]


def _folder(tmp_path: Path):  # type: ignore[no-untyped-def]
    return write_run(tmp_path / "run", LEGS, lambda leg, case: 0.0, cases=("a", "b"), rounds=6)


def test_a_case_status_goes_to_its_own_file_and_meta_json_is_left_alone(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    meta = folder.meta_path.read_bytes()
    folder.update_case("b", status="failed", reason="its worker died twice", no_op_legs=["fast"])
    assert folder.meta_path.read_bytes() == meta
    stored = json.loads(status_file(folder.root, 1).read_text())
    assert stored["status"] == "failed" and stored["no_op_legs"] == ["fast"]
    assert folder.status("b").reason == "its worker died twice" and folder.status("a").status == "done"
    assert folder.read_statuses().of("b").reason == "its worker died twice"
    assert "case_status" not in json.loads(meta)  # the plan holds no status
    assert not hasattr(folder.read_run(), "case_status")  # the plan and the statuses are separate types


def test_reading_a_status_changes_nothing(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    statuses = folder.read_statuses()
    before = dict(statuses.by_case)
    assert statuses.of("never started").status == ""
    assert statuses.by_case == before
    assert statuses.missing(["a", "b"]) == folder.read_statuses().missing(["a", "b"])


def _add_deaths(root: str, who: int) -> None:
    folder = RunFolder(Path(root))
    for i in range(20):
        folder.add_to_case("a", deaths=[{"who": who, "i": i}], crash_reasons={f"leg{who}-{i}": "x"})


def test_what_processes_add_to_a_status_at_once_is_all_kept(tmp_path: Path) -> None:
    import multiprocessing

    folder = _folder(tmp_path)
    folder.update_case("a", deaths=[{"who": -1}])
    spawn = multiprocessing.get_context("spawn")
    procs = [spawn.Process(target=_add_deaths, args=(str(folder.root), who)) for who in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    status = folder.read_statuses().of("a")
    assert len(status.deaths) == 61 and len(status.crash_reasons) == 60  # none read first and written over
    assert [d["i"] for d in status.deaths if d.get("who") == 2] == list(range(20))


def test_a_folder_from_before_keeps_its_statuses_in_meta_json(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    shutil.rmtree(folder.root / STATUS)  # a folder written before status files existed
    raw = json.loads(folder.meta_path.read_text())
    raw["case_status"] = {"a": {"status": "done", "samples": 3}, "b": {"status": "done", "samples": 3}}
    folder.meta_path.write_text(json.dumps(raw))
    folder = RunFolder(folder.root)  # opened by a kprof of today
    assert folder.read_statuses().of("a").samples == 3
    assert folder.status("b").samples == 3  # one case read alone, from meta.json in such a folder
    folder.update_case("a", samples=5)  # a resume of such a folder: the new status goes to a file
    statuses = folder.read_statuses()
    assert (statuses.of("a").samples, statuses.of("b").samples) == (5, 3)
    assert json.loads(folder.meta_path.read_text())["case_status"]["a"]["samples"] == 3


@pytest.mark.parametrize(
    "text, problem",
    [
        ("{not json", "is not a case status kprof can read"),
        ("[1, 2]", "not a JSON object"),
        ('{"status": 3}', "whose status is a int"),
        ('{"failed": ["fast"]}', "whose failed is a list"),
        ("[" * 100_000, "is not a case status kprof can read"),
        ("", "empty"),
    ],
    ids=["garbage", "a list", "a number for text", "a list for a mapping", "nested deep", "empty"],
)
def test_a_damaged_status_file_is_one_line_naming_it(tmp_path: Path, text: str, problem: str) -> None:
    folder = _folder(tmp_path)
    folder.update_case("a", status="done")
    status_file(folder.root, 0).write_text(text)
    with pytest.raises(KprofInputError) as e:
        folder.read_statuses()
    assert "c000.json" in str(e.value) and problem in str(e.value) and "\n" not in str(e.value)


def test_meta_json_is_written_once_what_the_run_finds_goes_to_state_json(tmp_path: Path) -> None:
    from kprof.run_model import RevisionTree

    folder = write_run(
        tmp_path / "run",
        LEGS,
        lambda leg, case: 0.0,
        rounds=6,
        revisions=RevisionSet(repo="/r", trees={"abc": RevisionTree("/t", "x")}),
    )
    meta = folder.meta_path.read_bytes()
    folder.record_measurements({"copy_gbps": 4200.0, "measured_in_case": "c"}, "0", lambda info: "events")
    folder.record_measurements({"copy_gbps": 4100.0, "measured_in_case": "c"}, "1", lambda info: "events")
    folder.update_revision("abc", refused="does not apply")
    folder.update_case("c", status="done")
    assert folder.meta_path.read_bytes() == meta
    run = folder.read_run()
    assert run.timer_info["gpus"]["1"]["copy_gbps"] == 4100.0
    assert run.timer_info["copy_gbps"] == 4200.0  # the first GPU's stand for the run
    assert run.timer == "events" and run.revisions.trees["abc"].refused == "does not apply"
    assert run.revisions.trees["abc"].path == "/t"


@pytest.mark.parametrize("text", ["{broken", "[]", '{"timer": 3}', '{"revisions": {"abc": 1}}'])
def test_a_damaged_state_file_is_one_line_naming_it(tmp_path: Path, text: str) -> None:
    folder = _folder(tmp_path)
    (folder.root / "state.json").write_text(text)
    with pytest.raises(KprofInputError) as e:
        folder.read_run()
    assert "state.json" in str(e.value) and "\n" not in str(e.value)
