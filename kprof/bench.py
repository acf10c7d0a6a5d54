"""A benchmark in a few lines: a setup function, a function to time, cases as a dict.

    import torch
    from kprof.bench import Bench

    def setup(n, device, dtype):
        return {"x": torch.randn(n, device=device, dtype=getattr(torch, dtype))}

    def scale(s):
        return s["x"] * 2

    WORKLOAD = Bench("scale", setup, scale, cases={"small": {"n": 1024}, "large": {"n": 1 << 22}})

``kprof run bench.py`` times it as any workload (the same file over revisions, under ``--gpus``).
What the function returns is its output: tensors (one, or a tuple, list or dict of them) are
checked against the baseline's bitwise, any other Python value for equality; no float64 reference
is needed (``reference=`` gives one; the report says which check ran). ``features=`` names levers
the function takes as its second argument (the set of those on); ``reset=`` restores what a call
updates in place. The full-control interface is :class:`kprof.workload.Workload`.
"""

from __future__ import annotations

import inspect
import pickle
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kprof.workload import Case, Feature, Workload

RESULT = "_kprof_result"  # where the state keeps the last call's return value


class Bench(Workload):
    """A workload made of functions (see the module docstring)."""

    def __init__(
        self,
        name: str,
        setup: Callable[..., Any],
        call: Callable[..., Any],
        cases: Mapping[str, Mapping[str, Any]],
        *,
        features: Sequence[str | Feature] = (),
        reset: Callable[[Any], None] | None = None,
        reference: Callable[[Any], Any] | None = None,
        reference_rtol: float = 2e-2,
        description: str = "",
    ) -> None:
        self.name, self.description, self.reference_rtol = name, description, reference_rtol
        self._setup, self._call, self._reset, self._reference = setup, call, reset, reference
        self.features = tuple(f if isinstance(f, Feature) else Feature(f) for f in features)
        every = tuple(Case(case, dict(params)) for case, params in cases.items())
        self.presets = {"smoke": every[:1], "pr": every, "all": every}
        self._takes_features = len(inspect.signature(call).parameters) > 1

    def setup(self, case: Case, device: str, dtype: str, seed: int) -> Any:
        import torch

        torch.manual_seed(seed)  # the setup's random inputs differ between buffer sets, alike between runs
        wanted = inspect.signature(self._setup).parameters
        given = {"device": device, "dtype": dtype, "seed": seed, **case.params}
        state = self._setup(**{k: v for k, v in given.items() if k in wanted})
        return {"user": state, RESULT: None}

    def launch(self, state: Any, features: frozenset[str], params: Mapping[str, Any]) -> Callable[[], None]:
        call, user = self._call, state["user"]
        kept: list[Any] = [None]  # this call's own last result: a CUDA graph writes into it on every replay

        def run() -> None:
            kept[0] = state[RESULT] = call(user, features) if self._takes_features else call(user)

        return run

    def outputs(self, state: Any) -> dict[str, Any]:
        """Copies of what the last call returned: kprof poisons outputs before a checked call, and a
        returned tensor may be one of the function's own inputs."""
        return {name: t.clone() for name, t in as_tensors(state[RESULT]).items()}

    def reference(self, state: Any) -> dict[str, Any]:
        return {} if self._reference is None else as_tensors(self._reference(state["user"]))

    def reset(self, state: Any) -> None:
        if self._reset is not None:
            self._reset(state["user"])


def as_tensors(value: Any, name: str = "out") -> dict[str, Any]:
    """A returned value as named tensors: a tensor as it is, a tuple, list or dict of them by
    position or key; anything else (text, numbers, objects) as the bytes that pickle it, so that
    outputs compare for equality."""
    import torch

    if value is None:
        return {}
    if isinstance(value, torch.Tensor):
        return {name: value}
    if isinstance(value, Mapping) and all(isinstance(v, torch.Tensor) for v in value.values()):
        return {f"{name}.{k}": v for k, v in value.items()}
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return {f"{name}[{i}]": v for i, v in enumerate(value)}
    return {name: torch.frombuffer(bytearray(pickle.dumps(value)), dtype=torch.uint8)}
