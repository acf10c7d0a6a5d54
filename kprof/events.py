"""Progress events from workers and executors, and the sentence each one prints as."""

from __future__ import annotations

from typing import Any

Event = dict[str, Any]
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


def phase(event: Event) -> str:
    """A worker's phase in words (``case: correctness gate · leg``)."""
    what = PHASES.get(event.get("step", ""), event.get("step", ""))
    leg, process = event.get("leg"), event.get("process")
    where = f"{event.get('case')}" + (f" (process {process})" if process else "")
    return f"{where}: {what}" + (f" · {leg}" if leg and event.get("step") in ("check", "capture") else "")


def death_sentence(death: Event) -> str:
    """A worker that died once and was started again (an event, or a death a case's status keeps)."""
    step, leg = str(death.get("step", "")), death.get("leg")
    at = PHASES.get(step, step) + (f" · {leg}" if leg else "")
    return f"{death.get('case')}: its worker died at {at} ({death.get('reason')}) and was started again"


def sentence(event: Event) -> str | None:
    """What to tell the user about an event (None: progress only, nothing to print)."""
    kind = event.get("event")
    case, leg = event.get("case"), event.get("leg")
    where = f"{case} · {leg}" if case and leg else (leg or case or "")
    if kind == "leg_failed":
        at = f" in round {event['round']}" if "round" in event else ""
        return f"{where}: not timed{at}: {event.get('reason')}"
    if kind == "note":
        return f"note: {event.get('text')}"
    if kind == "revision_refused":
        return f"{where}: cannot be run, left out of every round: {event.get('reason')}"
    if kind == "worker_died":
        return death_sentence(event)
    if kind == "leg_crashed":
        return f"{where}: its worker died twice ({event.get('reason')}); the case goes on without it"
    if kind == "case_failed":
        return f"{case}: the case failed: {event.get('reason')}"
    if kind == "race":
        return f"{where}: outputs changed in round {event.get('round')} (a race?): {event.get('detail')}"
    if kind == "no_op":
        return (
            f"{where}: launches exactly what the baseline launches (same kernels, grids and arguments): "
            "its features change nothing at this case — a lever that does not apply here, or a silent no-op"
        )
    return None
