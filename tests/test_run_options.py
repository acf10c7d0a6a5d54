"""The options of run, calibrate and attribute are declared once (kprof.run_options) and fill the
request's fields by name: each is a field, its default is the request's, and what a user types
arrives in the request."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

import pytest
from typer.testing import CliRunner

from kprof import cli
from kprof.engine.options import RunRequest
from kprof.engine.program import ProgramRequest
from kprof.run_options import ATTRIBUTE, CALIBRATE, OPTIONS, RUN, SHORTHANDS, request_fields

runner = CliRunner()


def _defaults(request_type: Any) -> dict[str, Any]:
    out = {}
    for f in fields(request_type):
        if f.default is not MISSING:
            out[f.name] = f.default
        elif f.default_factory is not MISSING:
            out[f.name] = f.default_factory()
    return out


@pytest.mark.parametrize("group", [RUN, CALIBRATE, ATTRIBUTE], ids=["run", "calibrate", "attribute"])
def test_every_option_is_a_field_of_a_request(group: list[str]) -> None:
    names = {f.name for f in fields(RunRequest)} | {f.name for f in fields(ProgramRequest)}
    assert set(group) - set(SHORTHANDS) <= names, set(group) - names
    assert len(group) == len(set(group))


def test_an_options_default_is_the_requests() -> None:
    given = request_fields({name: option.default for name, option in OPTIONS.items()})
    own = _defaults(RunRequest)
    differ = {n: (given[n], own[n]) for n in given if n in own and given[n] != own[n]}
    assert differ == {"plants": ("0.5,1,2", [])}  # calibrate's text, parsed there into numbers


def _captured(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> Any:
    seen: dict[str, Any] = {}

    def start(request: Any, out: Any, say: Any = None) -> None:
        seen["request"] = request
        raise SystemExit(0)

    monkeypatch.setattr(cli, "_start", start)
    res = runner.invoke(cli.app, args)
    assert "request" in seen, res.output
    return seen["request"]


def test_what_is_typed_arrives_in_the_run_request(monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["run", "paged_decode", "--case", "b2", "--rounds", "7", "--timer", "events", "--threshold", "1.5"]
    args += ["--rev", "A", "--rev", "B", "--paths", "a, b", "--paths", "c", "--no-torch-leg", "--aa-copies", "2"]
    args += ["--between-runs", "0.3"]
    req = _captured(monkeypatch, args)
    assert req.between_runs_pct == 0.3
    assert isinstance(req, RunRequest)
    assert (req.workload, req.case_filter, req.rounds, req.timer_mode, req.threshold_pct) == (
        "paged_decode",
        "b2",
        7,
        "events",
        1.5,
    )
    assert (req.revs, req.paths, req.torch_leg, req.aa_copies, req.setup) == (["A", "B"], ["a", "b", "c"], False, 2, "")


def test_calibrate_and_attribute_fill_the_same_request(monkeypatch: pytest.MonkeyPatch) -> None:
    cal = _captured(monkeypatch, ["calibrate", "--plant", "1,3", "--rounds", "9", "--case", "b2"])
    assert (cal.plants, cal.rounds, cal.case_filter, cal.aa_copies, cal.design) == ([1.0, 3.0], 9, "b2", 3, "endpoints")
    att = _captured(monkeypatch, ["attribute", "paged_decode", "--design", "add-one", "--target", "grouped_heads"])
    assert (att.workload, att.design, att.target, att.threshold_pct) == (
        "paged_decode",
        "add-one",
        ["grouped_heads"],
        0.5,
    )


def test_a_whole_program_takes_its_own_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    req = _captured(monkeypatch, ["run", "--leg", "a", "--leg", "b:X=1", "--steps", "^s", "--", "python", "x.py"])
    assert isinstance(req, ProgramRequest)
    assert (req.legs, req.program, req.steps) == (["a", "b:X=1"], ["python", "x.py"], "^s")


def test_each_request_keeps_its_own_collector_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """`kprof run --leg base --leg b:X=1 -- python x.py` (docs/run.md) once failed with "--collector:
    whole programs run under nsys or rocprofv3 or torch, not 'events'": the workload's default had
    overridden the program's. Without --collector each request has its own default."""
    program = _captured(monkeypatch, ["run", "--leg", "base", "--leg", "b:X=1", "--", "python", "x.py"])
    assert isinstance(program, ProgramRequest) and program.collector == "torch"
    workload = _captured(monkeypatch, ["run", "paged_decode"])
    assert isinstance(workload, RunRequest) and workload.collector == "events"
    given = _captured(monkeypatch, ["run", "--leg", "a", "--collector", "nsys", "--", "python", "x.py"])
    assert given.collector == "nsys"


def test_no_graphs_is_captures_none(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _captured(monkeypatch, ["run", "paged_decode", "--no-graphs"]).captures == "none"
    assert _captured(monkeypatch, ["run", "paged_decode"]).captures == "per-round"
    assert _captured(monkeypatch, ["calibrate", "--no-graphs", "--captures", "none"]).captures == "none"
    res = runner.invoke(cli.app, ["run", "paged_decode", "--no-graphs", "--captures", "once"])
    assert res.exit_code == 2 and "--no-graphs: contradicts --captures once" in res.output
