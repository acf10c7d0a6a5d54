"""The correctness gate, before any timing: every leg on every buffer set it will be timed on,
outputs poisoned first, compared with the baseline's (under the features' exactness rule) and, on
the first set, with the float64 reference. A leg that fails, or whose call raises, is not timed.

The first buffer set also records what each leg launches (kprof.launches) and, on a GPU, the
compile metadata of its Triton kernels; a leg whose features change nothing in its launches is
flagged as a possible silent no-op. After each timed round the race check replays every leg once
more on that round's buffers and compares again: a mismatch there is a race.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pandas as pd

from kprof.compile_info import compile_metadata
from kprof.correctness import CheckResult, compare, poison
from kprof.engine.case import Item
from kprof.engine.context import CaseContext, emit
from kprof.events import LegFailed, NoOp, Race
from kprof.launches import Launch, launch_rows, recording
from kprof.run_model import SPIN_PARAM, Leg, Role


@dataclass
class GateResult:
    fns: dict[tuple[int, int], Callable[[], None]] = field(default_factory=dict)  # (leg, buffer set) → call
    failed: dict[str, str] = field(default_factory=dict)  # leg → reason
    baseline_outputs: dict[int, dict[str, Any]] = field(default_factory=dict)  # buffer set → outputs
    launches: dict[str, list[Launch]] = field(default_factory=dict)  # leg → its launches (first set)
    no_ops: list[str] = field(default_factory=list)


def check_row(case: str, leg: str, round_index: int, k: int, res: CheckResult) -> dict[str, Any]:
    """One row of the checks table (kprof.store.run_tables)."""
    return dict(
        case=case,
        leg=leg,
        round=round_index,
        buffer_set=k,
        rule=res.rule,
        passed=res.passed,
        vs_baseline=res.vs_baseline,
        vs_reference=res.vs_reference,
        detail=res.detail or "",
    )


def sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def launch_failure(error: Exception) -> str:
    """Why a leg's call could not be made, in one line (a sweep value that does not compile, a
    revision that raises). A compiler's error starts with where (Triton: "at 147:38:", then the
    source): the error that caused it, or else its last line, says what."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    cause = error.__cause__
    what = f"{type(cause).__name__}: {(str(cause).splitlines() or [''])[0]}" if cause is not None else ""
    what = what or (lines[-1] if len(lines) > 1 else "")
    return f"launch: {type(error).__name__}: {text} {what}".rstrip()


def checked_call(
    ctx: CaseContext, leg: Leg, state: Any, call: Callable[[Callable[[], None]], Any] | None = None
) -> tuple[Callable[[], None], Any]:
    """The gate's call of one leg, in every transport: the leg's call on ``state``, made once on
    poisoned outputs from the state's initial contents (by ``call`` where given: recording its
    launches) and finished on the device. Returns the call and what ``call`` returned; what the
    leg's code raises goes up."""
    fn = ctx.launch(leg, state)
    poison(ctx.workload.outputs(state))
    ctx.workload.reset(state)
    made = call(fn) if call is not None else fn()
    sync(ctx.device)
    return fn, made


def recorded(fn: Callable[[], None]) -> list[Launch]:
    """``fn`` called once, and what it launched."""
    with recording() as launches:
        fn()
    return list(launches)


def _first_call(ctx: CaseContext, leg: Leg, compile_rows: list[dict[str, Any]], fn: Callable[[], None]) -> list[Launch]:
    """Run ``fn`` once, recording its launches and (on a GPU) the compile metadata of its kernels."""
    with recording() as launches:
        if ctx.device != "cpu":  # the interpreter compiles nothing
            prefixes = (type(ctx.workload).__module__.rsplit(".", 1)[0],)
            rows = compile_metadata(fn, prefixes)
            compile_rows += [dict(r, case=ctx.case.name, leg=leg.name) for r in rows]
        else:
            fn()
    return list(launches)


def silent_no_ops(legs: list[Leg], launches: dict[str, list[Launch]]) -> list[str]:
    """Legs whose features differ from the baseline's but whose launches are identical to it
    (a lever that changes nothing: a mistyped feature name in ``launch`` looks exactly like this)."""
    base = next((leg for leg in legs if leg.has(Role.BASELINE)), None)
    if base is None or base.name not in launches:
        return []
    ref = launches[base.name]
    return [
        leg.name
        for leg in legs
        if leg.features != base.features
        and not leg.workload_params
        and leg.plant is None
        and leg.name in launches
        and launches[leg.name] == ref
        and ref  # a workload without Triton launches (plain PyTorch) tells nothing
    ]


def run_gate(ctx: CaseContext) -> GateResult:
    out = GateResult()
    checks: list[dict[str, Any]] = []
    compile_rows: list[dict[str, Any]] = []
    w = ctx.workload
    first = min(ctx.states)
    for k, state in ctx.states.items():
        ctx.at("baseline", "baseline")
        poison(w.outputs(state))
        w.reset(state)  # after poisoning: in-place state pools start from their initial contents
        w.launch(state, frozenset(), {})()
        sync(ctx.device)
        out.baseline_outputs[k] = {name: t.clone() for name, t in w.outputs(state).items()}
        reference = w.reference(state) if k == first else None
        for li, leg in enumerate(ctx.legs):
            if leg.name in out.failed or not ctx.uses_set(li, k):
                continue
            plant = leg.plant
            if plant is not None and plant[0] == SPIN_PARAM:
                continue  # the spin alone writes no output: nothing to check
            ctx.at("check", leg.name)
            record = k == first and plant is None
            try:
                fn, seen = checked_call(
                    ctx, leg, state, partial(_first_call, ctx, leg, compile_rows) if record else None
                )
            except Exception as e:  # a sweep value that does not compile (shared memory, registers)
                out.failed[leg.name] = launch_failure(e)
                emit(LegFailed(case=ctx.case.name, leg=leg.name, reason=out.failed[leg.name]))
                continue
            if record:
                out.launches[leg.name] = seen
            res = compare(w.outputs(state), out.baseline_outputs[k], reference, ctx.rule(leg), w.reference_rtol)
            checks.append(check_row(ctx.case.name, leg.name, -1, k, res))
            if not res.passed:
                out.failed[leg.name] = f"correctness: {res.detail}"
                emit(LegFailed(case=ctx.case.name, leg=leg.name, reason=out.failed[leg.name]))
                continue
            out.fns[(li, k)] = fn
    out.no_ops = silent_no_ops(ctx.legs, out.launches)
    for name in out.no_ops if ctx.part_index == 0 else ():  # said once per case
        emit(NoOp(case=ctx.case.name, leg=name))
    ctx.folder.write_part("checks", ctx.case_index, None, pd.DataFrame(checks), part=ctx.part_index)
    if ctx.part_index > 0:  # the first process recorded the compiled kernels and their launches
        return out
    if compile_rows:
        ctx.folder.write_part("compile", ctx.case_index, None, pd.DataFrame(compile_rows))
    rows = launch_rows(ctx.case.name, {leg: [x.record() for x in xs] for leg, xs in out.launches.items()})
    if rows:
        ctx.folder.write_part("launches", ctx.case_index, None, pd.DataFrame(rows))
    return out


def replayed_outputs(ctx: CaseContext, item: Item) -> dict[str, Any]:
    """The race check's replay, in every transport: the item's prepared call (a graph on a GPU)
    replayed once on its buffer set, outputs poisoned first, from the state's initial contents."""
    timer, state = ctx.timer, ctx.states[item[1]]
    assert timer is not None
    poison(ctx.workload.outputs(state))
    ctx.workload.reset(state)
    timer.replay(item)
    sync(ctx.device)
    return ctx.workload.outputs(state)


def race_check(ctx: CaseContext, gate: GateResult, items: list[Item], r: int) -> list[dict[str, Any]]:
    """Each timed leg of round r against the baseline's gate outputs on that set, under its rule."""
    rows = []
    for li, k in items:
        leg = ctx.legs[li]
        if leg.plant is not None and leg.plant[0] == SPIN_PARAM:
            continue
        res = compare(replayed_outputs(ctx, (li, k)), gate.baseline_outputs[k], None, ctx.rule(leg), math.inf)
        rows.append(check_row(ctx.case.name, leg.name, r, k, res))
        if not res.passed:
            emit(Race(case=ctx.case.name, leg=leg.name, round=r, detail=res.detail or ""))
    return rows
