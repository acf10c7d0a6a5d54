"""A leg host: the legs of one revision tree, in a process of their own, driven by the parent.

    python -m kprof.engine.leg_host RUN_DIR CASE_INDEX REVISION_KEY

The tree goes first on the import path, so the workload's modules are that revision's, while kprof
itself stays the running one; each tree has its own Triton cache. The parent sends one command per
line on stdin and reads one reply per line on stdout, typed (kprof.engine.host_messages): GateLegs (run
every leg on every buffer set, outputs poisoned first, and save the outputs for the parent to
compare across revisions), Describe, Capture, Time, RaceCheck, ReadConditions, Exit.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from kprof.correctness import Rule, compare
from kprof.engine.capture import warm_up
from kprof.engine.context import CaseContext
from kprof.engine.gate import check_row, checked_call, launch_failure, recorded, replayed_outputs
from kprof.engine.host_messages import (
    Capture,
    Checked,
    Command,
    Conditions,
    Describe,
    Described,
    Estimated,
    Exit,
    Gated,
    GateLegs,
    RaceCheck,
    ReadConditions,
    Ready,
    Time,
    Timed,
    Trim,
    decode_command,
    encode,
)
from kprof.engine.lifeline import die_with_parent
from kprof.errors import KprofInputError
from kprof.revisions.benchmark import (
    BenchmarkChanged,
    check_unchanged,
    import_path,
    in_tree_path,
    shadowed,
    without_tree,
)
from kprof.run_model import RevisionSet, WorkloadSubject
from kprof.store.layout import outputs_file
from kprof.store.run_folder import RunFolder
from kprof.workload import Workload, load_workload


def import_workload(subject: WorkloadSubject, revisions: RevisionSet, tree: Path) -> Workload:
    """The workload this revision runs: the user's benchmark (from where the user keeps it, with the
    tree first on the import path, unchanged since the run was planned), a bundled family's module
    from the tree, or — runs from before format 3 — a file at its path inside the tree."""
    bench = revisions.benchmark
    if bench is None:
        sys.path.insert(0, str(tree))
        spec = subject.in_tree or subject.spec
        if spec.endswith(".py"):
            return load_workload(str(tree / spec))
        return importlib.import_module(f"{bundled_package(tree, spec)}.{spec}.workload").WORKLOAD
    if not bench.in_tree:
        check_unchanged(bench)
    sys.path[:0] = import_path(tree, bench, Path(revisions.repo))
    workload = load_workload(str(in_tree_path(bench, tree)))
    refusal = shadowed(tree, sys.modules)
    if refusal:
        raise KprofInputError(bench.path, refusal)
    return workload


def bundled_package(tree: Path, family: str) -> str:
    """The package that holds a bundled family in this tree: ``kprof_kernels``, or ``kernels`` in
    kprof's own revisions from before the rename (a bisect over kprof's history crosses it)."""
    return (
        "kernels"
        if not (tree / "kprof_kernels" / family).is_dir() and (tree / "kernels" / family).is_dir()
        else "kprof_kernels"
    )


def held_memory(device: str) -> dict[str, int]:
    """What this host holds on its GPU once gated, and what the GPU has free: the reference's float64
    temporaries and the gate's scratch are given back first, since several hosts share one GPU."""
    if device == "cpu":
        return {}
    import torch

    torch.cuda.empty_cache()
    return {"held_bytes": torch.cuda.memory_reserved(), "free_bytes": torch.cuda.mem_get_info()[0]}


def save(tensors: dict[str, Any], path: Path) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({n: t.cpu() for n, t in tensors.items()}, path)


class HostRefused(Exception):
    """This host cannot run its legs; ``revision_wide``: no case of this revision can (its code does
    not import), so the run refuses the revision once, not once per case."""

    def __init__(self, reason: str, revision_wide: bool) -> None:
        self.reason, self.revision_wide = reason, revision_wide
        super().__init__(reason)


class LegHost:
    def __init__(self, root: Path, case_index: int, key: str) -> None:
        folder = RunFolder(root)
        run = folder.read_run()
        assert isinstance(run.subject, WorkloadSubject) and run.revisions is not None  # a workload's revisions
        tree = Path(run.revisions.trees[key].path or ".")
        try:
            workload = import_workload(run.subject, run.revisions, tree)
        except BenchmarkChanged as e:  # not the revision's fault
            raise HostRefused(str(e), revision_wide=False) from None
        except KprofInputError as e:  # the user's file failed to import with this revision's code
            raise HostRefused(without_tree(e.problem, tree), revision_wide=True) from None
        except Exception as e:  # a revision whose code fails to import (a bundled family's module)
            raise HostRefused(without_tree(f"{type(e).__name__}: {e}", tree), revision_wide=True) from None
        name = run.cases[case_index].name
        case = next((c for c in workload.cases(run.preset) if c.name == name), None)
        if case is None:
            raise HostRefused(f"case {name} is not in this revision's workload (preset {run.preset})", False)
        legs = [leg for leg in run.legs if leg.revision == key]
        self.ctx = CaseContext(folder, run, case_index, case, workload, legs)
        self.index = {leg.name: i for i, leg in enumerate(legs)}
        self.fns: dict[tuple[int, int], Any] = {}
        self.own_outputs: dict[tuple[int, int], dict[str, Any]] = {}

    def gate(self, cmd: GateLegs) -> Gated:
        ctx, w = self.ctx, self.ctx.workload
        ctx.kept_sets = cmd.sets
        ctx.setup()
        failed: dict[str, str] = {}
        launches: dict[str, list[dict[str, Any]]] = {}
        for k, state in ctx.states.items():
            if cmd.reference and k == 0:
                save(w.reference(state), outputs_file(ctx.folder.root, ctx.case_index, "reference", 0))
            for li, leg in enumerate(ctx.legs):
                if leg.name in failed:
                    continue
                try:
                    fn, seen = checked_call(ctx, leg, state, recorded)
                except Exception as e:  # a revision that does not compile or raises
                    failed[leg.name] = launch_failure(e)
                    continue
                if k == 0:
                    launches[leg.name] = [x.record() for x in seen]
                outs = {n: t.clone() for n, t in w.outputs(state).items()}
                self.own_outputs[(li, k)] = outs
                save(outs, outputs_file(ctx.folder.root, ctx.case_index, leg.name, k))
                self.fns[(li, k)] = fn
        return Gated(failed=failed, launches=launches, sets=len(ctx.states), **held_memory(ctx.device))

    def trim(self, cmd: Trim) -> Gated:
        """Only the first ``cmd.sets`` buffer sets kept: the others' states, calls and outputs are
        dropped and their memory given back to the GPU (the other hosts of the case need it)."""
        ctx = self.ctx
        ctx.kept_sets = cmd.sets
        kept = ctx.part.sets
        ctx.states = {k: state for k, state in ctx.states.items() if k in kept}
        self.fns = {item: fn for item, fn in self.fns.items() if item[1] in kept}
        self.own_outputs = {item: outs for item, outs in self.own_outputs.items() if item[1] in kept}
        gc.collect()
        return Gated(failed={}, launches={}, sets=len(kept), **held_memory(ctx.device))

    def describe(self, cmd: Describe) -> Described:
        timer = self.ctx.timer
        assert timer is not None
        info = timer.describe()
        if cmd.measure:
            info.update(timer.measure_device())
        return Described(label=timer.label, info=info)

    def capture(self, cmd: Capture) -> Estimated:
        timer = self.ctx.timer
        assert timer is not None
        kept = {self.index[name] for name in cmd.keep}
        self.fns = {item: fn for item, fn in self.fns.items() if item[0] in kept}
        for item, fn in self.fns.items():
            timer.prepare(item, fn)
        est = warm_up(timer, [item for item in self.fns if item[1] == 0], self.ctx.device)
        return Estimated(t_ns={self.ctx.legs[li].name: v[0] for (li, _), v in est.items()})

    def time(self, cmd: Time) -> Timed:
        timer = self.ctx.timer
        assert timer is not None
        timer.kernel_time = cmd.kernel_time
        keys = [(self.index[name], int(k)) for name, k in cmd.items]
        if cmd.recapture:
            timer.recapture(keys)
        # The host was idle while the others ran: one untimed replay first settles its caches (and,
        # on a GPU, the switch back to this process's context).
        timer.replay(keys[0])
        times = timer.time_round(keys, cmd.samples)
        return Timed(times=[times[key] for key in keys], label=timer.label)

    def race(self, cmd: RaceCheck) -> Checked:
        """Each leg replayed on that round's buffers, poisoned first, against its own gate outputs:
        the same code on the same inputs must give the same bytes."""
        rows = []
        for name, k in cmd.items:
            li = self.index[name]
            outs = replayed_outputs(self.ctx, (li, k))
            res = compare(outs, self.own_outputs[(li, k)], None, Rule("bitwise"), float("inf"))
            rows.append(check_row(self.ctx.case.name, name, cmd.round, k, res))
        return Checked(rows=rows)

    def conditions(self, cmd: ReadConditions) -> Conditions:
        timer = self.ctx.timer
        assert timer is not None
        return Conditions(conditions=timer.round_conditions())

    def answer(self, cmd: Command) -> msgspec.Struct:
        """The reply to one command (host_messages.REPLIES names its type)."""
        handlers: dict[type, Callable[[Any], msgspec.Struct]] = {
            GateLegs: self.gate,
            Trim: self.trim,
            Describe: self.describe,
            Capture: self.capture,
            Time: self.time,
            RaceCheck: self.race,
            ReadConditions: self.conditions,
        }
        return handlers[type(cmd)](cmd)


def main() -> None:
    die_with_parent()
    root, case_index, key = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    # Replies go to the original stdout; anything else printed (a workload, a compiler) to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        host = LegHost(root, case_index, key)
    except HostRefused as e:
        out.write(encode(Ready(ready=False, reason=e.reason, revision_wide=e.revision_wide)))
        out.flush()
        raise SystemExit(1) from None
    out.write(encode(Ready(ready=True)))
    out.flush()
    for line in sys.stdin:
        cmd = decode_command(line)
        if isinstance(cmd, Exit):
            break
        out.write(encode(host.answer(cmd)))
        out.flush()


if __name__ == "__main__":
    main()
