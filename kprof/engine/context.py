"""Everything one case worker holds: the run, the workload, its buffer sets and the timer.

The stages (gate → capture → rounds → profile) each take the context and return what the next
needs; none of them reads meta.json or writes parts except through it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from kprof.correctness import Rule, rule_for
from kprof.events import Event, Phase, encode
from kprof.parts import Part, case_parts
from kprof.run_model import CaseStatus, Leg, Role, Run
from kprof.store.layout import progress_file
from kprof.store.run_folder import RunFolder
from kprof.timer import Timer, make_timer
from kprof.workload import Case, Workload, load_workload


def emit(event: Event) -> None:
    """A progress event for the parent, as one JSON line on stdout."""
    print(encode(event), flush=True)


PLACEMENT_STEPS = 16  # a buffer set starts after 0–15 × 2 MiB plus 4 KiB–2 MiB of padding
PLACEMENT_STEP_BYTES = 2 << 20


@dataclass
class CaseContext:
    folder: RunFolder
    run: Run
    case_index: int
    case: Case
    workload: Workload
    legs: list[Leg]
    part_index: int = 0  # which of the case's processes this is (kprof.parts)
    kept_sets: int = 0  # a leg host's buffer sets cut to what GPU memory allows (0: every set of its part)
    states: dict[int, Any] = field(default_factory=dict)  # buffer set → the workload's state
    timer: Timer | None = None
    pads: list[Any] = field(default_factory=list)  # held for the case's life: they set where each buffer set lies
    first_part: CaseStatus | None = None  # a later process: what the case's first process chose (the parent's word)

    @classmethod
    def open(
        cls,
        folder: RunFolder,
        case_index: int,
        skip: set[str],
        part_index: int = 0,
        first_part: CaseStatus | None = None,
    ) -> CaseContext:
        run = folder.read_run()
        workload = load_workload(run.subject.spec)
        record = run.cases[case_index]
        name = record.repeats or record.name
        case = next(c for c in workload.cases(run.preset) if c.name == name)
        case = replace(case, name=record.name)  # a repeat on another GPU keeps its own name in every table
        legs = [leg for leg in run.legs if leg.name not in skip]
        return cls(folder, run, case_index, case, workload, legs, part_index, first_part=first_part)

    @property
    def device(self) -> str:
        return self.run.placement.device

    @property
    def per_leg_buffers(self) -> bool:
        return self.run.protocol.buffers == "per-leg"

    @property
    def part(self) -> Part:
        """This process's share of the case: its buffer sets and its rounds."""
        n_sets = len(self.legs) if self.per_leg_buffers else self.run.protocol.buffer_sets
        part = case_parts(self.run.protocol.rounds, n_sets, self.run.protocol.processes)[self.part_index]
        return replace(part, sets=part.sets[: self.kept_sets]) if self.kept_sets else part

    @property
    def last_part(self) -> bool:
        return self.part_index == self.run.protocol.processes - 1

    def buffer_set(self, leg_index: int, round_index: int) -> int:
        """Shared protocol: every leg of round r uses the part's set for r (r mod K with one
        process). Per-leg (the PR method): leg i owns set i."""
        return leg_index if self.per_leg_buffers else self.part.set_of(round_index)

    def uses_set(self, leg_index: int, k: int) -> bool:
        return not self.per_leg_buffers or k == leg_index

    @property
    def baseline_index(self) -> int:
        return next(i for i, leg in enumerate(self.legs) if leg.has(Role.BASELINE))

    def at(self, step: str, leg: str | None = None) -> None:
        """Where the worker is: the parent reads it when the worker dies (which leg to drop), and
        the display shows it (setup and the gate take minutes on a CPU)."""
        progress = progress_file(self.folder.root, self.case_index)
        progress.write_text(json.dumps({"step": step, "leg": leg}))
        if step != "round":
            process = (
                f"{self.part_index + 1}/{self.run.protocol.processes}" if self.run.protocol.processes > 1 else None
            )
            emit(Phase(case=self.case.name, step=step, leg=leg, process=process))

    def done(self) -> None:
        progress_file(self.folder.root, self.case_index).unlink(missing_ok=True)

    def setup(self) -> None:
        """Every buffer set, each placed after a seeded random padding allocation, so the sets lie
        at different offsets: where buffers happen to lie changes a kernel's time (0.8% between
        four sets of one H200 run), and rotating varied placements lets the analysis see it."""
        import numpy as np
        import torch

        seed = self.run.seed
        self.states = {}
        for k in self.part.sets:
            rng = np.random.default_rng([seed, self.case_index, k])
            pad = int(rng.integers(0, PLACEMENT_STEPS)) * PLACEMENT_STEP_BYTES + int(rng.integers(1, 512)) * 4096
            self.pads.append(torch.empty(pad, dtype=torch.uint8, device=self.device))
            self.states[k] = self.workload.setup(self.case, self.device, self.run.dtype, seed * 1000 + k)
        self.timer = make_timer(self.device, graphs=self.run.protocol.captures != "none")

    def launch(self, leg: Leg, state: Any) -> Callable[[], None]:
        """The leg's callable: the workload's plain-PyTorch implementation for the torch leg; for a
        revision leg, the revision's code as it is (its levers are commits, not workload features)."""
        if leg.is_torch:
            fn = self.workload.launch_torch(state)
            assert fn is not None, "a torch leg on a workload without a plain-PyTorch implementation"
            return fn
        features = frozenset() if leg.revision else leg.features
        return self.workload.launch(state, features, leg.workload_params)

    def rule(self, leg: Leg) -> Rule:
        """The features' rule. A forced parameter (a sweep: split count, tile size) may reorder any
        reduction, and the plain-PyTorch implementation computes differently: those legs are held to
        the workload's float64 tolerance against the baseline."""
        if leg.workload_params or leg.is_torch:
            return Rule("tolerance", rtol=self.workload.reference_rtol)
        return rule_for(self.workload.feature(f) for f in leg.features)
