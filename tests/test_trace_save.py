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


def test_a_save_never_deletes_what_it_did_not_write(tmp_path: Path) -> None:
    """The issue's cases: --save RUN/samples emptied a run's rounds; a folder holding only the
    user's my_results.parquet, or their own kernel_events/, was emptied; a symlinked kernel_events
    had files written into its target."""
    run = tmp_path / "run"
    shutil.copytree(ROOT / "docs" / "runs" / "h200-2026-11-30-s3" / "gdn_pr", run)
    rounds = sorted(p.name for p in (run / "samples").iterdir())
    res = _save(run / "samples", GRAPH)
    assert res.exit_code == 2 and "lies inside the kprof run folder" in res.stderr
    assert sorted(p.name for p in (run / "samples").iterdir()) == rounds
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "my_results.parquet").write_bytes(b"PAR1 mine")
    assert _save(mine, GRAPH).exit_code == 2 and (mine / "my_results.parquet").read_bytes() == b"PAR1 mine"
    theirs = tmp_path / "theirs"
    (theirs / "kernel_events").mkdir(parents=True)
    (theirs / "kernel_events" / "keep.txt").write_text("keep")
    assert _save(theirs, GRAPH).exit_code == 2 and (theirs / "kernel_events" / "keep.txt").exists()
    out, target = tmp_path / "saved", tmp_path / "elsewhere"
    assert _save(out, GRAPH).exit_code == 0
    target.mkdir()
    shutil.rmtree(out / "kernel_events")
    (out / "kernel_events").symlink_to(target)
    res = _save(out, EAGER)
    assert res.exit_code == 2 and "holds a symlink (kernel_events)" in res.stderr and not list(target.iterdir())
    # a user's file beside an earlier save is not the save's to delete either
    clean = tmp_path / "clean"
    assert _save(clean, GRAPH).exit_code == 0
    (clean / "my_results.parquet").write_bytes(b"PAR1 mine")
    assert _save(clean, EAGER).exit_code == 2 and (clean / "my_results.parquet").exists()


def test_a_failed_save_keeps_the_earlier_one_whole(tmp_path: Path) -> None:
    """A truncated trace once took an 11-entry save down to 1 while the message said the earlier
    save was kept: the new save is written beside it and swapped in only when complete."""
    out = tmp_path / "saved"
    assert _save(out, EAGER, GRAPH).exit_code == 0
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    truncated = tmp_path / "cut.json"
    truncated.write_bytes(GRAPH.read_bytes()[:5000] if GRAPH.suffix != ".gz" else b'{"traceEvents": [')
    res = _save(out, GRAPH, truncated)
    assert res.exit_code == 2, res.output
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".saved.kprof")]  # nothing left beside it
    assert _save(out, GRAPH).exit_code == 0 and [p.name for p in (out / "kernel_events").iterdir()] == ["rank=0"]
