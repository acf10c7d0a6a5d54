"""A case whose legs live in several processes (revision runs): one leg host per revision tree,
driven round by round from here. The protocol is the in-process one — a correctness gate, capture
and warm-up, then interleaved timed rounds in a seeded balanced order with race checks and clock
readings, every round on disk before the next — with the comparisons made across processes:
each revision's outputs against the first revision's, under the workload's float64 tolerance.
"""

from __future__ import annotations

import contextlib
import select
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

import msgspec
import pandas as pd

from kprof.correctness import Rule, compare
from kprof.engine.capture import samples_per_round
from kprof.engine.case import CaseRun, Item, Prepared, Sample, run_protocol, samples_of
from kprof.engine.gate import check_row
from kprof.engine.gpus import gpu_timer_info, pinned_env, record_device
from kprof.engine.host_messages import (
    REPLIES,
    Capture,
    Command,
    Describe,
    Exit,
    GateLegs,
    RaceCheck,
    ReadConditions,
    Ready,
    Time,
    Trim,
    decode_reply,
    encode,
)
from kprof.engine.lifeline import Workers, child_env, last_line
from kprof.engine.memory_plan import MemoryPlan
from kprof.engine.sharding import shard_cases
from kprof.events import CaseFailed, Event, LegFailed, Note, RevisionRefused
from kprof.launches import launch_rows
from kprof.revisions.benchmark import check_unchanged
from kprof.revisions.plan import say_refused
from kprof.revisions.tree_setup import revision_seconds, too_long
from kprof.revisions.trees import revision_env
from kprof.run_model import Leg, Role, Run, WorkloadSubject
from kprof.store.layout import host_log, outputs_file
from kprof.store.run_folder import RunFolder
from kprof.timer.kernel_time import KERNEL_TIME_LABEL, wants_kernel_time


class HostDied(Exception):
    """A leg host exited, or refused its legs; ``revision_wide``: its revision's code cannot run
    any case (it does not import), so the run refuses the revision once."""

    def __init__(self, reason: str, revision_wide: bool = False) -> None:
        self.revision_wide = revision_wide
        super().__init__(reason)


class Host:
    """One leg-host process and its command channel."""

    def __init__(self, folder: RunFolder, run: Run, case_index: int, key: str, gpu: int | None) -> None:
        env = pinned_env(revision_env(run, key), gpu, run.placement.device)
        cmd = [sys.executable, "-m", "kprof.engine.leg_host", str(folder.root), str(case_index), key]
        # stderr to a file, not a pipe: a host that writes much there (a compiler) must never block
        self.log = host_log(folder.root, case_index, key)
        with self.log.open("w") as err:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, env=child_env(env)
            )
        self.key = key

    def ready(self) -> None:
        """Wait for the host's Ready: the revision's workload is imported and the case found. A
        revision whose import does not end within the limit is stopped and refused, said once."""
        assert self.proc.stdout is not None
        if not select.select([self.proc.stdout], [], [], revision_seconds())[0]:
            self.proc.kill()
            self.proc.wait()
            raise HostDied(too_long("its import"), revision_wide=True)
        reply = self._read(Ready)
        if not reply.ready:
            self.proc.wait()
            raise HostDied(reply.reason or "the leg host refused", reply.revision_wide)

    def _read(self, kind: type[Any]) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise HostDied(last_line(self.log, "the leg host exited"))
        try:
            return decode_reply(line, kind)
        except msgspec.DecodeError as e:
            raise HostDied(f"the leg host answered what is not a {kind.__name__} ({e})") from None

    def ask(self, command: Command) -> Any:
        """The host's answer to ``command``, of the type host_messages.REPLIES names."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(encode(command))
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise HostDied("the leg host exited") from None
        return self._read(REPLIES[type(command)])

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.write(encode(Exit()))
                self.proc.stdin.flush()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _load(path: Path) -> dict[str, Any]:
    import torch

    return torch.load(path, map_location="cpu")


def run_hosted_case(
    folder: RunFolder, case_index: int, on_event: Callable[[Event], None], gpu: int | None, live: Workers
) -> None:
    """One case: a host per revision tree, every one pinned to ``gpu`` (None: not sharded) and known
    to ``live`` so that Ctrl-C stops them. The run is read afresh: a revision another case found
    it cannot run (state.json) is not tried again."""
    run = folder.read_run()
    failed: dict[str, str] = {}
    for leg in run.legs:
        tree = run.tree(leg.revision)
        if tree is None or tree.refused:
            failed[leg.name] = f"refused: {tree.refused if tree else 'no tree'}"
    keys = sorted({leg.revision for leg in run.legs if leg.name not in failed and leg.revision})
    base_key = run.baseline.revision or ""
    if base_key not in keys:
        raise HostDied(f"the baseline revision cannot run: {failed.get(run.baseline.name)}")
    hosts: dict[str, Host] = {}
    started: dict[str, Host] = {}
    try:
        started = {key: Host(folder, run, case_index, key, gpu) for key in keys}  # they start in parallel
        live.procs.update(host.proc for host in started.values())
        for key, host in started.items():
            try:
                host.ready()
                hosts[key] = host
            except HostDied as e:
                host.close()
                legs = [leg.name for leg in run.legs if leg.revision == key]
                for name in legs:
                    failed[name] = f"refused: {e}" if e.revision_wide else f"host: {e}"
                if e.revision_wide and key != base_key:  # said once; no later case starts it again
                    folder.update_revision(key, refused=str(e))
                    on_event(RevisionRefused(leg=", ".join(legs), reason=str(e)))
        if base_key not in hosts:
            raise HostDied(failed.get(run.baseline.name, "the baseline revision's host did not start"))
        runner = HostedRunner(folder, run, case_index, hosts, base_key, failed, on_event, gpu)
        case = run.cases[case_index].name
        run_protocol(CaseRun(folder, case_index, case, run.protocol, run.seed, runner, on_event))
    finally:
        for host in started.values():
            host.close()
            live.procs.discard(host.proc)


@dataclass
class HostedRunner:
    """A case's legs in their revisions' hosts: gated by each host and compared here, across
    revisions; each leg timed by its own host, one at a time; the baseline's host reads the round's
    clocks; each host checks its legs against its own outputs after every round."""

    folder: RunFolder
    run: Run
    case_index: int
    hosts: dict[str, Host]
    base_key: str
    failed: dict[str, str]
    on_event: Callable[[Event], None]
    gpu: int | None = None  # the host GPU every host of this case is pinned to (None: not sharded)
    sets: int = 0
    kernel_time: bool = False  # the case's timer, chosen once for every host
    timed: list[Leg] = field(default_factory=list)  # items are (index into this list, buffer set)
    label: str = ""

    @property
    def case(self) -> str:
        return self.run.cases[self.case_index].name

    @property
    def gpu_key(self) -> str | None:
        """The case's GPU as a key of ``timer_info["gpus"]``."""
        return None if self.gpu is None else str(self.gpu)

    def fail(self, leg: str, reason: str) -> None:
        self.failed[leg] = reason
        self.on_event(LegFailed(case=self.case, leg=leg, reason=reason))

    def prepare(self) -> Prepared:
        changed = self.gate()
        label = self.record_timer()
        self.timed = [leg for leg in self.run.legs if leg.name not in self.failed and leg.revision in self.hosts]
        estimates: dict[str, float] = {}
        for key, host in self.hosts.items():
            estimates.update(host.ask(Capture(keep=[leg.name for leg in self.timed if leg.revision == key])).t_ns)
        typical_ns = median(estimates.values()) if estimates else 1.0
        samples = samples_per_round(typical_ns, self.run.placement.device, self.run.protocol.samples)
        base_ns = estimates.get(self.run.baseline.name, typical_ns)
        info = gpu_timer_info(self.run.timer_info, self.gpu_key)
        self.kernel_time = wants_kernel_time(
            self.run.protocol.timer_mode,
            base_ns,
            info,
            self.run.placement.device,
            graphs=self.run.protocol.captures != "none",
        )
        self.folder.update_case(
            self.case,
            samples=samples,
            failed=self.failed,
            legs_timed=[leg.name for leg in self.timed],
            changed_outputs=changed,
            timer=KERNEL_TIME_LABEL if self.kernel_time else label,
        )
        return Prepared(legs=len(self.timed), samples=samples)

    def record_timer(self) -> str:
        """The timer's description, and once per GPU its device measurements, from the baseline's
        host (kprof.engine.gpus.record_device); returns the timer's label."""

        def describe(measure: bool) -> tuple[str, dict[str, Any]]:
            reply = self.hosts[self.base_key].ask(Describe(measure=measure))
            return reply.label, reply.info

        self.run, label = record_device(self.folder, self.case, self.gpu_key, describe)
        return label

    def gate(self) -> dict[str, str]:
        """Every host runs its legs; outputs are compared here, across revisions. Returns the legs
        timed although their outputs changed (--allow-changed-outputs)."""
        launches = []
        plan: MemoryPlan | None = None
        for key in [self.base_key, *(k for k in self.hosts if k != self.base_key)]:  # the baseline's first
            try:
                reply = self.hosts[key].ask(GateLegs(reference=key == self.base_key, sets=self.sets))
            except HostDied as e:
                raise HostDied(plan.explain(str(e)) if plan else str(e), e.revision_wide) from None
            self.sets = reply.sets
            if key == self.base_key and reply.held_bytes and len(self.hosts) > 1:
                plan = self.plan_memory(MemoryPlan(len(self.hosts), reply.held_bytes, reply.free_bytes, reply.sets))
            for leg, reason in reply.failed.items():
                self.fail(leg, plan.explain(reason) if plan else reason)
            launches += launch_rows(self.case, reply.launches)
        base_name = self.run.baseline.name
        if base_name in self.failed:  # nothing to compare with: the case cannot be timed
            raise HostDied(f"the baseline {base_name} failed its gate: {self.failed[base_name]}")
        checks, changed = [], {}
        # Each revision's outputs against the baseline revision's under the workload's float64
        # tolerance and, on the first set, against the reference; the baseline's are read once.
        subject, revisions = self.run.subject, self.run.revisions
        assert isinstance(subject, WorkloadSubject) and revisions is not None  # hosted: a workload's revisions
        rule, rtol = Rule("tolerance", rtol=subject.reference_rtol), subject.reference_rtol
        base = [self._saved(self.run.baseline.name, k) for k in range(self.sets)]
        ref = self._saved("reference", 0)
        for leg in self.run.legs:
            if leg.name in self.failed or leg.has(Role.BASELINE) or not leg.revision:
                continue
            for k in range(self.sets):
                res = compare(self._saved(leg.name, k), base[k], ref if k == 0 else None, rule, rtol)
                checks.append(check_row(self.case, leg.name, -1, k, res))
                if not res.passed:
                    if revisions.allow_changed_outputs:
                        changed[leg.name] = res.detail
                    else:
                        self.fail(leg.name, f"outputs changed: {res.detail} (--allow-changed-outputs times it anyway)")
                    break
        # The saved outputs served this comparison alone (a race check compares within a host):
        # a large state per leg and buffer set is not kept in the run folder.
        case_outputs = outputs_file(self.folder.root, self.case_index, "", 0).parent
        shutil.rmtree(case_outputs, ignore_errors=True)
        with contextlib.suppress(OSError):  # the folder of every case's outputs, once none is left
            case_outputs.parent.rmdir()
        self.folder.write_part("checks", self.case_index, None, pd.DataFrame(checks))
        if launches:
            self.folder.write_part("launches", self.case_index, None, pd.DataFrame(launches))
        return changed

    def plan_memory(self, plan: MemoryPlan) -> MemoryPlan:
        """The other hosts fitted to the GPU's free memory, said in one line: as planned, or with
        fewer buffer sets a host (the baseline's host drops the rest), or refused before they allocate."""
        if plan.fits():
            self.on_event(Note(text=f"{self.case}: {plan.line()}"))
            return plan
        sets = plan.sets_that_fit()
        if sets == 0:
            raise HostDied(plan.refusal())
        trimmed = self.hosts[self.base_key].ask(Trim(sets=sets))
        self.sets = trimmed.sets
        self.on_event(Note(text=f"{self.case}: {plan.fitted(sets, trimmed.held_bytes, trimmed.free_bytes)}"))
        return MemoryPlan(plan.hosts, trimmed.held_bytes, trimmed.free_bytes, trimmed.sets)

    def _saved(self, leg: str, k: int) -> dict[str, Any]:
        return _load(outputs_file(self.folder.root, self.case_index, leg, k))

    def item(self, i: int, r: int) -> Item:
        return i, r % self.sets

    @property
    def recaptures(self) -> bool:
        """Each host captures its leg afresh when asked to time it (``--captures per-round``)."""
        return self.run.protocol.captures == "per-round"

    def start_round(self, items: list[Item], r: int) -> None:
        """Nothing: each host captures its leg afresh when asked to time it (``recaptures``)."""

    def time_round(self, items: list[Item], samples: int) -> dict[Item, list[Sample]]:
        times = {}
        for i, k in items:
            leg = self.timed[i]
            ask = Time(items=[(leg.name, k)], samples=samples, kernel_time=self.kernel_time, recapture=self.recaptures)
            reply = self.hosts[leg.revision or ""].ask(ask)
            times[(i, k)], self.label = samples_of(self.case, reply.times[0]), reply.label
        return times

    def conditions(self) -> dict[str, Any]:
        return self.hosts[self.base_key].ask(ReadConditions()).conditions

    def race(self, items: list[Item], r: int) -> list[dict[str, Any]]:
        k = items[0][1]
        rows = []
        for key, host in self.hosts.items():
            mine = [(leg.name, k) for leg in self.timed if leg.revision == key]
            if mine:
                rows += host.ask(RaceCheck(items=mine, round=r)).rows
        return rows

    def leg_name(self, item: Item) -> str:
        return self.timed[item[0]].name

    def finish(self, rounds: dict[int, list[Item]]) -> None:
        """Nothing: the case's status is the caller's (a host that died fails the case there)."""


def execute_hosted(folder: RunFolder, on_event: Callable[[Event], None]) -> None:
    """Revision runs: every case with one leg host per revision tree (kprof.engine.hosted), all of
    a case's hosts pinned to one GPU; with ``--gpus`` the cases are sharded as worker cases are."""
    run = folder.read_run()
    bench = run.revisions.benchmark if run.revisions is not None else None
    if bench is not None and not bench.in_tree:
        check_unchanged(bench)
    pending = folder.unfinished_cases(run)
    if pending:
        say_refused(run, on_event)

    def one(index: int, gpu: int | None, events: Callable[[Event], None], live: Workers) -> None:
        case = run.case_names[index]
        try:
            run_hosted_case(folder, index, events, gpu, live)
        except HostDied as e:
            if live.stopped:  # interrupted: the hosts were stopped, nothing is to blame
                return
            folder.update_case(case, status="failed", reason=str(e))
            events(CaseFailed(case=case, reason=str(e)))
            return
        folder.update_case(case, status="done")

    shard_cases(run, pending, on_event, one)
