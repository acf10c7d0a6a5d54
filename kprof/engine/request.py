"""From what the user asked (`kprof run` / `calibrate` / `attribute WORKLOAD`) to a new run folder.

Every argument is checked here, before any worker starts, and the run is described once as a
typed :class:`~kprof.run_model.Run` in the folder's meta.json.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kprof.designs.legs import calibration_legs, design_legs
from kprof.engine.environment import check_device, default_device, git_state, versions
from kprof.engine.gpus import parse_gpus
from kprof.engine.options import RunRequest, check_options
from kprof.engine.ray_cases import ray_module
from kprof.errors import KprofInputError
from kprof.events import Event, Note
from kprof.run_model import CaseRecord, FeatureRecord, Leg, Placement, Protocol, RevisionSet, Run, WorkloadSubject
from kprof.store.run_folder import RunFolder
from kprof.workload import Case, Workload, load_workload


def default_folder(name: str) -> Path:
    """``runs/NAME-YYYYmmdd-HHMMSS`` in the current directory."""
    return Path("runs") / f"{Path(name).stem or 'run'}-{time.strftime('%Y%m%d-%H%M%S')}"


def parse_sweep(text: str | None, workload: Workload) -> tuple[str, list[Any]] | None:
    if not text:
        return None
    if "=" not in text:
        raise KprofInputError("--sweep", "expected PARAM=v1,v2,… (e.g. num_splits=1,2,4,8)")
    name, values = text.split("=", 1)
    sweep = workload.sweep(name.strip())
    parsed: list[Any] = []
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


def _case_record(workload: Workload, case: Case, sweep: tuple[str, list[Any]] | None) -> CaseRecord:
    columns = {}
    if sweep is not None:
        spec = workload.sweep(sweep[0])
        columns = {str(v): spec.columns(case, v) for v in sweep[1]}
    return CaseRecord(
        name=case.name,
        params=dict(case.params),
        bytes_per_call=workload.bytes_per_call(case),
        flops_per_call=workload.flops_per_call(case),
        sweep_columns=columns,
    )


def _revision_workload(
    req: RunRequest, on_event: Callable[[Event], None]
) -> tuple[Workload, list[Leg], list[FeatureRecord], RevisionSet, str]:
    """The workload (a bundled family by name, from the running kprof; a user's file, from where the
    user keeps it, read with the baseline revision's code first on the import path), the legs, the
    commits as levers, and the revisions (repository, commits, trees)."""
    from kprof.revisions.benchmark import import_path, imports_from, in_tree_path, locate, without_tree
    from kprof.revisions.plan import find_repo, note_benchmark, revision_legs

    repo = find_repo(req.repo, req.workload)
    bundled = not req.workload.endswith(".py")
    probe = load_workload(req.workload) if bundled else None
    if bundled and req.in_tree:
        raise KprofInputError("--in-tree", "is for a workload file; a bundled workload always comes from each tree")
    bench = None if bundled else locate(req.workload, repo.root, req.in_tree)
    rtol = probe.reference_rtol if probe is not None else 2e-2
    plan = revision_legs(repo, req.revisions, req.revs, req.design, req.aa_copies, rtol, req.paths, req.setup, on_event)
    note_benchmark(plan, bench, repo, on_event)
    base_leg = plan.legs[0]
    base_tree = plan.trees[base_leg.revision or ""]
    if base_tree.refused or base_tree.path is None:
        raise KprofInputError("--revisions", f"the baseline {base_leg.name} cannot be made: {base_tree.refused}")
    workload = probe
    if workload is None and bench is not None:
        tree = Path(base_tree.path)
        try:
            with imports_from(import_path(tree, bench, repo.root)), warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                workload = load_workload(str(in_tree_path(bench, tree)))
        except KprofInputError as e:
            problem = without_tree(e.problem, tree)
            raise KprofInputError(req.workload, f"at the baseline {base_leg.name}: {problem}") from None
        for text in dict.fromkeys(str(w.message) for w in seen):  # the revision's own warnings, said once
            on_event(Note(text=f"importing the benchmark at {base_leg.name}: {without_tree(text, tree)}"))
    assert workload is not None
    revisions = plan.revision_set(repo, req.paths, bench, req.setup, req.allow_changed_outputs)
    return workload, plan.legs, plan.features, revisions, plan.design


def _across_gpus(cases: list[CaseRecord], gpus: list[int], wanted: bool) -> list[CaseRecord]:
    """With --aa-across-gpus the first case once more on every GPU but the first, each copy pinned
    to its GPU (and the first case pinned to the first): the same legs on every GPU."""
    if not wanted:
        return cases
    if len(gpus) < 2:
        raise KprofInputError("--aa-across-gpus", "needs --gpus with at least two GPUs")
    first = replace(cases[0], gpu=gpus[0])
    again = [replace(first, name=f"{first.name} @ GPU {g}", repeats=first.name, gpu=g) for g in gpus[1:]]
    return [first, *again, *cases[1:]]


def plan_run(req: RunRequest, on_event: Callable[[Event], None] = lambda e: None) -> Run:
    """Check every argument and describe the run; nothing is timed (revision trees are made and,
    with --setup, built)."""
    check_options(req)
    device = req.device or default_device()
    check_device(device)
    gpus = [req.on_gpu] if req.on_gpu is not None else parse_gpus(req.gpus, device)
    revisions = None
    if req.by_revision:
        workload, legs, features, revisions, design = _revision_workload(req, on_event)
    else:
        from kprof.revisions.plan import refuse_revision_options

        refuse_revision_options(req.setup, req.paths, req.in_tree)
        workload = load_workload(req.workload)
    preset = req.preset or ("smoke" if device == "cpu" else "pr")
    cases = _chosen_cases(workload, preset, req.case_filter)
    if req.ray is not None:
        ray_module()  # a missing Ray is said now, before anything is set up
    processes = _processes(req, device)
    sweep = _checked_sweep(req, workload, cases)
    if not req.by_revision:
        legs, features, design = _feature_legs(req, workload, sweep)
    return Run(
        WorkloadSubject(spec=req.workload, name=workload.name, reference_rtol=workload.reference_rtol),
        command="kprof " + " ".join(req.argv),
        preset=preset,
        cases=_across_gpus([_case_record(workload, c, sweep) for c in cases], gpus, req.aa_across_gpus),
        features=features,
        design=design,
        sweep=sweep,
        legs=legs,
        protocol=Protocol(
            rounds=req.rounds,
            samples=req.samples,
            buffer_sets=req.buffer_sets,
            buffers=req.buffers,
            processes=processes,
            timer_mode=req.timer_mode,
            captures=req.captures,
        ),
        placement=Placement(device=device, gpus=gpus, ray=req.ray),
        seed=req.seed,
        dtype=req.dtype or ("float16" if device == "cpu" else "bfloat16"),
        threshold_pct=req.threshold_pct,
        between_runs_pct=req.between_runs_pct,
        collector=req.collector,
        revisions=revisions,
        versions=versions(),
        started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **git_state(),
    )


def _chosen_cases(workload: Workload, preset: str, case_filter: str | None) -> list[Case]:
    """--case names a case exactly, else picks those whose names contain it ("b1" is b1, not b128 too)."""
    every = workload.cases(preset)
    cases = [c for c in every if c.name == case_filter] or [
        c for c in every if not case_filter or case_filter in c.name
    ]
    if not cases:
        raise KprofInputError("--case", f"no case of preset {preset!r} matches {case_filter!r}")
    return cases


def _checked_sweep(req: RunRequest, workload: Workload, cases: list[Case]) -> tuple[str, list[Any]] | None:
    """--sweep PARAM=v1,v2,… with every value valid for every case."""
    sweep = parse_sweep(req.sweep, workload)
    if req.sweep_baseline and sweep is None:
        raise KprofInputError("--sweep-baseline", "needs --sweep PARAM=v1,v2,…")
    if sweep is not None:
        for case in cases:
            bad = [v for v in sweep[1] if not workload.sweep(sweep[0]).valid(case, v)]
            if bad:
                raise KprofInputError("--sweep", f"values {bad} are not valid for case {case.name}")
    return sweep


def _feature_legs(
    req: RunRequest, workload: Workload, sweep: tuple[str, list[Any]] | None
) -> tuple[list[Leg], list[FeatureRecord], str]:
    """The legs of a run whose levers are the workload's features (or planted delays), the features
    as recorded, and the design's name."""
    for name in req.target or ():
        workload.feature(name, option="--target")
    features = [FeatureRecord(f.name, f.exactness, f.ulps, f.rtol, f.doc) for f in workload.features]
    if req.plants:
        target = req.target if req.target is not None else workload.feature_names
        return calibration_legs(target, req.plants, max(req.aa_copies, 1)), features, "calibration"
    design = req.design or "all"
    legs = design_legs(
        workload.feature_names,
        design,
        req.target,
        sweep,
        req.aa_copies,
        torch_leg=req.torch_leg and workload.has_torch_implementation,
        sweep_baseline=req.sweep_baseline,
    )
    return legs, features, design


def _processes(req: RunRequest, device: str) -> int:
    """Worker processes per case (kprof.parts): two by default on a GPU, so that what one
    process holds is in the interval; one where the protocol needs every set in one process (per-leg
    buffers, planted spins sized and measured per process, revision legs that have hosts of their
    own) and under the interpreter, whose times mean nothing."""
    single = req.buffers == "per-leg" or bool(req.plants) or req.by_revision
    if req.processes is None:
        wanted = 1 if single or device == "cpu" else 2
        return wanted if _fits(req, wanted) else 1
    if req.processes < 1:
        raise KprofInputError("--processes", "must be at least 1")
    if req.processes > 1 and single:
        raise KprofInputError(
            "--processes", "only shared buffers without --plant or --revisions are split over processes"
        )
    if not _fits(req, req.processes):
        raise KprofInputError(
            "--processes",
            f"{req.processes} processes need at least {req.processes} buffer sets and as many timed rounds "
            f"per process as sets (have --buffer-sets {req.buffer_sets}, --rounds {req.rounds})",
        )
    return req.processes


def _fits(req: RunRequest, processes: int) -> bool:
    """Every process owns a buffer set and times each of its sets at least once."""
    return req.buffer_sets >= processes and req.rounds // processes >= -(-req.buffer_sets // processes)


def create_run(out: Path | None, req: RunRequest, on_event: Callable[[Event], None] = lambda e: None) -> RunFolder:
    """Plan the run and write its folder (``out``, or a new folder under ``runs/``)."""
    run = plan_run(req, on_event)
    folder = RunFolder(out or default_folder(req.workload))
    folder.create(run)
    return folder
