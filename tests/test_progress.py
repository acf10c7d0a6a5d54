"""The live display of a run (kprof.report.progress): a bar per phase on a terminal, each counted
on its own; piped, one line per stage of a case and per round."""

from __future__ import annotations

import io

from rich.console import Console

from kprof.events import LegFailed, Phase, RoundDone, Started
from kprof.report.progress import RunProgress, plan_line
from kprof.report.refusals import refusal_lines
from kprof.run_model import CaseRecord, Leg, Placement, Protocol, Role, Run, WorkloadSubject

LEGS = [Leg("base", roles=frozenset({Role.BASELINE})), Leg("fast", roles=frozenset({Role.ADD_ONE}))]


def _run(cases: int = 2, rounds: int = 3) -> Run:
    cases_ = [CaseRecord(f"c{i}") for i in range(cases)]
    return Run(WorkloadSubject(spec="w", name="w"), LEGS, cases_, Protocol(rounds=rounds), Placement("cuda"))


def _worker_events(case: str, rounds: int = 3, sets: int = 4) -> list:
    """What a worker says of one case: set-up, the gate on every set, capture, warm-up, rounds."""
    events: list = [Started(), Phase(case=case, step="setup")] if case == "c0" else [Phase(case=case, step="setup")]
    for _ in range(sets):
        events.append(Phase(case=case, step="baseline", leg="baseline"))
        events += [Phase(case=case, step="check", leg=leg.name) for leg in LEGS]
    events += [Phase(case=case, step="capture", leg=leg.name) for leg in LEGS] + [Phase(case=case, step="warmup")]
    return events + [RoundDone(case=case, round=r, rounds=rounds, burn_in=r == 0) for r in range(rounds + 1)]


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=120, color_system=None), out


FAILED = LegFailed(case="c0", leg="fast", reason="correctness: differs")


def _piped(quiet: bool) -> list[str]:
    """What a one-case run prints to a pipe: its worker's events, then a leg's failure."""
    console, out = _console(terminal=False)
    with RunProgress(console, _run(cases=1), "runs/w-1", transient=False, quiet=quiet) as progress:
        for event in [*_worker_events("c0"), FAILED]:
            progress.on_event(event)
    return out.getvalue().splitlines()


def test_piped_progress_says_each_stage_of_a_case_once_and_every_round() -> None:
    lines = _piped(quiet=False)
    assert lines.pop(0) == "w: 1 case × 2 legs, 3 rounds each (+1 burn-in) on cuda → runs/w-1"  # said on Started
    assert lines[:4] == [
        "c0: setting up buffers",
        "c0: correctness gate (every leg on every buffer set)",  # not once per leg and buffer set
        "c0: capturing every leg",
        "c0: warming up",
    ]
    assert lines[4:8] == ["c0: round 1/4 (burn-in)", "c0: round 2/4", "c0: round 3/4", "c0: round 4/4"]
    assert len(lines) == 9 and "fast" in lines[8]  # a warning is printed as it comes


def test_terminal_progress_counts_each_phase_on_its_own_bar() -> None:
    console, _ = _console(terminal=True)
    progress = RunProgress(console, _run(cases=2, rounds=3), "runs/w-1", transient=False, quiet=False)
    with progress:
        for event in _worker_events("c0"):
            progress.on_event(event)
        for event in _worker_events("c1")[:5]:  # the second case is in its gate
            progress.on_event(event)
    assert progress.done == {"preparing": 1, "burn-in": 1, "timed rounds": 3}
    frame, text = _console(terminal=False)
    frame.print(progress.bars.get_renderable())  # what the terminal shows last: one line per phase
    final = text.getvalue().splitlines()
    assert [line.split()[0] for line in final] == ["preparing", "burn-in", "timed"]
    assert "1/2" in final[0] and "1/2" in final[1] and "3/6" in final[2]
    assert "c1: correctness gate" in final[0]  # the bar says where its phase is


def test_a_leg_host_or_a_program_without_a_warm_up_is_prepared_by_its_burn_in_round() -> None:
    console, _ = _console(terminal=True)
    progress = RunProgress(console, _run(cases=1), "runs/w-1", transient=True, quiet=False)
    with progress:
        progress.on_event(RoundDone(case="program", round=0, rounds=3, burn_in=True))
        progress.on_event(RoundDone(case="program", round=1, rounds=3))
    assert progress.done == {"preparing": 1, "burn-in": 1, "timed rounds": 1}


def test_quiet_shows_no_progress_but_still_warnings() -> None:
    assert _piped(quiet=True) == [FAILED.sentence()]


def test_the_plan_line_says_what_the_run_will_do() -> None:
    line = plan_line(_run(cases=2, rounds=16), "runs/w-1")
    assert line == "w: 2 cases × 2 legs, 16 rounds each (+1 burn-in) on cuda → runs/w-1"


def test_legs_refused_for_one_reason_are_one_line_naming_their_lever() -> None:
    """A wrong lever in a factorial run fails every leg that holds it alike: one line, not one per leg."""
    legs = [
        Leg("baseline", roles=frozenset({Role.BASELINE})),
        *(Leg(n, frozenset(n.split("+")), roles=frozenset({Role.FACTORIAL})) for n in ("fast", "wrong", "fast+wrong")),
    ]
    lines = refusal_lines(
        [
            ("c0", "wrong", "correctness: 3 of 64 differ"),
            ("c0", "fast+wrong", "correctness: 3 of 64 differ"),
            ("c0", "fast", "launch: OutOfResources: shared memory"),
            ("c1", "wrong", "correctness: 5 of 64 differ"),
            ("c1", "fast+wrong", "correctness: 5 of 64 differ"),
        ],
        legs,
    )
    assert lines == [
        "c0 · 2 legs with lever wrong not timed (wrong, fast+wrong): correctness: 3 of 64 differ",
        "c0 · fast not timed: launch: OutOfResources: shared memory",
        "c1 · 2 legs with lever wrong not timed (wrong, fast+wrong): correctness: 5 of 64 differ",
    ]
    many = [("c0", f"leg{i}", "same") for i in range(9)]  # legs that share no lever: counted, six named
    assert refusal_lines(many, legs) == ["c0 · 9 legs not timed (leg0, leg1, leg2, leg3, leg4, leg5, and 3 more): same"]


def test_the_progress_says_a_cases_refusals_once_after_its_gate() -> None:
    console, out = _console(terminal=False)
    run = _run(cases=1)
    run.legs = [*LEGS, Leg("fast+x", frozenset({"fast", "x"}), roles=frozenset({Role.FACTORIAL}))]
    run.legs[1] = Leg("fast", frozenset({"fast"}), roles=frozenset({Role.ADD_ONE}))
    with RunProgress(console, run, "runs/w-1", transient=False, quiet=False) as progress:
        events = _worker_events("c0")
        gate_end = next(i for i, e in enumerate(events) if isinstance(e, Phase) and e.step == "capture")
        refusals = [LegFailed(case="c0", leg=leg, reason="correctness: differs") for leg in ("fast", "fast+x")]
        for event in [*events[:gate_end], *refusals, *events[gate_end:]]:
            progress.on_event(event)
    lines = out.getvalue().splitlines()
    said = [line for line in lines if "not timed" in line]
    assert said == ["c0 · 2 legs with lever fast not timed (fast, fast+x): correctness: differs"]
    assert lines.index(said[0]) == lines.index("c0: capturing every leg") - 1  # as the gate ends
