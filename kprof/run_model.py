"""The typed model of a run: what was asked for (legs with roles, cases, protocol) and how far it got.

This is the one place that turns a run into ``meta.json`` and back. The engine writes it, the
analysis and the reports read it; nobody handles the raw dict. The format is versioned: a reader
of an older folder migrates it here, so every stored run keeps loading.

History of ``RUN_FORMAT_VERSION`` (``run_format_version`` in meta.json):
  1 (kprof 0.1, sessions 1–3): flat dict. ``cases`` a list of names, with ``case_params``,
    ``bytes_per_call``, ``flops_per_call`` and ``sweep_columns`` as dicts keyed by case name;
    whole-program runs marked ``"mode": "program"``, their legs carrying ``env``.
  2 (kprof 0.2): ``kind`` (``workload`` or ``program``) instead of ``mode``; ``cases`` a list of
    objects (name, params, bytes_per_call, flops_per_call, sweep_columns); every leg has ``env``;
    roles are the names of :class:`Role`. Version 1 folders are migrated on read
    (:func:`migrate`), never rewritten.
  3 (kprof 0.3): revision runs take the benchmark from where the user keeps it: ``benchmark``
    (its absolute ``path``, ``sha256``, and ``in_tree``, the path inside each tree with
    ``--in-tree``); ``workload_in_tree`` is then only set for bundled names and ``--in-tree``;
    ``paths`` (``--paths``) and ``left_out`` (the range's commits they left out); whole programs
    add ``step_pattern`` (``--steps``) and ``metric`` (``--metric``). Version 2 folders read as they
    are: every new key has a default that means what those runs did (a benchmark inside each tree).
  4 (kprof 0.3, session 2026-12-04): ``protocol`` (rounds, samples, buffer_sets, buffers,
    processes, timer_mode, captures) and ``placement`` (device, gpus, ray) are objects of their own;
    meta.json is written once, when the run is made, and read by msgspec, types checked (a string
    where a number belongs is an error naming the field). Each case's status is its own file
    (``status/cNNN.json``), so meta.json holds none (an empty ``case_status`` in folders written
    before 2026-12-07; the plan and the statuses are separate types), and what the run finds out
    while it runs is ``state.json`` (:class:`RunState`). A folder of versions 1–3 is migrated on read
    (:func:`migrate`): its flat keys are grouped, its statuses stay in meta.json, and what it lacks
    gets the value those runs had, said here once: ``timer_mode`` events and ``captures`` once
    (folders from before those choices), ``workload_name`` its workload; a null where a value is
    required reads as the field's default. Older kprof refuses a version 4 folder (it would miss
    the statuses).
  5 (kprof 0.3, session 2026-12-05): what is measured is one typed ``subject``, a workload
    (:class:`WorkloadSubject`: ``spec``, ``name``, ``reference_rtol``, ``in_tree``) or a program
    (:class:`ProgramSubject`: ``command``, ``name``, ``step_pattern``, ``metric``), tagged by
    ``kind``; a revision run adds ``revisions`` (:class:`RevisionSet`: ``repo``, ``trees``,
    ``commits``, ``benchmark``, ``paths``, ``left_out``, ``setup_command``,
    ``allow_changed_outputs``), null otherwise. A version 4 folder's flat keys (``kind``,
    ``workload``, ``workload_name``, ``program``, ``step_pattern``, ``metric``, ``reference_rtol``,
    ``workload_in_tree``, and the revision keys, ``revisions`` then the trees) are grouped on read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import Any, NamedTuple

import msgspec

from kprof import defaults
from kprof.errors import KprofInputError

RUN_FORMAT_VERSION = 5


class Role(str, Enum):
    """Why a leg is in the run. A leg may have several (the baseline is also a factorial cell)."""

    BASELINE = "baseline"  # the reference every effect is measured against
    TARGET = "target"  # every lever of the change on
    ADD_ONE = "add_one"  # baseline + one lever
    LEAVE_ONE_OUT = "leave_one_out"  # target − one lever ("revert one commit")
    FACTORIAL = "factorial"  # a cell of the full 2^n design
    SWEEP = "sweep"  # the target with a parameter forced to a value
    SWEEP_BASELINE = "sweep_baseline"  # the baseline with the same value forced (mechanism sweeps)
    AA = "aa"  # the baseline again, set up and captured independently: the run's own noise and bias
    TORCH = "torch"  # the workload's plain-PyTorch implementation
    PLANTED = "planted"  # calibration: the reference plus a spin of known length
    SPIN = "spin"  # calibration: that spin alone (measures what was planted; not a comparison)
    LEG = "leg"  # a whole-program leg compared with the baseline process
    SEQUENCE = "sequence"  # a revision of a range as it was committed: compared with the one before it

    __hash__ = str.__hash__  # a role and its name are interchangeable as set members and dict keys


# Leg parameters that kprof handles itself (the rest are forced workload parameters).
IMPL = "impl"  # "torch": time the workload's plain-PyTorch implementation
PLANT = "plant_pct"  # the leg's work plus a spin of this percentage of the baseline time
SPIN_PARAM = "spin_pct"  # that spin alone
KPROF_PARAMS = (IMPL, PLANT, SPIN_PARAM)
# A program run's kernel case is the kernel's full name and this: a name every round and leg
# reports alike, so two instantiations of one template never share a case (tables show labels).
PER_CALL = " (per call)"


@dataclass(frozen=True)
class Leg:
    """One configuration timed in every round: a feature set with forced parameters, or a whole
    program with its environment."""

    name: str
    features: frozenset[str] = frozenset()
    params: tuple[tuple[str, Any], ...] = ()
    roles: frozenset[Role] = frozenset()
    replica: int = 0  # ≥ 1 for the A/A copies of the baseline
    env: tuple[tuple[str, str], ...] = ()  # whole-program legs: environment variables
    revision: str | None = None  # key into Run.revisions: the tree whose code this leg runs

    def has(self, role: Role) -> bool:
        return role in self.roles

    @property
    def is_comparison(self) -> bool:
        """Everything but the reference and the spins timed alone is compared with the baseline."""
        return not (self.has(Role.BASELINE) or self.has(Role.SPIN))

    @property
    def workload_params(self) -> dict[str, Any]:
        """Forced workload parameters (a sweep value), without kprof's own."""
        return {k: v for k, v in self.params if k not in KPROF_PARAMS}

    @property
    def plant(self) -> tuple[str, float] | None:
        """The planting instruction (``plant_pct`` or ``spin_pct`` and its percentage), if any."""
        for key, value in self.params:
            if key in (PLANT, SPIN_PARAM):
                return key, float(value)
        return None

    @property
    def is_torch(self) -> bool:
        return dict(self.params).get(IMPL) == "torch"

    def mask(self, order: Iterable[str]) -> int:
        return sum(1 << i for i, f in enumerate(order) if f in self.features)

    def record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "features": sorted(self.features),
            "params": [list(p) for p in self.params],
            "roles": sorted(r.value for r in self.roles),
            "replica": self.replica,
            "env": dict(self.env),
            "revision": self.revision,
        }

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> Leg:
        try:
            roles = frozenset(Role(r) for r in d.get("roles", ()))
        except ValueError as e:
            raise KprofInputError("meta.json", f"leg {d.get('name')!r}: unknown role ({e})") from None
        return cls(
            name=str(d["name"]),
            features=frozenset(d.get("features", ())),
            params=tuple((str(k), v) for k, v in d.get("params", ())),
            roles=roles,
            replica=int(d.get("replica", 0)),
            env=tuple((str(k), str(v)) for k, v in (d.get("env") or {}).items()),
            revision=d.get("revision"),
        )


@dataclass(frozen=True)
class FeatureRecord:
    """A workload feature as the run recorded it (kprof.workload.Feature without its behaviour)."""

    name: str
    exactness: str = "bitwise"
    ulps: int = 0
    rtol: float = 0.0
    doc: str = ""


@dataclass(frozen=True)
class CaseRecord:
    """One case of the run: its parameters and what a call moves and computes."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    bytes_per_call: dict[str, int] = field(default_factory=dict)
    flops_per_call: int = 0
    sweep_columns: dict[str, dict[str, Any]] = field(default_factory=dict)  # str(value) → columns
    repeats: str = ""  # --aa-across-gpus: this record is that case again, on ``gpu``
    gpu: int | None = None  # the GPU this case must run on (others go to whichever GPU is free)


@dataclass
class RevisionTree:
    """The code a revision leg runs: a tree in the cache (or why it could not be made)."""

    path: str | None
    base: str
    ops: list[list[str]] = field(default_factory=list)  # [["pick" | "revert", sha], …] applied to base
    worktree: bool = False
    refused: str = ""
    paths: list[str] = field(default_factory=list)  # --paths: each op applied only under these
    setup: dict[str, Any] = field(default_factory=dict)  # --setup: command, exit code, output tail


@dataclass(frozen=True)
class BenchmarkRecord:
    """The user's benchmark of a revision run (a workload file or a program's script): where it is,
    its SHA-256 when the run was planned, and, with --in-tree, its path inside each tree."""

    path: str
    sha256: str
    in_tree: str = ""


class WorkloadSubject(msgspec.Struct, tag="workload", tag_field="kind", kw_only=True):
    """A workload is measured: a bundled family or the user's workload file, its cases and levers."""

    spec: str  # a bundled family's name or the workload file's path, as the user gave it
    name: str  # the workload's own name (reports, the run folder's default name)
    reference_rtol: float = 2e-2  # its float64 tolerance (revision legs are held to it)
    in_tree: str = ""  # revision runs from before format 3: the workload file's path inside each tree


class ProgramSubject(msgspec.Struct, tag="program", tag_field="kind", kw_only=True):
    """A whole program is measured: a command line, each leg's process traced."""

    command: list[str]
    name: str  # the script (or executable) the command runs
    step_pattern: str = ""  # --steps: the step markers of each process's trace
    metric: str = ""  # --metric: the kernels (a regex) whose time per step is a case

    @property
    def spec(self) -> str:
        return " ".join(self.command)


Subject = WorkloadSubject | ProgramSubject


class RevisionSet(msgspec.Struct, kw_only=True):
    """The revisions a revision run's legs run: the repository, the tree of each leg, the commits
    (the levers of a range), the user's benchmark, and what --paths, --setup and
    --allow-changed-outputs asked for."""

    repo: str
    trees: dict[str, RevisionTree] = {}  # Leg.revision → the tree it runs
    commits: list[dict[str, Any]] = []
    benchmark: BenchmarkRecord | None = None  # the user's benchmark, where it is, its hash
    paths: list[str] = []  # --paths: only the range's commits that touch these
    left_out: list[dict[str, Any]] = []  # the commits --paths left out
    setup_command: str = ""  # --setup: run once in each revision's tree before timing
    allow_changed_outputs: bool = False


class RunState(msgspec.Struct, kw_only=True):
    """What a run found out while it ran (``state.json``; meta.json is written once, when the run
    is made): the timer's measurements (each GPU's under ``gpus``) with the timer's label, and the
    fields of revision trees changed after planning (a revision refused once, a tree made again)."""

    timer_info: dict[str, Any] | None = None
    timer: str | None = None
    revisions: dict[str, dict[str, Any]] = {}

    def apply(self, run: Run) -> None:
        if self.timer_info is not None:
            run.timer_info = self.timer_info
        if self.timer is not None:
            run.timer = self.timer
        for key, changed in self.revisions.items():
            tree = run.tree(key)
            for name, value in changed.items() if tree is not None else ():
                if name in ("path", "refused", "setup"):
                    setattr(tree, name, value)


@dataclass(frozen=True)
class Missing:
    """A case (``leg`` empty) or one leg of a case that the run did not measure, and why (no reason:
    the case has not finished). ``refused``: kprof left the leg out on purpose (its outputs differ,
    it does not compile, its revision cannot be made) — a finding, where the rest are failures."""

    case: str
    leg: str
    reason: str
    refused: bool = False

    @property
    def text(self) -> str:
        if self.leg:
            return f"{self.case} · {self.leg} not timed: {self.reason}"
        return f"case {self.case} failed: {self.reason}" if self.reason else f"case {self.case} has not finished"


class Sample(NamedTuple):
    """One timing of one leg in a round: the case it counts for (a whole program's trace gives
    several), its index among that case's samples of the leg in the round, and the time."""

    case: str
    sample: int
    time_ns: float


@dataclass
class CaseStatus:
    """How far a case got. ``status`` is empty while it runs, ``done`` or ``failed`` at the end."""

    status: str = ""
    reason: str = ""
    samples: int | None = None
    failed: dict[str, str] = field(default_factory=dict)  # leg → why it was not timed
    crashed_legs: list[str] = field(default_factory=list)  # legs that took their worker down (twice)
    deaths: list[dict[str, Any]] = field(default_factory=list)  # each worker death: step, leg, reason, signal
    no_op_legs: list[str] = field(default_factory=list)  # legs that launch exactly what the baseline does
    legs_timed: list[str] = field(default_factory=list)
    baseline_warmup_ns: float | None = None
    timer: str = ""  # the timer of this case's samples (kernel times for small cases, events above)
    kernel_time: bool = False  # the first process timed by kernel time: a later process times alike
    failures: dict[str, str] = field(default_factory=dict)  # a whole program's "LEG round R" → why that process failed
    crash_reasons: dict[str, str] = field(default_factory=dict)  # a crashed leg → its worker's last words
    changed_outputs: dict[str, str] = field(default_factory=dict)  # revisions timed although their outputs changed
    spin_ladder: dict[str, Any] | None = None  # how a calibration's planted spins were sized
    gpu: str | int | None = None  # where the case ran (a host GPU, or a Ray node's)
    device_name: str | None = None
    device_uuid: str | None = None

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed")

    def record(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: v for k, v in out.items() if v not in (None, "", [], {}, False)}

    @classmethod
    def from_record(cls, d: Any, where: str = "meta.json") -> CaseStatus:
        """A stored status; keys this kprof does not know are left out (a folder of an older kprof
        kept a crashed leg's reason as ``crash:LEG``)."""
        if not isinstance(d, dict):
            raise KprofInputError(where, f"holds a case status that is not a JSON object ({type(d).__name__})")
        known = {f.name for f in fields(cls)}
        status = cls(**{k: v for k, v in d.items() if k in known})
        status.crash_reasons.update({k.removeprefix("crash:"): v for k, v in d.items() if k.startswith("crash:")})
        for name, kind in _STATUS_TYPES.items():
            if not isinstance(getattr(status, name), kind):
                raise KprofInputError(
                    where, f"holds a case status whose {name} is a {type(getattr(status, name)).__name__}"
                )
        return status


_STATUS_TYPES: dict[str, type | tuple[type, ...]] = {
    "status": str,
    "reason": str,
    "failed": dict,
    "crashed_legs": list,
    "deaths": list,
    "no_op_legs": list,
    "legs_timed": list,
    "timer": str,
    "failures": dict,
    "crash_reasons": dict,
    "changed_outputs": dict,
}


@dataclass
class CaseStatuses:
    """How far each case of a run got (``status/cNNN.json``): what changes while the run runs,
    kept apart from the plan (:class:`Run`, written once)."""

    by_case: dict[str, CaseStatus] = field(default_factory=dict)

    def of(self, case: str) -> CaseStatus:
        """The case's status as stored (a case that has not started has an empty one)."""
        return self.by_case.get(case) or CaseStatus()

    def items(self) -> Iterable[tuple[str, CaseStatus]]:
        return self.by_case.items()

    def records(self) -> dict[str, dict[str, Any]]:
        return {case: status.record() for case, status in self.by_case.items()}

    def missing(self, cases: list[str]) -> list[Missing]:
        """What the plan's ``cases`` hold and the folder does not: cases that failed or have not
        finished, legs not timed (a correctness refusal, a revision that cannot run, a leg that
        killed its worker)."""
        out = []
        for case in cases:
            status = self.of(case)
            if status.status != "done":
                failed = status.status == "failed"
                out.append(Missing(case, "", (status.reason or "no reason kept") if failed else ""))
                continue
            out += [Missing(case, leg, reason, refused=True) for leg, reason in status.failed.items()]
            out += [
                Missing(case, leg, f"its worker died twice: {status.crash_reasons.get(leg, 'no reason kept')}")
                for leg in status.crashed_legs
            ]
        return out


def meta_record(text: str, where: str = "meta.json") -> Any:
    """meta.json's JSON value, or a one-line error naming the file."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise KprofInputError(where, f"is not valid JSON ({e})") from None
    except RecursionError:
        raise KprofInputError(where, "nests values too deeply to be a kprof run description") from None


@dataclass
class Protocol:
    """How every case is timed: rounds, samples, buffers, processes, captures and the timer."""

    rounds: int
    samples: int | None = None  # requested cold samples per leg per round (None: sized per case)
    buffer_sets: int = defaults.BUFFER_SETS
    buffers: str = defaults.BUFFERS  # or "per-leg" (the PR method)
    processes: int = 1  # worker processes per case, one after another (kprof.parts)
    timer_mode: str = (
        defaults.TIMER_MODE
    )  # events, kernel-time, or auto: kernel times below the size the self-check measures
    captures: str = defaults.CAPTURES  # graphs captured afresh every round, or once per run (folders from before: once)

    @property
    def total_rounds(self) -> int:
        """Every round a case has on disk: the timed rounds and each process's burn-in round."""
        return self.rounds + self.processes


@dataclass
class Placement:
    """Where the cases run: the device, the host GPUs they are sharded over, or a Ray cluster."""

    device: str = "cpu"
    gpus: list[int] = field(default_factory=list)  # --gpus: cases sharded over these host GPUs (worker slots on a CPU)
    ray: str | None = None  # --ray: cases as Ray tasks on this cluster ("auto" or an address)


@dataclass
class Run:
    """A run folder's meta.json, typed."""

    subject: Subject  # what is measured: a workload or a program
    legs: list[Leg]
    cases: list[CaseRecord]
    protocol: Protocol
    placement: Placement = field(default_factory=lambda: Placement())
    seed: int = defaults.SEED
    threshold_pct: float = defaults.THRESHOLD_PCT
    between_runs_pct: float = defaults.BETWEEN_RUNS_PCT  # --between-runs: a known SD between fresh runs
    dtype: str = ""
    design: str = ""
    preset: str = ""
    command: str = ""
    collector: str = "events"
    features: list[FeatureRecord] = field(default_factory=list)
    sweep: tuple[str, list[Any]] | None = None
    revisions: RevisionSet | None = None  # revision runs: the code each leg runs
    timer: str | None = None
    timer_info: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    git_revision: str | None = None
    git_dirty: bool | None = None
    started: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # keys this version does not model, kept as read

    # -- the subject --------------------------------------------------------------------------

    @property
    def is_program(self) -> bool:
        return isinstance(self.subject, ProgramSubject)

    def tree(self, key: str | None) -> RevisionTree | None:
        """The revision tree a leg's ``revision`` key names (None: not a revision run, or no such tree)."""
        return self.revisions.trees.get(key or "") if self.revisions is not None else None

    # -- the legs by role ---------------------------------------------------------------------

    @property
    def baseline(self) -> Leg:
        """The reference leg. Every run has exactly one; its name is whatever the user chose."""
        return next(leg for leg in self.legs if leg.has(Role.BASELINE))

    @property
    def aa_legs(self) -> list[Leg]:
        return [leg for leg in self.legs if leg.has(Role.AA)]

    def with_role(self, role: Role) -> list[Leg]:
        return [leg for leg in self.legs if leg.has(role)]

    def leg(self, name: str) -> Leg:
        for leg in self.legs:
            if leg.name == name:
                return leg
        raise KeyError(name)

    @property
    def lever_names(self) -> list[str]:
        return [f.name for f in self.features]

    @property
    def case_names(self) -> list[str]:
        return [c.name for c in self.cases]

    def case(self, name: str) -> CaseRecord:
        return next(c for c in self.cases if c.name == name)

    @property
    def device_timed(self) -> bool:
        return self.placement.device != "cpu"

    @property
    def timer_label(self) -> str:
        return self.timer or (
            "host-clock (CPU, Triton interpreter: not device time)" if self.placement.device == "cpu" else "cuda-events"
        )

    @property
    def bytes_per_call(self) -> dict[str, dict[str, int]]:
        return {c.name: c.bytes_per_call for c in self.cases}

    # -- meta.json ----------------------------------------------------------------------------

    def record(self) -> dict[str, Any]:
        """meta.json's content: every field by msgspec, the legs in their own form (the cases'
        statuses are files of their own: :class:`CaseStatuses`)."""
        plain = msgspec.to_builtins(replace(self, legs=[], extra={}), enc_hook=_plain)
        del plain["extra"]
        plain.update(legs=[leg.record() for leg in self.legs])
        return {**self.extra, "run_format_version": RUN_FORMAT_VERSION, **plain}

    def to_json(self) -> str:
        return json.dumps(self.record(), indent=2, default=str) + "\n"

    @classmethod
    def from_record(cls, raw: Any, where: str = "meta.json") -> Run:
        if not isinstance(raw, dict):
            raise KprofInputError(
                where, f"is not a kprof run description (a JSON object was expected, got {type(raw).__name__})"
            )
        if raw.get("command") == "trace":
            raise KprofInputError(where, "is a `kprof trace --save` folder's, not a run's: query it with kprof sql")
        try:
            d = migrate(raw, where)
            legs = [Leg.from_record(x) for x in d["legs"]]
            typed = {k: v for k, v in d.items() if k in _TYPED}
            run = msgspec.convert({**typed, "legs": []}, type=cls)
        except msgspec.ValidationError as e:
            raise KprofInputError(where, f"is not a kprof run description ({e})") from None
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
            raise KprofInputError(where, f"is not a kprof run description ({type(e).__name__}: {e})") from None
        if not (math.isfinite(run.threshold_pct) and run.threshold_pct >= 0):
            raise KprofInputError(where, f"holds threshold_pct {run.threshold_pct}: a threshold is a percent ≥ 0")
        if not defaults.is_between_runs(run.between_runs_pct):
            raise KprofInputError(where, f"holds between_runs_pct {run.between_runs_pct}: an SD in percent ≥ 0")
        run.legs = legs
        run.extra = {k: v for k, v in d.items() if k not in _MODELLED}
        if sum(leg.has(Role.BASELINE) for leg in run.legs) != 1:
            raise KprofInputError(where, "a run needs exactly one leg with the baseline role")
        return run

    @classmethod
    def from_json(cls, text: str, where: str = "meta.json") -> Run:
        return cls.from_record(meta_record(text, where), where)

    def updated(self, **changes: Any) -> Run:
        return replace(self, **changes)


# case_status: where a folder of versions 1–3 kept its statuses (RunFolder reads them)
_MODELLED = {f.name for f in fields(Run)} | {"run_format_version", "case_status"}
_TYPED = _MODELLED - {"run_format_version", "legs", "case_status", "extra"}  # converted by msgspec


def _plain(value: Any) -> Any:
    """What msgspec cannot write as it is (a numpy scalar a measurement left): its Python value."""
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


def migrate(raw: dict[str, Any], where: str = "meta.json") -> dict[str, Any]:
    """Bring a meta.json dict of any known version to the current one (see the history above)."""
    version = raw.get("run_format_version", 1)
    if not isinstance(version, int) or version < 1:
        raise KprofInputError(where, f"run_format_version {version!r} is not a version kprof wrote")
    if version > RUN_FORMAT_VERSION:
        raise KprofInputError(
            where, f"written by a newer kprof (run format {version}; this kprof reads up to {RUN_FORMAT_VERSION})"
        )
    d = dict(raw)
    if version == 1:
        d = _from_v1(d)
    if version < 4:
        d = _before_v4(d)
    if version < 5:
        d = _before_v5(d)
    return d


# Keys a version 1–3 folder kept at the top level that version 4 groups.
_PROTOCOL_KEYS = ("rounds", "samples", "buffer_sets", "buffers", "processes", "timer_mode", "captures")
_PLACEMENT_KEYS = ("device", "gpus", "ray")
# Values of a version 1–3 folder that its kprof filled in when a key was missing (see the history).
_LEGACY = {"timer_mode": "events", "captures": "once"}


def _before_v4(d: dict[str, Any]) -> dict[str, Any]:
    """Versions 1–3 → 4: what an older folder lacks, as its kprof read it; nulls where a value is
    required become the field's default."""
    optional = {"samples", "sweep", "ray", "repo", "benchmark", "timer", "git_revision", "git_dirty"}
    d = {k: v for k, v in d.items() if v is not None or k in optional}
    for key, value in _LEGACY.items():
        d.setdefault(key, value)
    for group, names in (("protocol", _PROTOCOL_KEYS), ("placement", _PLACEMENT_KEYS)):
        d[group] = {k: d.pop(k) for k in names if k in d}
    if not d.get("workload_name"):
        d["workload_name"] = d.get("workload")
    d["run_format_version"] = RUN_FORMAT_VERSION
    return d


# Keys a version 1–4 folder kept at the top level that version 5 groups (see the history).
_REVISION_KEYS = ("repo", "commits", "benchmark", "paths", "left_out", "setup_command", "allow_changed_outputs")
_SUBJECT_KEYS = {
    "workload": {
        "workload": "spec",
        "workload_name": "name",
        "reference_rtol": "reference_rtol",
        "workload_in_tree": "in_tree",
    },
    "program": {"program": "command", "workload_name": "name", "step_pattern": "step_pattern", "metric": "metric"},
}


def _before_v5(d: dict[str, Any]) -> dict[str, Any]:
    """Versions 1–4 → 5: the subject's keys and the revision keys grouped; a run without revision
    trees has no revision set."""
    kind = d.pop("kind", "workload")
    if kind not in _SUBJECT_KEYS:
        raise ValueError(f"kind {kind!r} is neither workload nor program")
    subject = {new: d[old] for old, new in _SUBJECT_KEYS[kind].items() if d.get(old) is not None}
    if kind == "program" and not subject.get("command"):  # version 1 kept the command line alone
        subject["command"] = str(d.get("workload", "")).split()
    for old in {k for keys in _SUBJECT_KEYS.values() for k in keys}:
        d.pop(old, None)
    revision = {k: d.pop(k) for k in _REVISION_KEYS if k in d}
    trees = d.pop("revisions", None)
    revision = {k: v for k, v in revision.items() if v is not None}
    d["subject"] = {"kind": kind, **subject}
    d["revisions"] = {**revision, "repo": revision.get("repo") or ".", "trees": trees} if trees else None
    d["run_format_version"] = RUN_FORMAT_VERSION
    return d


def _from_v1(d: dict[str, Any]) -> dict[str, Any]:
    """Version 1 → 2: per-case dicts folded into case objects; ``mode`` → ``kind``; legs get ``env``."""
    names = d.get("cases")
    if not isinstance(names, list):
        raise KeyError("cases")
    params = d.pop("case_params", None) or {}
    nbytes = d.pop("bytes_per_call", None) or {}
    flops = d.pop("flops_per_call", None) or {}
    columns = d.pop("sweep_columns", None) or {}
    d["cases"] = [
        {
            "name": str(n),
            "params": dict(params.get(n) or {}),
            "bytes_per_call": dict(nbytes.get(n) or {}),
            "flops_per_call": int(flops.get(n) or 0),
            "sweep_columns": dict(columns.get(n) or {}),
        }
        for n in names
    ]
    d["kind"] = "program" if d.pop("mode", None) == "program" else "workload"
    d["legs"] = [dict(leg, env=leg.get("env") or {}) for leg in d["legs"]]
    d["run_format_version"] = RUN_FORMAT_VERSION
    return d
