"""`kprof run`: create (or resume) a run folder and run every case in its own worker process."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kprof import __version__
from kprof.errors import KprofInputError
from kprof.legs import calibration_legs, design_legs
from kprof.run_store import RunStore
from kprof.workload import Case, Workload, load_workload

MAX_RESTARTS = 4


def default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def check_device(device: str) -> None:
    """``cpu`` or ``cuda``/``cuda:N`` that this machine has (ROCm builds of torch answer to cuda too)."""
    if device == "cpu":
        return
    if not re.fullmatch(r"cuda(:\d+)?", device):
        raise KprofInputError("--device", f"expected cpu, cuda or cuda:N, got {device!r}")
    import torch

    if not torch.cuda.is_available():
        raise KprofInputError("--device", "no GPU is visible here (use --device cpu for the interpreter)")
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= torch.cuda.device_count():
        raise KprofInputError("--device", f"{device} does not exist ({torch.cuda.device_count()} GPU(s) here)")


def _git(cwd: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


KPROF_DIR = Path(__file__).resolve().parent


def git_state(cwd: Path = KPROF_DIR) -> dict[str, Any]:
    """The commit kprof runs from and whether tracked files differ from it: numbers measured with
    uncommitted changes must say so. None for both outside a git checkout."""
    revision = _git(cwd, "rev-parse", "HEAD")
    changed = _git(cwd, "status", "--porcelain", "--untracked-files=no") if revision else None
    return {"git_revision": revision, "git_dirty": None if changed is None else bool(changed)}


def _versions() -> dict[str, Any]:
    versions: dict[str, Any] = {"kprof": __version__, "python": platform.python_version()}
    for name in ("torch", "triton", "numpy"):
        try:
            versions[name] = __import__(name).__version__
        except ImportError:
            versions[name] = None
    return versions


def parse_sweep(text: str | None, workload: Workload) -> tuple[str, list[Any]] | None:
    if not text:
        return None
    if "=" not in text:
        raise KprofInputError("--sweep", "expected PARAM=v1,v2,… (e.g. num_splits=1,2,4,8)")
    name, values = text.split("=", 1)
    sweep = workload.sweep(name.strip())
    parsed = []
    for v in values.split(","):
        v = v.strip()
        try:
            parsed.append(int(v))
        except ValueError:
            try:
                parsed.append(float(v))
            except ValueError:
                raise KprofInputError("--sweep", f"{v!r} is not a number") from None
    if len(parsed) < 2:
        raise KprofInputError("--sweep", "needs at least two values")
    return sweep.name, parsed


def _sweep_columns(
    workload: Workload, sweep: tuple[str, list[Any]] | None, cases: list[Case]
) -> dict[str, dict[str, dict[str, Any]]]:
    """What each forced value means per case (the workload's Sweep.columns), keyed by str(value)."""
    if sweep is None:
        return {}
    spec = workload.sweep(sweep[0])
    return {c.name: {str(v): spec.columns(c, v) for v in sweep[1]} for c in cases}


@dataclass
class RunRequest:
    """Everything `kprof run` / `kprof calibrate` was asked for."""

    workload: str
    preset: str | None = None
    case_filter: str | None = None
    design: str = "all"
    target: list[str] | None = None
    sweep: str | None = None
    rounds: int = 16
    samples: int | None = None
    buffer_sets: int = 4
    buffers: str = "shared"
    seed: int = 0
    device: str | None = None
    dtype: str | None = None
    threshold_pct: float = 0.5
    plants: list[float] = field(default_factory=list)
    aa_copies: int = 1
    argv: list[str] = field(default_factory=list)
    collector: str = "events"
    torch_leg: bool = True
    sweep_baseline: bool = False


def create_run(out: Path, req: RunRequest) -> RunStore:
    workload = load_workload(req.workload)
    device = req.device or default_device()
    check_device(device)
    preset = req.preset or ("smoke" if device == "cpu" else "pr")
    cases = [c for c in workload.cases(preset) if not req.case_filter or req.case_filter in c.name]
    if not cases:
        raise KprofInputError("--case", f"no case of preset {preset!r} matches {req.case_filter!r}")
    min_rounds = 5 if req.buffers == "per-leg" else 6
    if req.rounds < min_rounds:
        raise KprofInputError("--rounds", f"at least {min_rounds} rounds are needed (16 is the default)")
    if req.collector not in ("events", "torch"):
        raise KprofInputError(
            "--collector",
            "a workload runs under events (default) or torch; rocprofv3 wraps "
            "whole programs (kprof run --leg … --collector rocprofv3 -- CMD)",
        )
    if req.buffers not in ("shared", "per-leg"):
        raise KprofInputError("--buffers", "must be shared (kprof's protocol) or per-leg (the PR method)")
    sweep_spec = parse_sweep(req.sweep, workload)
    if req.sweep_baseline and sweep_spec is None:
        raise KprofInputError("--sweep-baseline", "needs --sweep PARAM=v1,v2,…")
    if sweep_spec is not None:
        for case in cases:
            bad = [v for v in sweep_spec[1] if not workload.sweep(sweep_spec[0]).valid(case, v)]
            if bad:
                raise KprofInputError("--sweep", f"values {bad} are not valid for case {case.name}")
    for name in req.target or ():
        workload.feature(name)
    if req.plants:
        target = req.target if req.target is not None else workload.feature_names
        legs = calibration_legs(target, req.plants, max(req.aa_copies, 1))
        design = "calibration"
    else:
        has_torch = type(workload).launch_torch is not Workload.launch_torch
        legs = design_legs(
            workload.feature_names,
            req.design,
            req.target,
            sweep_spec,
            req.aa_copies,
            torch_leg=req.torch_leg and has_torch,
            sweep_baseline=req.sweep_baseline,
        )
        design = req.design
    meta = {
        "command": "kprof " + " ".join(req.argv),
        "workload": req.workload,
        "workload_name": workload.name,
        "preset": preset,
        "cases": [c.name for c in cases],
        "case_params": {c.name: dict(c.params) for c in cases},
        "features": [asdict(f) for f in workload.features],
        "design": design,
        "sweep": list(sweep_spec) if sweep_spec else None,
        "sweep_columns": _sweep_columns(workload, sweep_spec, cases),
        "legs": [leg.record() for leg in legs],
        "rounds": req.rounds,
        "samples": req.samples,
        "buffer_sets": req.buffer_sets,
        "buffers": req.buffers,
        "seed": req.seed,
        "device": device,
        "dtype": req.dtype or ("float16" if device == "cpu" else "bfloat16"),
        "threshold_pct": req.threshold_pct,
        "collector": req.collector,
        "bytes_per_call": {c.name: workload.bytes_per_call(c) for c in cases},
        "flops_per_call": {c.name: workload.flops_per_call(c) for c in cases},
        "versions": _versions(),
        **git_state(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "case_status": {},
    }
    store = RunStore(out)
    store.create(meta)
    return store


def _worker_env(device: str) -> dict[str, str]:
    env = dict(os.environ)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


def execute(store: RunStore, on_event: Callable[[dict[str, Any]], None]) -> None:
    """Run every unfinished case; a worker that dies loses only the leg it was running."""
    meta = store.read_meta()
    if meta.get("mode") == "program":
        from kprof.commands.program import execute_program

        execute_program(store, on_event)
        return
    env = _worker_env(meta["device"])
    for index, case in enumerate(meta["cases"]):
        status = meta.get("case_status", {}).get(case, {})
        if status.get("status") in ("done", "failed"):
            continue
        skip: list[str] = sorted(status.get("crashed_legs", []))
        for _ in range(MAX_RESTARTS + 1):
            cmd = [sys.executable, "-m", "kprof.runner", str(store.root), str(index), json.dumps(skip)]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            assert proc.stdout is not None
            for line in proc.stdout:
                try:
                    on_event(json.loads(line))
                except json.JSONDecodeError:
                    continue
            stderr = proc.stderr.read() if proc.stderr else ""
            if proc.wait() == 0:
                break
            progress_file = store.root / f".progress-c{index:03d}.json"
            where = json.loads(progress_file.read_text()) if progress_file.exists() else {}
            reason = (stderr.strip().splitlines() or ["worker exited"])[-1]
            leg = where.get("leg")
            if where.get("step") in ("check", "capture") and leg and leg not in ("baseline",):
                skip.append(leg)
                store.update_case(case, crashed_legs=skip, **{f"crash:{leg}": reason})
                on_event({"event": "leg_crashed", "case": case, "leg": leg, "reason": reason})
                continue
            store.update_case(case, status="failed", reason=f"{where.get('step', 'start')}: {reason}")
            on_event({"event": "case_failed", "case": case, "reason": reason})
            break
