"""`kprof trace --save`: a save replaces an earlier save as a whole, and never writes into a run
folder, a folder of other files, or a folder another process is saving into."""

from __future__ import annotations

import fcntl
import shutil
from pathlib import Path

from typer.testing import CliRunner

from kprof.cli import app
from tests.conftest import EAGER, GRAPH, ROOT

runner = CliRunner()


def _save(out: Path, *traces: Path):
    return runner.invoke(app, ["trace", *map(str, traces), "--save", str(out)])


def test_a_save_replaces_an_earlier_one_as_a_whole(tmp_path: Path) -> None:
    out = tmp_path / "saved"
    assert _save(out, EAGER, GRAPH).exit_code == 0
    assert (out / "rank_steps.parquet").exists() and (out / "kernel_events" / "rank=1").is_dir()
    assert _save(out, GRAPH).exit_code == 0  # one rank over two
    assert not (out / "rank_steps.parquet").exists() and not (out / "kernel_events" / "rank=1").exists()
    assert [p.name for p in (out / "kernel_events").iterdir()] == ["rank=0"]


def test_a_run_folder_or_other_files_are_never_written_over(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(ROOT / "docs" / "runs" / "h200-2026-11-30-s3" / "gdn_pr", run)
    meta = (run / "meta.json").read_bytes()
    res = _save(run, GRAPH)
    assert res.exit_code == 2 and "holds a kprof run" in res.stderr and res.stderr.count("\n") == 1
    assert (run / "meta.json").read_bytes() == meta and not (run / "kernel_events").exists()
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("keep me")
    res = _save(other, GRAPH)
    assert res.exit_code == 2 and "holds no kprof trace save (todo.txt" in res.stderr
    assert (other / "todo.txt").read_text() == "keep me" and not (other / "meta.json").exists()


def test_two_saves_into_one_folder_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "saved"
    assert _save(out, GRAPH).exit_code == 0
    with (out / ".lock").open("w") as held:  # another kprof process saving into it
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        res = _save(out, EAGER)
    assert res.exit_code == 2 and "another kprof process" in res.stderr
    assert (out / "meta.json").exists()  # the save it held is untouched
