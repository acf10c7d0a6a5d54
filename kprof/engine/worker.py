"""One case of a run (or one of its processes), in its own process: setup → gate → capture →
rounds → (profile).

Started by the parent (kprof.engine.parent) as ``python -m kprof.engine.worker RUN_DIR CASE
[SKIP_JSON [PART]]`` (PART: which of the case's processes, kprof.parts), so a leg that kills
the GPU context takes down only this process: the parent records the death, starts it again, and
after a second death at that leg goes on without it. Progress goes to stdout as JSON lines; every
finished round is on disk before the next starts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from kprof.engine.capture import capture
from kprof.engine.context import CaseContext
from kprof.engine.gate import run_gate
from kprof.engine.gpus import own_gpu, record_device
from kprof.engine.lifeline import die_with_parent
from kprof.engine.profile import profile_case
from kprof.engine.rounds import run_rounds
from kprof.events import CASE_FAILED_STEP
from kprof.store.layout import progress_file
from kprof.store.run_folder import RunFolder


class CaseFailed(Exception):
    """A case that cannot be timed at all; its message is the case's reason."""


def record_timer(ctx: CaseContext) -> None:
    """The timer's description, and once per GPU its device measurements (kprof.engine.gpus)."""
    timer = ctx.timer
    assert timer is not None

    def describe(measure: bool) -> tuple[str, dict[str, Any]]:
        return timer.label, {**timer.describe(), **(timer.measure_device() if measure else {})}

    ctx.run, _ = record_device(ctx.folder, ctx.case.name, own_gpu(), describe)


def run_case(root: Path, case_index: int, skip: set[str], part: int = 0) -> None:
    folder = RunFolder(root)
    if part > 0:  # a leg the first process found wrong is not set up again
        run = folder.read_run()
        skip = skip | set(run.status(run.case_names[case_index]).failed)
    ctx = CaseContext.open(folder, case_index, skip, part)
    ctx.at("setup")
    ctx.setup()
    record_timer(ctx)
    gate = run_gate(ctx)
    base = ctx.legs[ctx.baseline_index].name
    if base in gate.failed:  # nothing can be compared: say why in the case's one-line reason
        raise CaseFailed(f"the baseline leg {base!r} failed its check: {gate.failed[base]}")
    captured = capture(ctx, gate)
    if part == 0:
        ctx.folder.update_case(
            ctx.case.name,
            samples=captured.samples,
            failed=gate.failed,
            no_op_legs=gate.no_ops,
            legs_timed=[ctx.legs[li].name for li in captured.timed],
            baseline_warmup_ns=captured.baseline_warmup_ns,
            timer=ctx.timer.label,
            kernel_time=ctx.timer.kernel_time,
            **({"spin_ladder": captured.spin_ladder} if captured.spin_ladder else {}),
        )
    elif gate.failed:  # a leg that fails on this process's sets is not reported from the others' rounds
        earlier = ctx.folder.read_run().status(ctx.case.name).failed
        ctx.folder.update_case(ctx.case.name, failed={**earlier, **gate.failed})
    run_rounds(ctx, gate, captured)
    if ctx.run.collector == "torch" and ctx.device != "cpu":
        profile_case(ctx, captured)
    if ctx.last_part:
        ctx.folder.update_case(ctx.case.name, status="done")
    ctx.done()


def main() -> None:
    die_with_parent()
    root, case_index = Path(sys.argv[1]), int(sys.argv[2])
    skip = set(json.loads(sys.argv[3])) if len(sys.argv) > 3 else set()
    part = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    try:
        run_case(root, case_index, skip, part)
    except CaseFailed as e:
        progress = progress_file(root, case_index)  # a decision, not a death: not retried
        progress.write_text(json.dumps({"step": CASE_FAILED_STEP}))
        print(e, file=sys.stderr)  # the parent records the last line as the case's reason
        sys.exit(3)


if __name__ == "__main__":
    main()
