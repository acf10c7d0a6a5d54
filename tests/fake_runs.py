"""Run folders with known effects, written through the same store as a real run: for testing the
analysis and the reports in milliseconds, with numbers the test knows in advance."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from kprof.run_model import CaseRecord, Leg, Placement, Protocol, Run
from kprof.store.run_folder import RunFolder


def write_run(
    root: Path,
    legs: list[Leg],
    log_effect: Callable[[Leg, str], float],
    cases: tuple[str, ...] = ("c",),
    rounds: int = 16,
    noise: float = 0.002,
    seed: int = 0,
    program: bool = False,
    features: tuple[str, ...] = (),
    timer: str = "cuda-events (device time, graph replay, cold L2)",
    protocol: Protocol | None = None,
    **run_fields: object,
) -> RunFolder:
    """A finished run: t(leg, case, round) = 100 µs · exp(log_effect(leg, case) + round drift + noise)."""
    from kprof.run_model import FeatureRecord, ProgramSubject, WorkloadSubject

    rng = np.random.default_rng(seed)
    run = Run(
        subject=ProgramSubject(command=["synthetic"], name="synthetic")
        if program
        else WorkloadSubject(spec="synthetic", name="synthetic"),
        legs=legs,
        cases=[CaseRecord(c) for c in cases],
        protocol=protocol or Protocol(rounds=rounds),
        placement=Placement(device="cuda"),
        dtype="bfloat16",
        design="all",
        preset="test",
        timer=timer,
        features=[FeatureRecord(f) for f in features],
        **run_fields,  # type: ignore[arg-type]
    )
    folder = RunFolder(root)
    folder.create(run)
    for ci, case in enumerate(cases):
        for r in range(rounds + 1):
            drift = rng.normal(0, 0.01)  # shared by every leg of a round: pairing removes it
            rows = [
                dict(
                    case=case,
                    leg=leg.name,
                    round=r,
                    sample=i,
                    buffer_set=r % 4,
                    slot=slot,
                    time_ns=100e3 * math.exp(log_effect(leg, case) + drift + rng.normal(0, noise)),
                    timer=timer,
                    burn_in=r == 0,
                )
                for slot, leg in enumerate(legs)
                for i in range(3)
            ]
            folder.write_part("samples", ci, r, pd.DataFrame(rows))
        folder.update_case(case, status="done")
    return folder


def forget_rounds(root: Path, rounds: set[int], tables: tuple[str, ...] = ("samples",)) -> None:
    """Remove these rounds from a finished (compacted) run folder's tables, as if the run had been
    interrupted before them: what ``--resume`` must time again."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from kprof.store.run_folder import COMPACT

    for name in tables:
        path = root / name / COMPACT
        table = pq.read_table(path)
        pq.write_table(table.filter(pc.invert(pc.is_in(table["round"], pa.array(sorted(rounds))))), path)


def as_version_3(record: dict) -> dict:
    """A current meta.json record as a version 3 folder kept it: the protocol, placement, subject
    and revision keys at the top level (kprof.run_model's history)."""
    old = dict(record)
    for group in ("protocol", "placement"):
        old.update(old.pop(group))
    subject, revisions = old.pop("subject"), old.pop("revisions") or {}
    names = {"spec": "workload", "name": "workload_name", "command": "program", "in_tree": "workload_in_tree"}
    old.update({names.get(k, k): v for k, v in subject.items()})
    if subject["kind"] == "program":
        old["workload"] = " ".join(subject["command"])
    old.update({("revisions" if k == "trees" else k): v for k, v in revisions.items()})
    old["run_format_version"] = 3
    return old
