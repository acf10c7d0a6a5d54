"""kprof run --ray on a local Ray cluster (CPU only): each case a Ray task in a private copy of the
run folder, its files gathered back. Skipped where Ray is not installed (it is in the test extra)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kprof.cli import app
from kprof.store.run_folder import RunFolder

ray = pytest.importorskip("ray")
runner = CliRunner()
ARGS = ["copy", "--device", "cpu", "--preset", "smoke", "--rounds", "6", "--samples", "2", "--design", "endpoints"]


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_a_run_on_a_local_ray_cluster_gives_the_same_samples_table(cluster, tmp_path: Path) -> None:
    on_ray, local = tmp_path / "ray", tmp_path / "local"
    res = runner.invoke(app, ["run", *ARGS, "--ray", "auto", "--out", str(on_ray), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert runner.invoke(app, ["run", *ARGS, "--out", str(local), "--format", "json"]).exit_code == 0
    keys = ["case", "leg", "round", "sample", "buffer_set", "burn_in"]
    a = RunFolder(on_ray).read("samples")[keys].sort_values(keys).reset_index(drop=True)
    b = RunFolder(local).read("samples")[keys].sort_values(keys).reset_index(drop=True)
    assert len(a) and a.equals(b)  # the same rounds and samples, written back by the driver
    run = RunFolder(on_ray).read_run()
    status = RunFolder(on_ray).read_statuses().of(run.case_names[0])
    assert status.status == "done" and status.gpu.endswith("/cpu")  # which node ran it
    assert status.gpu in run.timer_info["gpus"]
    legs = {r["leg"] for r in json.loads(res.stdout)["legs"]}
    assert {"baseline", "baseline (A/A)"} <= legs
    # a finished case is never sent again: resuming submits nothing and changes nothing
    before = sorted(p.name for p in (on_ray / "samples").iterdir())
    again = runner.invoke(app, ["run", "--resume", "--out", str(on_ray), "--format", "json"])
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in (on_ray / "samples").iterdir()) == before
