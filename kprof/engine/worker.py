"""One case of a run (or one of its processes), in its own process, its legs in this process.

Started by the parent (kprof.engine.parent) as ``python -m kprof.engine.worker RUN_DIR CASE
[SKIP_JSON [PART]]`` (PART: which of the case's processes, kprof.parts), so a leg that kills
the GPU context takes down only this process: the parent records the death, starts it again, and
after a second death at that leg goes on without it. Progress goes to stdout as JSON lines. The
stages are the case protocol's (kprof.engine.case); :class:`LocalRunner` is how they reach legs
that live here.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kprof.collectors.in_run import IN_RUN
from kprof.engine.capture import Captured, capture
from kprof.engine.case import CaseRun, Item, Prepared, Sample, run_protocol, samples_of
from kprof.engine.context import CaseContext, emit
from kprof.engine.gate import GateResult, race_check, run_gate
from kprof.engine.gpus import own_gpu, record_device
from kprof.engine.lifeline import die_with_parent
from kprof.events import CASE_FAILED_STEP
from kprof.run_model import CaseStatus
from kprof.store.layout import progress_file
from kprof.store.run_folder import RunFolder
from kprof.timer.host import PYTHON_LABEL


class CaseNotTimed(Exception):
    """A case that cannot be timed at all; its message is the case's reason."""


def capture_order(items: list[Item], seed: int, case_index: int, r: int) -> list[Item]:
    """The round's items in a seeded random order: where a graph falls in the capture sequence
    must not follow its leg from round to round."""
    perm = np.random.default_rng([seed, case_index, r]).permutation(len(items))
    return [items[i] for i in perm]


@dataclass
class LocalRunner:
    """The legs of a case in this worker process: one timer, each leg checked against the
    baseline's outputs on the same buffer set."""

    ctx: CaseContext
    gate: GateResult = field(default_factory=GateResult)
    captured: Captured | None = None

    @property
    def label(self) -> str:
        assert self.ctx.timer is not None
        return self.ctx.timer.label

    def prepare(self) -> Prepared:
        ctx = self.ctx
        ctx.at("setup")
        ctx.setup()
        self.gate = run_gate(ctx)
        if ctx.device == "cpu" and not any(self.gate.launches.values()) and ctx.timer is not None:
            ctx.timer.label = PYTHON_LABEL  # nothing ran under Triton's interpreter: say what was timed
        self.record_timer()
        base = ctx.legs[ctx.baseline_index].name
        if base in self.gate.failed:  # nothing can be compared: say why in the case's one-line reason
            raise CaseNotTimed(f"the baseline leg {base!r} failed its check: {self.gate.failed[base]}")
        self.captured = captured = capture(ctx, self.gate)
        if ctx.part_index == 0:
            ctx.folder.update_case(
                ctx.case.name,
                samples=captured.samples,
                failed=self.gate.failed,
                no_op_legs=self.gate.no_ops,
                legs_timed=[ctx.legs[li].name for li in captured.timed],
                baseline_warmup_ns=captured.baseline_warmup_ns,
                timer=self.label,
                kernel_time=ctx.timer.kernel_time if ctx.timer else False,
                **({"spin_ladder": captured.spin_ladder} if captured.spin_ladder else {}),
            )
        elif self.gate.failed:  # a leg that fails on this process's sets is not reported from the others' rounds
            ctx.folder.add_to_case(ctx.case.name, failed=self.gate.failed)
        return Prepared(legs=len(captured.timed), samples=captured.samples)

    def record_timer(self) -> None:
        """The timer's description, and once per GPU its device measurements (kprof.engine.gpus)."""
        timer = self.ctx.timer
        assert timer is not None

        def describe(measure: bool) -> tuple[str, dict[str, Any]]:
            return timer.label, {**timer.describe(), **(timer.measure_device() if measure else {})}

        self.ctx.run, _ = record_device(self.ctx.folder, self.ctx.case.name, own_gpu(), describe)

    def item(self, i: int, r: int) -> Item:
        assert self.captured is not None
        li = self.captured.timed[i]
        return li, self.ctx.buffer_set(li, r)

    def start_round(self, items: list[Item], r: int) -> None:
        assert self.ctx.timer is not None
        self.ctx.at("round", str(r))
        if self.ctx.run.protocol.captures == "per-round":
            self.ctx.timer.recapture(capture_order(items, self.ctx.run.seed, self.ctx.case_index, r))

    def time_round(self, items: list[Item], samples: int) -> dict[Item, list[Sample]]:
        assert self.ctx.timer is not None
        times = self.ctx.timer.time_round(items, samples)
        return {item: samples_of(self.ctx.case.name, t) for item, t in times.items()}

    def conditions(self) -> dict[str, Any]:
        assert self.ctx.timer is not None
        return self.ctx.timer.round_conditions()

    def race(self, items: list[Item], r: int) -> list[dict[str, Any]]:
        return race_check(self.ctx, self.gate, items, r)

    def leg_name(self, item: Item) -> str:
        return self.ctx.legs[item[0]].name

    def finish(self, rounds: dict[int, list[Item]]) -> None:
        ctx = self.ctx
        IN_RUN[ctx.run.collector].finish(ctx, {r: items for r, items in rounds.items() if not ctx.part.burn_in(r)})
        if ctx.last_part:
            ctx.folder.update_case(ctx.case.name, status="done")
        ctx.done()


def run_case(root: Path, case_index: int, skip: set[str], part: int = 0, first_part: CaseStatus | None = None) -> None:
    """One process of a case; ``first_part``: what the case's first process chose (the timer,
    samples per round), handed down by the parent to a later process with ``skip`` holding the
    legs it found wrong."""
    folder = RunFolder(root)
    ctx = CaseContext.open(folder, case_index, skip, part, first_part)
    run, rounds = ctx.run, ctx.part.rounds
    case = CaseRun(folder, case_index, ctx.case.name, run.protocol, run.seed, LocalRunner(ctx), emit, rounds, part)
    run_protocol(case)


def main() -> None:
    die_with_parent()
    root, case_index = Path(sys.argv[1]), int(sys.argv[2])
    skip = set(json.loads(sys.argv[3])) if len(sys.argv) > 3 else set()
    part = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    first_part = CaseStatus.from_record(json.loads(sys.argv[5]), "argv") if len(sys.argv) > 5 else None
    try:
        run_case(root, case_index, skip, part, first_part)
    except CaseNotTimed as e:
        progress = progress_file(root, case_index)  # a decision, not a death: not retried
        progress.write_text(json.dumps({"step": CASE_FAILED_STEP}))
        print(e, file=sys.stderr)  # the parent records the last line as the case's reason
        sys.exit(3)


if __name__ == "__main__":
    main()
