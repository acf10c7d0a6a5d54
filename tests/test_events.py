"""Typed progress events: every kind survives the JSON line a worker writes, a line that is not an
event is passed over, and each prints the sentence users read."""

from __future__ import annotations

import pytest

from kprof.events import (
    CaseFailed,
    LegCrashed,
    LegFailed,
    NoOp,
    Note,
    Phase,
    Race,
    RevisionRefused,
    RoundDone,
    WorkerDied,
    decode,
    encode,
)

EVERY_KIND = [
    Phase(case="b2", step="check", leg="fast", process="1/2"),
    RoundDone(case="b2", round=3, rounds=16),
    Note(text="made the tree of abc again"),
    LegFailed(case="b2", leg="fast", reason="correctness: 3 of 64 differ", round=2),
    RevisionRefused(leg="r1, r2", reason="does not apply"),
    WorkerDied(case="b2", step="capture", leg="fast", reason="killed by SIGKILL"),
    LegCrashed(case="b2", leg="fast", reason="exit 139"),
    CaseFailed(case="b2", reason="the baseline failed"),
    Race(case="b2", leg="fast", round=4, detail="2 elements differ"),
    NoOp(case="b2", leg="fast"),
]


@pytest.mark.parametrize("event", EVERY_KIND, ids=lambda e: type(e).__name__)
def test_an_event_comes_back_as_it_was_sent(event: object) -> None:
    line = encode(event)  # type: ignore[arg-type]
    assert "\n" not in line
    assert decode(line + "\n") == event


def test_the_wire_format_names_the_kind() -> None:
    assert encode(RoundDone(case="c", round=1, rounds=6)) == '{"event":"round","case":"c","round":1,"rounds":6}'


@pytest.mark.parametrize("line", ["a workload's own print\n", "{}", '{"event": "bogus"}', '{"event": "round"}', ""])
def test_a_line_that_is_not_an_event_is_passed_over(line: str) -> None:
    assert decode(line) is None


def test_sentences() -> None:
    assert Phase(case="b2", step="check", leg="fast", process="1/2").text() == (
        "b2 (process 1/2): correctness gate · fast"
    )
    assert Phase(case="b2", step="setup", leg="fast").text() == "b2: setting up buffers"
    assert RoundDone(case="b2", round=1, rounds=6).sentence() is None
    assert LegFailed(case="b2", leg="fast", reason="x", round=2).sentence() == "b2 · fast not timed in round 2: x"
    assert LegFailed(leg="fast", reason="x").sentence() == "fast not timed: x"
    assert WorkerDied(case="b2", step="capture", leg="fast", reason="killed by SIGKILL").sentence() == (
        "b2: its worker died at capturing · fast (killed by SIGKILL) and was started again"
    )
    assert CaseFailed(case="b2", reason="r").sentence() == "b2: the case failed: r"
    assert "silent no-op" in (NoOp(case="b2", leg="fast").sentence() or "")
