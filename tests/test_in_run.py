"""In-run collectors as a registry (kprof.collectors.in_run): an entry added to ``IN_RUN`` alone is
accepted by ``--collector`` and its pass is run by a case's process after the timed rounds, with
those rounds; a name not in it is refused in one line that lists what is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import kprof.collectors.in_run as in_run
from kprof.collectors.in_run import InRunCollector
from kprof.engine.request import RunRequest, create_run
from kprof.engine.worker import run_case
from kprof.errors import KprofInputError


def test_a_collector_added_to_the_registry_alone_runs_after_the_timed_rounds(tmp_path: Path, monkeypatch) -> None:
    seen: list[tuple[str, list[int]]] = []

    def after(ctx: Any, rounds: dict[int, list[Any]]) -> None:
        seen.append((ctx.case.name, sorted(rounds)))

    counting = InRunCollector("counting", "a stand-in pass", after, on_cpu=True)
    monkeypatch.setitem(in_run.IN_RUN, "counting", counting)
    folder = create_run(
        tmp_path / "run", RunRequest(workload="copy", preset="smoke", device="cpu", rounds=6, collector="counting")
    )
    assert folder.read_run().collector == "counting"
    run_case(folder.root, 0, set())
    case = folder.read_run().case_names[0]
    assert seen == [(case, [1, 2, 3, 4, 5, 6])]  # the timed rounds, the burn-in (round 0) left out
    assert folder.read_statuses().of(case).status == "done"


def test_a_device_pass_is_not_run_on_a_cpu_run(tmp_path: Path, monkeypatch) -> None:
    seen: list[int] = []
    device_only = InRunCollector("device-only", "a pass over device kernels", lambda ctx, rounds: seen.append(1))
    monkeypatch.setitem(in_run.IN_RUN, "device-only", device_only)
    folder = create_run(
        tmp_path / "run", RunRequest(workload="copy", preset="smoke", device="cpu", rounds=6, collector="device-only")
    )
    run_case(folder.root, 0, set())
    assert seen == []


def test_a_collector_not_in_the_registry_is_refused_naming_those_that_are(tmp_path: Path) -> None:
    with pytest.raises(KprofInputError) as e:
        create_run(tmp_path / "run", RunRequest(workload="copy", preset="smoke", device="cpu", collector="perf"))
    assert e.value.where == "--collector" and "events or torch" in e.value.problem
