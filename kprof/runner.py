"""Runs one case of a run folder in this process: setup, correctness gate, warm-up, timed rounds.

Started by `kprof run` as a worker process per case (``python -m kprof.runner RUN_DIR CASE``), so
a leg that kills the GPU context takes down only this process: the parent records the failure
and restarts the case without that leg. Progress goes to stdout as JSON lines; every finished
round is on disk before the next starts.
"""

from __future__ import annotations

import json
import math
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from kprof.correctness import Rule, compare, poison, rule_for
from kprof.legs import IMPL, Leg
from kprof.planting import PLANT, SPIN, spin, split_params
from kprof.run_store import RunStore
from kprof.schedule import round_orders
from kprof.workload import load_workload

CLOCK_SAG = 0.9  # redo a round whose SM clock is below this fraction of the run's median
MAX_ATTEMPTS = 3
WARMUP_SECONDS = 0.2


def emit(**event: Any) -> None:
    print(json.dumps(event), flush=True)


def legs_from_meta(meta: dict[str, Any]) -> list[Leg]:
    return [
        Leg(
            d["name"],
            frozenset(d["features"]),
            tuple((k, v) for k, v in d["params"]),
            frozenset(d["roles"]),
            d["replica"],
        )
        for d in meta["legs"]
    ]


def samples_per_round(t_est_ns: float, device: str, requested: int | None) -> int:
    """m = clamp(ceil(2 ms / t), 10, 100) on a GPU (measurement.md §4.2); 3 on the interpreter."""
    if requested:
        return requested
    if device == "cpu":
        return 3
    return int(min(100, max(10, math.ceil(2e6 / max(t_est_ns, 1.0)))))


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _make_timer(device: str) -> Any:
    if device == "cpu":
        from kprof.timer.host import HostTimer

        return HostTimer()
    from kprof.timer.cuda import CudaEventTimer

    return CudaEventTimer(device)


def _clone(outputs: dict[str, Any]) -> dict[str, Any]:
    return {k: v.clone() for k, v in outputs.items()}


def run_case(root: Path, case_index: int, skip: set[str]) -> None:
    store = RunStore(root)
    meta = store.read_meta()
    workload = load_workload(meta["workload"])
    case = next(c for c in workload.cases(meta["preset"]) if c.name == meta["cases"][case_index])
    device, dtype, seed = meta["device"], meta["dtype"], int(meta["seed"])
    legs = [leg for leg in legs_from_meta(meta) if leg.name not in skip]
    per_leg_buffers = meta.get("buffers", "shared") == "per-leg"
    progress = root / f".progress-c{case_index:03d}.json"

    def at(step: str, leg: str | None = None) -> None:
        progress.write_text(json.dumps({"step": step, "leg": leg}))

    def buffer_set(li: int, r: int) -> int:
        """Shared protocol: every leg of round r uses set r mod K. Per-leg (the PR method): leg i owns set i."""
        return li if per_leg_buffers else r % n_sets

    at("setup")
    n_sets = len(legs) if per_leg_buffers else int(meta["buffer_sets"])
    states = [workload.setup(case, device, dtype, seed * 1000 + k) for k in range(n_sets)]
    timer = _make_timer(device)
    store.update(timer=timer.label, timer_info=timer.describe())
    checks: list[dict[str, Any]] = []
    compile_rows: list[dict[str, Any]] = []
    baseline_outputs = []
    fns: dict[tuple[int, int], Any] = {}
    failed: dict[str, str] = {}
    features = {f.name: f for f in workload.features}
    module_prefixes = (type(workload).__module__.rsplit(".", 1)[0],)
    plants = {li: split_params(dict(leg.params)) for li, leg in enumerate(legs)}

    from kprof.compile_info import compile_metadata

    def launch(leg: Leg, state: Any, params: dict[str, Any]) -> Any:
        """The leg's callable: the workload's plain-PyTorch implementation for the torch leg."""
        if params.get(IMPL) == "torch":
            return workload.launch_torch(state)
        return workload.launch(state, leg.features, params)

    def leg_rule(leg: Leg) -> Rule:
        """The features' rule; a forced parameter (a sweep: split count, tile size) may reorder any
        reduction, so those legs are held to the workload's float64 tolerance against the baseline."""
        forced = split_params(dict(leg.params))[0]
        if forced:
            return Rule("tolerance", rtol=workload.reference_rtol)
        return rule_for(features[f] for f in leg.features)

    def check_row(leg: Leg, r: int, k: int, res: Any) -> dict[str, Any]:
        return dict(
            case=case.name,
            leg=leg.name,
            round=r,
            buffer_set=k,
            rule=res.rule,
            passed=res.passed,
            vs_baseline=res.vs_baseline,
            vs_reference=res.vs_reference,
            detail=res.detail or "",
        )

    for k, state in enumerate(states):
        at("baseline", "baseline")
        poison(workload.outputs(state))
        workload.reset(state)  # after poisoning: in-place state pools start from their initial contents
        workload.launch(state, frozenset(), {})()
        _sync(device)
        baseline_outputs.append(_clone(workload.outputs(state)))
        reference = workload.reference(state) if k == 0 else None
        for li, leg in enumerate(legs):
            params, plant = plants[li]
            if leg.name in failed or (per_leg_buffers and k != li):
                continue
            if plant is not None and plant[0] == SPIN:
                continue  # the spin alone writes no output: nothing to check
            at("check", leg.name)
            fn = launch(leg, state, params)
            poison(workload.outputs(state))
            workload.reset(state)
            try:
                if k == 0 and device != "cpu" and plant is None:  # the interpreter compiles nothing
                    rows = compile_metadata(fn, module_prefixes)
                    compile_rows += [dict(r, case=case.name, leg=leg.name) for r in rows]
                else:
                    fn()
                _sync(device)
            except Exception as e:  # a sweep value that does not compile (shared memory, registers)
                failed[leg.name] = f"launch: {type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
                emit(event="leg_failed", case=case.name, leg=leg.name, reason=failed[leg.name])
                continue
            res = compare(
                workload.outputs(state),
                baseline_outputs[k],
                reference,
                leg_rule(leg),
                workload.reference_rtol,
            )
            checks.append(check_row(leg, -1, k, res))
            if not res.passed:
                failed[leg.name] = f"correctness: {res.detail}"
                emit(event="leg_failed", case=case.name, leg=leg.name, reason=failed[leg.name])
                continue
            fns[(li, k)] = fn
    store.write_part("checks", case_index, None, pd.DataFrame(checks))
    if compile_rows:
        store.write_part("compile", case_index, None, pd.DataFrame(compile_rows))

    timed = [li for li, leg in enumerate(legs) if leg.name not in failed]
    plain = [li for li in timed if plants[li][1] is None]
    for (li, k), fn in fns.items():
        if li in plain:
            at("capture", legs[li].name)
            timer.prepare((li, k), fn)

    # Warm-up: interleaved replays of every leg, to leave idle clocks behind (not recorded). The
    # baseline's bare work is timed too: planted spins are sized from it.
    at("warmup")
    base_li = next(li for li in timed if "baseline" in legs[li].roles)
    base_item = (base_li, buffer_set(base_li, 0))
    if base_li not in plain:
        timer.prepare(("estimate", 0), fns[base_item])
    estimate_item = base_item if base_li in plain else ("estimate", 0)
    t_end = time.perf_counter() + (WARMUP_SECONDS if device != "cpu" else 0.0)
    first = [(li, buffer_set(li, 0)) for li in plain] + ([] if base_li in plain else [estimate_item])
    est = timer.time_round(first, 1)
    while time.perf_counter() < t_end:
        est = timer.time_round(first, 1)
    t_base = est[estimate_item][0]

    # Planted legs: the leg's work plus a spin sized from the baseline's warm-up time; spins alone.
    for li in timed:
        params, plant = plants[li]
        if plant is None:
            continue
        delay = spin(device, plant[1] / 100.0 * t_base)
        for k in range(n_sets):
            if per_leg_buffers and k != li:
                continue
            if plant[0] == PLANT:
                work = fns[(li, k)]

                def planted(work: Any = work, delay: Any = delay) -> None:
                    work()
                    delay()

                timer.prepare((li, k), planted)
            else:
                timer.prepare((li, k), delay)
    t_est = sorted(v[0] for v in est.values())[len(est) // 2] if est else 1.0
    samples = samples_per_round(t_est, device, meta.get("samples"))
    store.update_case(
        case.name, samples=samples, failed=failed, legs_timed=[legs[li].name for li in timed], baseline_warmup_ns=t_base
    )

    rounds = int(meta["rounds"])
    orders = round_orders(len(timed), rounds + 1, seed + case_index)
    done = set(store.finished_rounds(case_index))
    clocks: list[float] = []
    for r in range(rounds + 1):
        if r in done:
            continue
        items = [(timed[i], buffer_set(timed[i], r)) for i in orders[r]]
        at("round", str(r))
        for attempt in range(MAX_ATTEMPTS):  # noqa: B007 - recorded with the round below
            times = timer.time_round(items, samples)
            cond = timer.round_conditions()
            sm = cond.get("sm_clock_mhz")
            if sm is None or not clocks or sm >= CLOCK_SAG * sorted(clocks)[len(clocks) // 2]:
                break
        if cond.get("sm_clock_mhz") is not None:
            clocks.append(cond["sm_clock_mhz"])
        rows = []
        for slot, item in enumerate(items):
            for i, t in enumerate(times[item]):
                rows.append(
                    dict(
                        case=case.name,
                        leg=legs[item[0]].name,
                        round=r,
                        sample=i,
                        buffer_set=item[1],
                        slot=slot,
                        time_ns=float(t),
                        timer=timer.label,
                        burn_in=r == 0,
                    )
                )
        # Race check: every leg again on this round's buffers, poisoned first, against the baseline.
        round_checks = []
        for li, kk in items:
            if plants[li][1] is not None and plants[li][1][0] == SPIN:
                continue
            leg = legs[li]
            poison(workload.outputs(states[kk]))
            workload.reset(states[kk])
            timer.replay((li, kk))
            _sync(device)
            res = compare(
                workload.outputs(states[kk]),
                baseline_outputs[kk],
                None,
                leg_rule(leg),
                math.inf,
            )
            round_checks.append(check_row(leg, r, kk, res))
            if not res.passed:
                emit(event="race", case=case.name, leg=leg.name, round=r, detail=res.detail)
        store.write_part("samples", case_index, r, pd.DataFrame(rows))
        store.write_part(
            "rounds", case_index, r, pd.DataFrame([dict(case=case.name, round=r, attempt=attempt, **cond)])
        )
        store.write_part("checks", case_index, r, pd.DataFrame(round_checks))
        emit(event="round", case=case.name, round=r, rounds=rounds)
    if meta.get("collector") == "torch" and device != "cpu":
        at("profile")
        _profile_rounds(store, case_index, case.name, legs, timed, orders, rounds, buffer_set, timer)
    store.update_case(case.name, status="done")
    progress.unlink(missing_ok=True)


def _profile_rounds(
    store: RunStore,
    case_index: int,
    case: str,
    legs: list[Leg],
    timed: list[int],
    orders: list[list[int]],
    rounds: int,
    buffer_set: Any,
    timer: Any,
) -> None:
    """The torch collector: every timed round once more under the profiler, each leg in its own range."""
    from kprof.collectors.torch_profile import kernel_times, profile_rounds

    plan = [
        [(legs[timed[i]].name, r, partial(timer.replay, (timed[i], buffer_set(timed[i], r)))) for i in orders[r]]
        for r in range(1, rounds + 1)
    ]
    path = profile_rounds(store.root / "traces" / f"c{case_index:03d}.pt.trace.json.gz", plan, timer.flush.zero_)
    store.write_part("kernels", case_index, None, kernel_times(path, case))


def main() -> None:
    root, case_index = Path(sys.argv[1]), int(sys.argv[2])
    skip = set(json.loads(sys.argv[3])) if len(sys.argv) > 3 else set()
    run_case(root, case_index, skip)


if __name__ == "__main__":
    main()
