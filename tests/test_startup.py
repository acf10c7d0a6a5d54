"""Start-up: what a command imports before it can answer, and the cache that spares a report its
seeded draws. Times are measured by benchmarks/startup.py, not here; these tests fail when a heavy
import or a recomputation comes back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from conftest import ROOT
from kprof.cache import cached_array

STORED_RUN = ROOT / "docs" / "runs" / "h200-2026-11-30-s3" / "gdn_pr"

# Runs kprof's CLI in a fresh interpreter where importing any of the named modules fails.
FORBID = """
import sys
forbidden = set(sys.argv[1].split(","))
class Forbid:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in forbidden or name in forbidden:
            raise ImportError(f"{name} imported")
sys.meta_path.insert(0, Forbid())
sys.argv = ["kprof", *sys.argv[2:]]
from kprof.cli import app
app()
"""


def _kprof_without(modules: str, *args: str, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = None if cache is None else {**os.environ, "KPROF_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-c", FORBID, modules, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )


def test_a_mistyped_run_option_is_answered_before_torch_or_pandas() -> None:
    for args in (
        ("run", "paged_decode", "--rounds", "-1"),
        ("run", "paged_decode", "--timer", "bogus"),
        ("calibrate", "paged_decode", "--plant", "5", "--rounds", "2"),
        ("attribute", "no_such_workload", "--rounds", "3"),
    ):
        done = _kprof_without("torch,triton,pandas,scipy", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert "imported" not in done.stderr and "error: --" in done.stderr, (args, done.stderr)


def test_a_report_never_imports_scipy_stats(tmp_path: Path) -> None:
    done = _kprof_without("scipy.stats,torch,triton", "report", str(STORED_RUN), "--format", "json", cache=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"verdict"' in done.stdout
    # the report's seeded draws are now in the cache: a second report reads them back
    assert len(list((tmp_path / "arrays").glob("power-draws-*.npy"))) > 5


def test_cached_arrays_are_read_back_and_remade_when_damaged(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KPROF_CACHE", str(tmp_path))
    calls = []

    def compute() -> np.ndarray:
        calls.append(1)
        return np.arange(6.0).reshape(2, 3)

    first = cached_array("x", (2, 3), compute)
    again = cached_array("x", (2, 3), compute)
    assert len(calls) == 1 and np.array_equal(first, again)
    (tmp_path / "arrays" / "x.npy").write_bytes(b"not an array")
    assert np.array_equal(cached_array("x", (2, 3), compute), first) and len(calls) == 2
    assert np.array_equal(cached_array("x", (3, 2), lambda: np.zeros((3, 2))), np.zeros((3, 2)))  # other shape
    monkeypatch.setenv("KPROF_CACHE", str(tmp_path / "file"))
    (tmp_path / "file").write_text("a file where the cache folder should be")
    assert np.array_equal(cached_array("y", (2, 3), compute), first)  # unwritable: computed, no error


def test_the_kernels_listing_imports_neither_torch_nor_triton() -> None:
    """The bundled workloads import torch, triton and their kernels where a buffer is made or a
    kernel launched, so listing their levers, presets and sweeps costs neither (3.7 s before)."""
    done = _kprof_without("torch,triton", "kernels", "--format", "json")
    assert done.returncode == 0, done.stderr
    names = [w["name"] for w in json.loads(done.stdout)["workloads"]]
    assert names == ["copy", "gdn_decode", "mla_decode", "paged_decode"]
