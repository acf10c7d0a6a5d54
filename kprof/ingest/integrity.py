"""Trace integrity on ingest: activities no clock can have recorded, in any format, are counted,
said (one line each: how many, how much device time) and kept out of the figures they would
falsify; ``kprof trace --strict`` makes any of them an error.

- a start at or before zero (device clocks and session timelines count up from it; one negative
  start made a 3.1-second kernel mean), or more than a day before the trace's median start (a
  timestamp that wrapped or reset at the start of a session): left out;
- longer than a day, or than twice the span of the whole trace (an nsys end of INT64_MAX made a
  kernel total of -9.2e15 µs): left out;
- an end before the start: a zero-length activity at its start (an interval that runs backwards
  subtracted from GPU busy: 961% busy);
- a kernel that starts before the call that launched it (a producer's clock bug): its launch time
  is not used (its step follows its start);
- (said by a reader that sees its launch calls: Kineto) an activity whose correlation id names more
  than one launch call — ids reused within a rank, so the launch it was joined to is a guess.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from kprof.trace import Trace

DAY_NS = 86_400 * 10**9


@dataclass(frozen=True)
class Problem:
    """One kind of impossible record in one trace, and what was done about it."""

    problem: str
    activities: int
    device_us: float
    handling: str

    @property
    def line(self) -> str:
        return (
            f"{self.activities:,} activities {self.problem} ({self.device_us:,.1f} µs of device time): {self.handling}"
        )


def checked(trace: Trace) -> None:
    """``trace.events`` with every impossible record handled, each kind said in ``warnings`` and
    listed in ``meta["integrity"]``."""
    events = trace.events
    if len(events) == 0:
        return
    problems: list[Problem] = []

    def left_out(mask: np.ndarray, problem: str) -> None:
        nonlocal events
        if mask.any():
            problems.append(problem_of(events, mask, problem, "left out"))
            events = events[~mask].reset_index(drop=True)

    start = events["start_ns"].to_numpy("int64")
    left_out(start <= 0, "start at or before time zero")
    start = events["start_ns"].to_numpy("int64")
    if len(start):
        left_out(start < np.median(start) - DAY_NS, "start more than a day before the rest (a wrapped clock)")
    if len(events):
        start, end = events["start_ns"].to_numpy("int64"), events["end_ns"].to_numpy("int64")
        span = int(start.max() - start.min())
        longest = max(DAY_NS, 2 * span) if span else DAY_NS
        left_out(end - start > longest, "last longer than the whole trace (an impossible end)")
    if len(events):
        backwards = events["end_ns"].to_numpy("int64") < events["start_ns"].to_numpy("int64")
        if backwards.any():
            problems.append(problem_of(events, backwards, "end before they start", "counted as 0 µs"))
            events.loc[backwards, "end_ns"] = events.loc[backwards, "start_ns"]
            events.loc[backwards, "dur_ns"] = 0
        early = _before_launch(events)
        if early.any():
            problems.append(problem_of(events, early, "start before their launch", "their launch time is not used"))
            events.loc[early, "launch_ns"] = pd.NA
    trace.events = events
    for p in problems:
        record(trace, p)


def record(trace: Trace, problem: Problem) -> None:
    """One problem said in the trace's warnings and listed in ``meta["integrity"]`` (which --strict
    refuses and JSON lists per rank)."""
    trace.warnings.append(problem.line)
    trace.meta["integrity"] = [*trace.meta.get("integrity", []), asdict(problem)]


def _before_launch(events: pd.DataFrame) -> np.ndarray:
    launch = events["launch_ns"]
    known = launch.notna().to_numpy()
    early = np.zeros(len(events), bool)
    early[known] = events["start_ns"].to_numpy("int64")[known] < launch[known].to_numpy("int64")
    return early


def problem_of(events: pd.DataFrame, mask: np.ndarray, problem: str, handling: str) -> Problem:
    """``problem`` for the activities of ``mask``, with their count and device time."""
    dur = (events["end_ns"].to_numpy("int64") - events["start_ns"].to_numpy("int64"))[mask]
    device_us = float(dur[(dur >= 0) & (dur <= DAY_NS)].sum()) / 1e3  # an impossible length counts as none
    return Problem(problem, int(mask.sum()), device_us, handling)
