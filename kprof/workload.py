"""The workload API: how a kernel family tells kprof what to run, switch, check and count.

A workload declares **features** (named switches, each with the exactness it promises), **cases**
grouped in named **presets** (``smoke`` small enough for the CPU interpreter, ``pr`` the realistic
sweep), and implements ``setup`` (allocate one buffer set for a case), ``launch`` (a zero-argument
callable that runs the kernel(s) for a feature set), ``outputs``, a float64 ``reference`` and the
bytes/flops of one call. Bundled workloads live in ``kprof_kernels/``; a user's file defines
``WORKLOAD = MyWorkload()`` the same way (see docs/workloads.md).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kprof.errors import KprofInputError

EXACTNESS = ("bitwise", "ulp", "tolerance")


def exactness_text(kind: str, ulps: int = 0, rtol: float = 0.0) -> str:
    """``bitwise``, ``≤ 2 ulp`` or ``rel ≤ 0.01``: how a rule is printed everywhere."""
    return {"bitwise": "bitwise", "ulp": f"≤ {ulps} ulp", "tolerance": f"rel ≤ {rtol:g}"}[kind]


@dataclass(frozen=True)
class Feature:
    """A switch. ``exactness`` is what turning it on promises against the baseline's outputs:
    ``bitwise`` (same bytes), ``ulp`` (within ``ulps`` units in the last place), or ``tolerance``
    (max relative error ≤ ``rtol`` — for legs that reorder a reduction)."""

    name: str
    exactness: str = "bitwise"
    ulps: int = 0
    rtol: float = 0.0
    doc: str = ""

    def __post_init__(self) -> None:
        if self.exactness not in EXACTNESS:
            raise ValueError(f"feature {self.name}: exactness must be one of {EXACTNESS}")

    @property
    def exactness_text(self) -> str:
        return exactness_text(self.exactness, self.ulps, self.rtol)


@dataclass(frozen=True)
class Case:
    """One shape/parameter point. ``params`` are passed to ``setup``; names are unique per workload."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Sweep:
    """A parameter that ``--sweep`` may force (dose-response), with the values it accepts and what a
    value means for a case (``columns``: e.g. tokens per split and loop trips, printed beside it)."""

    name: str
    doc: str = ""
    valid: Callable[[Case, Any], bool] = lambda case, value: True
    columns: Callable[[Case, Any], dict[str, Any]] = lambda case, value: {}


class Workload(ABC):
    """Base class of every workload. Buffers returned by ``setup`` belong to kprof until the run ends."""

    name: str = ""
    description: str = ""
    features: tuple[Feature, ...] = ()
    presets: Mapping[str, tuple[Case, ...]] = {}
    sweeps: tuple[Sweep, ...] = ()
    #: tolerance of the float64 reference check: max |out − ref| / max |ref| per output.
    reference_rtol: float = 2e-2

    @abstractmethod
    def setup(self, case: Case, device: str, dtype: str, seed: int) -> Any:
        """Allocate inputs (seeded random data) and outputs for one buffer set."""

    @abstractmethod
    def launch(self, state: Any, features: frozenset[str], params: Mapping[str, Any]) -> Callable[[], None]:
        """A zero-argument callable running the workload with ``features`` on; ``params`` are forced sweep values."""

    @abstractmethod
    def outputs(self, state: Any) -> dict[str, Any]:
        """The tensors a launch writes (poisoned before a checked launch, compared after)."""

    @abstractmethod
    def reference(self, state: Any) -> dict[str, Any]:
        """float64 reference values of ``outputs`` for this buffer set's inputs."""

    def launch_torch(self, state: Any) -> Callable[[], None] | None:
        """The plain-PyTorch implementation a user would otherwise write, timed as the "plain PyTorch"
        leg in the same rounds (None: the workload has none)."""
        return None

    def reset(self, state: Any) -> None:  # noqa: B027 - optional hook; most workloads update nothing in place
        """Restore buffers a launch updates in place (state pools) to their initial contents.

        kprof calls it before every checked launch, so all legs start from the same state."""

    def bytes_per_call(self, case: Case) -> dict[str, int]:
        """Bytes one call moves, by convention name (e.g. {"logical": …, "unique": …})."""
        return {}

    def flops_per_call(self, case: Case) -> int:
        return 0

    # -- helpers shared by every workload ---------------------------------------------------------

    def feature(self, name: str, option: str = "--features") -> Feature:
        for f in self.features:
            if f.name == name:
                return f
        raise KprofInputError(option, f"{self.name} has no feature {name!r} (has: {', '.join(self.feature_names)})")

    @property
    def has_torch_implementation(self) -> bool:
        return type(self).launch_torch is not Workload.launch_torch

    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features)

    def cases(self, preset: str) -> tuple[Case, ...]:
        if preset not in self.presets:
            raise KprofInputError("--preset", f"{self.name} has no preset {preset!r} (has: {sorted(self.presets)})")
        return self.presets[preset]

    def sweep(self, name: str) -> Sweep:
        for s in self.sweeps:
            if s.name == name:
                return s
        have = [s.name for s in self.sweeps] or "none"
        raise KprofInputError("--sweep", f"{self.name} cannot force {name!r} (sweepable: {have})")


def bundled_names() -> list[str]:
    """Every family folder of the ``kprof_kernels`` package that has a ``workload`` module: adding a
    family is adding its folder."""
    import kprof_kernels

    return sorted(
        info.name
        for info in pkgutil.iter_modules(kprof_kernels.__path__)
        if info.ispkg and importlib.util.find_spec(f"kprof_kernels.{info.name}.workload") is not None
    )


def check_spec(spec: str) -> None:
    """A one-line error, at once and before torch is imported, for a workload that is neither a
    bundled name nor an existing .py file (a mistyped name once took 16 s to be refused)."""
    if spec in bundled_names():
        return
    path = Path(spec)
    if path.suffix != ".py":
        raise KprofInputError(spec, f"not a bundled workload ({', '.join(bundled_names())}) nor a .py file")
    if not path.is_file():
        raise KprofInputError(spec, "no such file")


def load_workload(spec: str) -> Workload:
    """A bundled name (``paged_decode``) or a path to a Python file that defines ``WORKLOAD``."""
    check_spec(spec)
    if spec in bundled_names():
        return importlib.import_module(f"kprof_kernels.{spec}.workload").WORKLOAD
    path = Path(spec)
    module_name = f"kprof_user_workload_{abs(hash(path.resolve()))}"
    loader = importlib.util.spec_from_file_location(module_name, path)
    if loader is None or loader.loader is None:
        raise KprofInputError(spec, "cannot be imported as a Python module")
    module = importlib.util.module_from_spec(loader)
    sys.modules[module_name] = module
    try:
        loader.loader.exec_module(module)
    except Exception as e:  # a user's file: report its error in one line
        raise KprofInputError(spec, f"failed to import: {type(e).__name__}: {e}") from None
    workload = getattr(module, "WORKLOAD", None)
    if not isinstance(workload, Workload):
        raise KprofInputError(spec, "defines no WORKLOAD = <kprof.workload.Workload instance>")
    return workload
