"""Compacted run folders: when a run's execution ends its parts become one zstd file per table,
which reads back as the same table (every stored run, exploded into parts and read both ways);
resume writes parts beside it, and a part written later replaces the rows of its name."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fake_runs import write_run

from conftest import ROOT
from kprof.commands.analyse import analyse_run
from kprof.run_model import Leg, Role
from kprof.store.run_folder import COMPACT, PART_COLUMN, RunFolder
from kprof.store.run_tables import TABLES

LEGS = [
    Leg("base", roles=frozenset({Role.BASELINE})),
    Leg("fast", roles=frozenset({Role.LEG})),
    Leg("base (A/A)", roles=frozenset({Role.AA}), replica=1),
]
STORED = sorted((ROOT / "docs" / "runs").glob("*/*/meta.json")) + sorted(
    (ROOT / "docs" / "runs").glob("*/*/step-*/meta.json")
)


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def test_compaction_keeps_every_row_and_the_finished_rounds(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "run", LEGS, lambda leg, case: -0.1 if leg.name == "fast" else 0.0, cases=("a", "b"))
    before = {t: folder.read(t) for t in TABLES}
    rounds = [folder.finished_rounds(i) for i in (0, 1)]
    effects = analyse_run(folder.root).effects
    folder.compact()
    assert sorted(p.name for p in (folder.root / "samples").iterdir()) == [COMPACT]
    assert pq.ParquetFile(folder.root / "samples" / COMPACT).metadata.row_group(0).column(0).compression == "ZSTD"
    for table, frame in before.items():
        pd.testing.assert_frame_equal(_sorted(folder.read(table)), _sorted(frame)) if len(frame) else None
    assert [folder.finished_rounds(i) for i in (0, 1)] == rounds
    pd.testing.assert_frame_equal(analyse_run(folder.root).effects, effects)


def test_a_resumed_run_writes_parts_beside_the_compacted_table(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "run", LEGS, lambda leg, case: 0.0, rounds=8)
    folder.compact()
    n = len(folder.read("samples"))
    extra = folder.read("samples").query("round == 8").assign(round=9)
    folder.write_part("samples", 0, 9, extra)  # a round timed after a resume
    assert folder.finished_rounds(0)[-1] == 9 and len(folder.read("samples")) == n + len(extra)
    again = extra.assign(round=8, time_ns=1.0)
    folder.write_part("samples", 0, 8, again)  # round 8 written again: its rows replace the compacted ones
    samples = folder.read("samples")
    assert len(samples) == n + len(extra) and (samples.query("round == 8")["time_ns"] == 1.0).all()
    folder.compact()  # and compacting again keeps the newer rows
    assert len(folder.read("samples")) == n + len(extra) and not list((folder.root / "samples").glob("c[0-9]*.parquet"))
    assert (folder.read("samples").query("round == 8")["time_ns"] == 1.0).all()


def test_a_compaction_cut_short_reads_each_row_once(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "run", LEGS, lambda leg, case: 0.0, rounds=6)
    n = len(folder.read("samples"))
    parts = sorted((folder.root / "samples").glob("*.parquet"))
    keep = [pq.read_table(p) for p in parts[:2]]
    folder.compact()
    for p, t in zip(parts[:2], keep):  # as if the process died before removing these two parts
        pq.write_table(t, p)
    assert len(folder.read("samples")) == n


def _explode(root: Path, into: Path) -> None:
    """A compacted run folder written back as the parts it was compacted from."""
    for table in TABLES:
        path = root / table / COMPACT
        if not path.is_file():
            continue
        t = pq.read_table(path)
        for stem in t[PART_COLUMN].unique().to_pylist():
            part = t.filter(pa.compute.equal(t[PART_COLUMN], stem)).drop_columns([PART_COLUMN])
            (into / table).mkdir(parents=True, exist_ok=True)
            pq.write_table(part, into / table / f"{stem}.parquet")


# One stored run of each kind by default (a version-1 folder, per-leg buffers, a revision run, a bisect
# step, a whole program, the torch collector's kernels); every stored run in CI's slow step.
KINDS = (
    "h200-2026-11-30/paged_endpoints",
    "h200-2026-11-30/prm_paged_decode_b64-s2048",
    "h200-2026-11-30-s4/gdn_rev",
    "h200-2026-11-30-s4/gdn_bisect/step-1",
    "h200-2026-11-30-s4/prog_env",
    "h200-2026-11-30-s4/mla_c16_torch",
)


def _kind(meta: Path) -> str:
    return str(meta.parent.relative_to(ROOT / "docs" / "runs"))


@pytest.mark.parametrize(
    "meta", [pytest.param(m, marks=[] if _kind(m) in KINDS else [pytest.mark.slow]) for m in STORED], ids=_kind
)
def test_every_stored_run_reads_the_same_compacted_and_as_parts(meta: Path, tmp_path: Path) -> None:
    root = meta.parent
    exploded = tmp_path / "parts"
    exploded.mkdir()
    (exploded / "meta.json").write_bytes(meta.read_bytes())
    _explode(root, exploded)
    for table in TABLES:
        a, b = RunFolder(root).read(table), RunFolder(exploded).read(table)
        assert len(a) == len(b)
        if len(a):
            pd.testing.assert_frame_equal(_sorted(a), _sorted(b[a.columns]))


def test_the_compact_tool_exits_non_zero_when_it_did_nothing(tmp_path: Path, capsys) -> None:
    """On a live run it said 'in use' and exited 0."""
    from fake_runs import write_run

    from kprof.designs.legs import design_legs
    from kprof.store.compact import main

    folder = write_run(tmp_path / "run", design_legs(("a",), "endpoints"), lambda leg, case: 0.0, rounds=6)
    with folder.lock():  # a kprof process running it
        assert main([str(tmp_path)]) == 1
    assert "kprof:" in capsys.readouterr().err
    assert main([str(tmp_path / "nothing-here")]) == 2
    assert main([str(tmp_path)]) == 0 and (folder.root / "samples" / "compact.parquet").exists()
