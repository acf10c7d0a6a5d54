"""Progress events from workers and executors, typed, and the sentence each one prints as.

Each kind of event is a msgspec Struct tagged by its ``event`` field, so the JSON line a worker
process writes on stdout (``{"event": "round", "case": …}``) decodes into the class it was made
from, and the display dispatches on the type rather than on a string.
"""

from __future__ import annotations

from typing import Any

import msgspec

RESTARTED = "started again"  # the outcome of a worker's first death at one step and leg
CASE_FAILED_STEP = "failed"  # a worker's last step when it decided its case cannot be timed: not retried

PHASES = {
    "tree_setup": "building its tree (--setup)",
    "setup": "setting up buffers",
    "baseline": "correctness gate: baseline",
    "check": "correctness gate",
    "capture": "capturing",
    "warmup": "warming up",
    "spins": "sizing the planted spins",
    "profile": "profiling the rounds",
}
STAGES = {"gate": "correctness gate (every leg on every buffer set)", "capture": "capturing every leg"}


class _Event(msgspec.Struct, frozen=True, tag_field="event", omit_defaults=True):
    def sentence(self) -> str | None:
        """What to tell the user (None: progress only, nothing to print)."""
        return None


def _where(case: str, leg: str) -> str:
    return f"{case} · {leg}" if case and leg else (leg or case)


class Phase(_Event, frozen=True, tag="phase"):
    """A worker (or a tree's --setup) entered a step of the protocol."""

    case: str
    step: str
    leg: str | None = None
    process: str | None = None  # "2/3": which of the case's processes

    @property
    def stage(self) -> str:
        """The step without its detail: the gate's baseline and its legs are one stage."""
        return "gate" if self.step in ("baseline", "check") else self.step

    def stage_text(self) -> str:
        """The stage in words, said once however many legs and buffer sets it goes through."""
        return f"{self.place}: {STAGES.get(self.stage, PHASES.get(self.step, self.step))}"

    @property
    def place(self) -> str:
        """The case, and which of its processes."""
        return self.case + (f" (process {self.process})" if self.process else "")

    def text(self) -> str:
        """The phase in words (``case: correctness gate · leg``)."""
        what = PHASES.get(self.step, self.step)
        return f"{self.place}: {what}" + (f" · {self.leg}" if self.leg and self.step in ("check", "capture") else "")


class RoundDone(_Event, frozen=True, tag="round"):
    case: str
    round: int
    rounds: int  # the case's last round
    burn_in: bool = False  # a process's first round: timed, stored, left out of every statistic

    def text(self) -> str:
        """``case: round 3/18``, counted as the progress bar counts (burn-in rounds included and said)."""
        return f"{self.case}: round {self.round + 1}/{self.rounds + 1}" + (" (burn-in)" if self.burn_in else "")


class Note(_Event, frozen=True, tag="note"):
    text: str

    def sentence(self) -> str:
        return f"note: {self.text}"


class LegFailed(_Event, frozen=True, tag="leg_failed"):
    """A leg left out of the case (its gate, a launch that raises, a program leg that failed)."""

    leg: str
    reason: str
    case: str = ""
    round: int | None = None

    def sentence(self) -> str:
        at = f" in round {self.round}" if self.round is not None else ""
        return f"{_where(self.case, self.leg)} not timed{at}: {self.reason}"  # as the report says it


class RevisionRefused(_Event, frozen=True, tag="revision_refused"):
    leg: str  # the legs of the revision, joined
    reason: str

    def sentence(self) -> str:
        return f"{self.leg}: cannot be run, left out of every round: {self.reason}"


class WorkerDied(_Event, frozen=True, tag="worker_died"):
    """A worker died once and was started again."""

    case: str
    step: str
    reason: str
    leg: str = ""

    def sentence(self) -> str:
        return death_sentence(self.case, self.step, self.leg, self.reason)


class LegCrashed(_Event, frozen=True, tag="leg_crashed"):
    case: str
    leg: str
    reason: str

    def sentence(self) -> str:
        return f"{_where(self.case, self.leg)}: its worker died twice ({self.reason}); the case goes on without it"


class CaseFailed(_Event, frozen=True, tag="case_failed"):
    case: str
    reason: str

    def sentence(self) -> str:
        return f"{self.case}: the case failed: {self.reason}"


class Race(_Event, frozen=True, tag="race"):
    case: str
    leg: str
    round: int
    detail: str

    def sentence(self) -> str:
        return f"{_where(self.case, self.leg)}: outputs changed in round {self.round} (a race?): {self.detail}"


class NoOp(_Event, frozen=True, tag="no_op"):
    case: str
    leg: str

    def sentence(self) -> str:
        return (
            f"{_where(self.case, self.leg)}: launches exactly what the baseline launches (same kernels, grids "
            "and arguments): its features change nothing at this case — a lever that does not apply here, "
            "or a silent no-op"
        )


class Started(_Event, frozen=True, tag="started"):
    """The run holds its folder and starts its first case (the display says what the run will do)."""


Event = (
    Started
    | Phase
    | RoundDone
    | Note
    | LegFailed
    | RevisionRefused
    | WorkerDied
    | LegCrashed
    | CaseFailed
    | Race
    | NoOp
)

_decoder = msgspec.json.Decoder(Event)


def encode(event: Event) -> str:
    """One JSON line, as a worker writes it on stdout."""
    return msgspec.json.encode(event).decode()


def decode(line: str | bytes) -> Event | None:
    """The event a worker's line holds; None for a line that is not one (a workload's own print)."""
    try:
        return _decoder.decode(line)
    except msgspec.DecodeError:
        return None


def death_sentence(case: str, step: str, leg: str, reason: Any) -> str:
    """A worker that died once and was started again (an event, or a death a case's status keeps)."""
    at = PHASES.get(step, step) + (f" · {leg}" if leg else "")
    return f"{case}: its worker died at {at} ({reason}) and was started again"
