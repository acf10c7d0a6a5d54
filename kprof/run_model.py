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
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields, replace
from enum import Enum
from typing import Any

from kprof.errors import KprofInputError

RUN_FORMAT_VERSION = 3


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
    setup: dict[str, Any] = field(default_factory=dict)  # --setup: command, exit code, output tail


@dataclass(frozen=True)
class BenchmarkRecord:
    """The user's benchmark of a revision run (a workload file or a program's script): where it is,
    its SHA-256 when the run was planned, and, with --in-tree, its path inside each tree."""

    path: str
    sha256: str
    in_tree: str = ""


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
    extra: dict[str, Any] = field(default_factory=dict)  # anything else a stage recorded

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed")

    def record(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**{k: v for k, v in out.items() if v not in (None, "", [], {})}, **self.extra}

    @classmethod
    def from_record(cls, d: Any, where: str = "meta.json") -> CaseStatus:
        if not isinstance(d, dict):
            raise KprofInputError(where, f"holds a case status that is not a JSON object ({type(d).__name__})")
        known = {f.name for f in fields(cls)} - {"extra"}
        status = cls(**{k: v for k, v in d.items() if k in known}, extra={k: v for k, v in d.items() if k not in known})
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
}


@dataclass
class Run:
    """A run folder's meta.json, typed."""

    kind: str  # "workload" or "program"
    workload: str  # bundled name, a .py path, or the program's command line
    workload_name: str
    legs: list[Leg]
    cases: list[CaseRecord]
    rounds: int
    seed: int = 0
    threshold_pct: float = 0.5
    device: str = "cpu"
    dtype: str = ""
    design: str = ""
    preset: str = ""
    command: str = ""
    collector: str = "events"
    features: list[FeatureRecord] = field(default_factory=list)
    sweep: tuple[str, list[Any]] | None = None
    samples: int | None = None  # requested cold samples per leg per round (None: sized per case)
    buffer_sets: int = 4
    buffers: str = "shared"  # or "per-leg" (the PR method)
    processes: int = 1  # worker processes per case, one after another (kprof.parts)
    ray: str | None = None  # --ray: cases as Ray tasks on this cluster ("auto" or an address)
    gpus: list[int] = field(default_factory=list)  # --gpus: cases sharded over these host GPUs (worker slots on a CPU)
    timer_mode: str = "auto"  # events, kernel-time, or auto: kernel times below the size the self-check measures
    captures: str = "per-round"  # graphs captured afresh every round, or once per run (folders from before: once)
    program: list[str] = field(default_factory=list)
    repo: str | None = None  # revision runs: the repository, the commits and the tree of each leg
    commits: list[dict[str, Any]] = field(default_factory=list)
    revisions: dict[str, RevisionTree] = field(default_factory=dict)
    workload_in_tree: str = ""  # the workload as each tree names it (module or path in the repository)
    allow_changed_outputs: bool = False
    setup_command: str = ""  # --setup: run once in each revision's tree before timing
    benchmark: BenchmarkRecord | None = None  # revision runs: the user's benchmark, where it is, its hash
    paths: list[str] = field(default_factory=list)  # --paths: only the range's commits that touch these
    left_out: list[dict[str, Any]] = field(default_factory=list)  # the commits --paths left out
    step_pattern: str = ""  # whole programs: --steps, the step markers of each process's trace
    metric: str = ""  # whole programs: --metric, the kernels (a regex) whose time per step is a case
    reference_rtol: float = 2e-2  # the workload's float64 tolerance (revision legs are held to it)
    timer: str | None = None
    timer_info: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    git_revision: str | None = None
    git_dirty: bool | None = None
    started: str = ""
    case_status: dict[str, CaseStatus] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # keys this version does not model, kept as read

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

    def status(self, case: str) -> CaseStatus:
        """The case's status as stored (a case that has not started has an empty one); reading it
        changes nothing."""
        return self.case_status.get(case) or CaseStatus()

    def missing(self) -> list[Missing]:
        """What the plan holds and the folder does not: cases that failed or have not finished, legs
        not timed (a correctness refusal, a revision that cannot run, a leg that killed its worker)."""
        out = []
        for case in self.case_names:
            status = self.status(case)
            if status.status != "done":
                failed = status.status == "failed"
                out.append(Missing(case, "", (status.reason or "no reason kept") if failed else ""))
                continue
            out += [Missing(case, leg, reason, refused=True) for leg, reason in status.failed.items()]
            out += [
                Missing(case, leg, f"its worker died twice: {status.extra.get(f'crash:{leg}', 'no reason kept')}")
                for leg in status.crashed_legs
            ]
        return out

    @property
    def device_timed(self) -> bool:
        return self.device != "cpu"

    @property
    def timer_label(self) -> str:
        return self.timer or (
            "host-clock (CPU, Triton interpreter: not device time)" if self.device == "cpu" else "cuda-events"
        )

    @property
    def bytes_per_call(self) -> dict[str, dict[str, int]]:
        return {c.name: c.bytes_per_call for c in self.cases}

    # -- meta.json ----------------------------------------------------------------------------

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run_format_version": RUN_FORMAT_VERSION,
            "kind": self.kind,
            "command": self.command,
            "workload": self.workload,
            "workload_name": self.workload_name,
            "preset": self.preset,
            "design": self.design,
            "collector": self.collector,
            "device": self.device,
            "dtype": self.dtype,
            "rounds": self.rounds,
            "samples": self.samples,
            "buffer_sets": self.buffer_sets,
            "buffers": self.buffers,
            "processes": self.processes,
            "timer_mode": self.timer_mode,
            "captures": self.captures,
            "gpus": self.gpus,
            "ray": self.ray,
            "seed": self.seed,
            "threshold_pct": self.threshold_pct,
            "features": [asdict(f) for f in self.features],
            "sweep": list(self.sweep) if self.sweep else None,
            "cases": [asdict(c) for c in self.cases],
            "legs": [leg.record() for leg in self.legs],
            "program": self.program,
            "repo": self.repo,
            "commits": self.commits,
            "revisions": {k: asdict(v) for k, v in self.revisions.items()},
            "workload_in_tree": self.workload_in_tree,
            "allow_changed_outputs": self.allow_changed_outputs,
            "setup_command": self.setup_command,
            "benchmark": asdict(self.benchmark) if self.benchmark else None,
            "paths": self.paths,
            "left_out": self.left_out,
            "step_pattern": self.step_pattern,
            "metric": self.metric,
            "reference_rtol": self.reference_rtol,
            "timer": self.timer,
            "timer_info": self.timer_info,
            "versions": self.versions,
            "git_revision": self.git_revision,
            "git_dirty": self.git_dirty,
            "started": self.started,
            "case_status": {k: v.record() for k, v in self.case_status.items()},
        }
        return {**self.extra, **out}

    def to_json(self) -> str:
        return json.dumps(self.record(), indent=2, default=str) + "\n"

    @classmethod
    def from_record(cls, raw: Any, where: str = "meta.json") -> Run:
        if not isinstance(raw, dict):
            raise KprofInputError(
                where, f"is not a kprof run description (a JSON object was expected, got {type(raw).__name__})"
            )
        try:
            d = migrate(raw, where)
            legs = [Leg.from_record(x) for x in d["legs"]]
            cases = [CaseRecord(**c) for c in d["cases"]]
            features = [FeatureRecord(**f) for f in d.get("features") or []]
            status = {k: CaseStatus.from_record(v) for k, v in (d.get("case_status") or {}).items()}
            sweep = tuple(d["sweep"]) if d.get("sweep") else None
            modelled = {f.name for f in fields(cls)} | {"run_format_version"}
            run = cls(
                kind=d["kind"],
                workload=str(d["workload"]),
                workload_name=str(d.get("workload_name") or d["workload"]),
                legs=legs,
                cases=cases,
                rounds=int(d["rounds"]),
                seed=int(d.get("seed", 0)),
                threshold_pct=float(d.get("threshold_pct", 0.5)),
                device=str(d.get("device", "cpu")),
                dtype=str(d.get("dtype") or ""),
                design=str(d.get("design") or ""),
                preset=str(d.get("preset") or ""),
                command=str(d.get("command") or ""),
                collector=str(d.get("collector") or "events"),
                features=features,
                sweep=sweep,  # type: ignore[arg-type]
                samples=d.get("samples"),
                buffer_sets=int(d.get("buffer_sets") or 4),
                buffers=str(d.get("buffers") or "shared"),
                processes=int(d.get("processes") or 1),  # folders from before the choice: one process per case
                gpus=[int(g) for g in d.get("gpus") or []],
                ray=d.get("ray"),
                timer_mode=str(d.get("timer_mode") or "events"),  # folders from before the choice timed with events
                captures=str(d.get("captures") or "once"),  # folders from before the choice captured once
                program=list(d.get("program") or []),
                repo=d.get("repo"),
                commits=list(d.get("commits") or []),
                revisions={k: RevisionTree(**v) for k, v in (d.get("revisions") or {}).items()},
                workload_in_tree=str(d.get("workload_in_tree") or ""),
                allow_changed_outputs=bool(d.get("allow_changed_outputs", False)),
                setup_command=str(d.get("setup_command") or ""),
                benchmark=BenchmarkRecord(**d["benchmark"]) if d.get("benchmark") else None,
                paths=[str(p) for p in d.get("paths") or []],
                left_out=list(d.get("left_out") or []),
                step_pattern=str(d.get("step_pattern") or ""),
                metric=str(d.get("metric") or ""),
                reference_rtol=float(d.get("reference_rtol", 2e-2)),
                timer=d.get("timer"),
                timer_info=dict(d.get("timer_info") or {}),
                versions=dict(d.get("versions") or {}),
                git_revision=d.get("git_revision"),
                git_dirty=d.get("git_dirty"),
                started=str(d.get("started") or ""),
                case_status=status,
                extra={k: v for k, v in d.items() if k not in modelled},
            )
        except KprofInputError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
            raise KprofInputError(where, f"is not a kprof run description ({type(e).__name__}: {e})") from None
        if sum(leg.has(Role.BASELINE) for leg in run.legs) != 1:
            raise KprofInputError(where, "a run needs exactly one leg with the baseline role")
        return run

    @classmethod
    def from_json(cls, text: str, where: str = "meta.json") -> Run:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as e:
            raise KprofInputError(where, f"is not valid JSON ({e})") from None
        except RecursionError:
            raise KprofInputError(where, "nests values too deeply to be a kprof run description") from None
        return cls.from_record(raw, where)

    def updated(self, **changes: Any) -> Run:
        return replace(self, **changes)


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
