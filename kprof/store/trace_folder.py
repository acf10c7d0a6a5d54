"""`kprof trace --save`: the normalized tables and the result tables as parquet, with a meta.json."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from kprof.errors import KprofInputError
from kprof.schema import KERNEL_EVENTS, RANGES, SCHEMA_VERSION
from kprof.store.atomic import write_parquet, write_text
from kprof.store.layout import FOLDER_LOCK, META, is_run_folder
from kprof.store.locks import held_alone

# What a `kprof trace --save` writes: the partitioned tables, the result tables, meta.json and a
# marker naming them; a save replaces exactly what an earlier save wrote, and a folder holding
# anything else is not one.
MARKER = ".kprof-save"
RESULT_TABLES = ("kernels", "steps", "annotations", "rank_steps", "rank_kernels", "rank_collectives", "counters")
_WRITTEN = {"kernel_events", "ranges", META, MARKER, *(f"{name}.parquet" for name in RESULT_TABLES)}


@contextmanager
def claimed(out: Path) -> Iterator[Path]:
    """Hold ``out`` for one save and give the folder to write it into: a new folder beside ``out``,
    which replaces what an earlier save wrote there only once it is complete. A save that fails
    (a truncated trace, a full disk) leaves the earlier one as it was. Refused in one line: a run
    folder or a folder inside one, a folder holding anything a save did not write (the user's own
    parquet files, a ``kernel_events`` folder of theirs), a symlink among what it would replace (a
    save never writes or deletes through one), and a folder another kprof process is saving into."""
    prepare_dir(out)
    _check_target(out)
    with held_alone(out, "is being saved into by another kprof process (one at a time)"):
        staging = out.parent / f".{out.name}.kprof-save-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            yield staging
            _swap_in(staging, out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _check_target(out: Path) -> None:
    """``out`` may take a save: not in a run, and empty or holding an earlier save alone."""
    run = next((folder for folder in out.resolve().parents if is_run_folder(folder)), None)
    if run is not None:
        raise KprofInputError(out, f"lies inside the kprof run folder {run}: --save writes a folder of its own")
    entries = {p.name: p for p in out.iterdir() if p.name != FOLDER_LOCK}
    if not entries:
        return
    meta = out / META
    try:
        command = json.loads(meta.read_text()).get("command") if meta.is_file() else None
    except (OSError, ValueError, AttributeError):
        command = None
    if command != "trace":
        listed = ", ".join(sorted(entries)[:3])
        what = "a kprof run or other data (its meta.json)" if META in entries else f"no kprof trace save ({listed})"
        raise KprofInputError(out, f"holds {what}: --save writes into an empty folder or over an earlier --save")
    foreign = sorted(name for name in entries if name not in _written(out))
    if foreign:
        raise KprofInputError(out, f"holds files a save did not write ({', '.join(foreign[:3])}): give another folder")
    linked = sorted(name for name, p in entries.items() if p.is_symlink())
    if linked:
        raise KprofInputError(out, f"holds a symlink ({', '.join(linked[:3])}): a save never writes through one")


def _written(out: Path) -> set[str]:
    """What the earlier save in ``out`` wrote: its marker's list (an older save, without one: the
    names a save writes)."""
    try:
        names = json.loads((out / MARKER).read_text())
    except (OSError, ValueError):
        return _WRITTEN
    return {*names, MARKER} if isinstance(names, list) else _WRITTEN


def _swap_in(staging: Path, out: Path) -> None:
    """The complete save in ``staging`` in place of what the earlier save wrote in ``out``: the
    earlier entries set aside, the new ones moved in (renames within one folder), then the old
    ones deleted (never following a symlink)."""
    names = sorted(p.name for p in staging.iterdir())
    write_text(json.dumps(names) + "\n", staging / MARKER)
    aside = out.parent / f".{out.name}.kprof-old-{os.getpid()}"
    shutil.rmtree(aside, ignore_errors=True)
    aside.mkdir()
    for name in _written(out):
        if (out / name).exists() or (out / name).is_symlink():
            (out / name).rename(aside / name)
    for entry in staging.iterdir():
        entry.rename(out / entry.name)
    shutil.rmtree(aside, ignore_errors=True)


def prepare_dir(out: Path) -> Path:
    try:
        if out.exists() and not out.is_dir():
            raise KprofInputError(out, "exists and is not a directory")
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".kprof-write-check"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise KprofInputError(out, f"cannot be written ({e.strerror or e})") from None
    return out


# The normalized tables are saved as datasets partitioned by rank (hive layout: ``NAME/rank=R/``):
# pandas, pyarrow, DuckDB and polars read a folder as one table, the rank coming from the path.
PARTITIONED = {"kernel_events": KERNEL_EVENTS, "ranges": RANGES}


def write_rank_partition(out: Path, rank: int, position: int, events: pd.DataFrame, ranges: pd.DataFrame) -> None:
    """One rank's events and ranges into ``out/kernel_events/rank=R/`` and ``out/ranges/rank=R/``
    (the rank lives in the path, not in the file: readers would see it twice)."""
    for name, frame in (("kernel_events", events), ("ranges", ranges)):
        schema = PARTITIONED[name]
        if "rank" in schema.names:  # dropped before the conversion: pandas metadata naming it would
            schema = schema.remove(schema.get_field_index("rank"))  # make readers build it twice
        table = pa.Table.from_pandas(frame.reindex(columns=schema.names), schema=schema, preserve_index=False)
        folder = out / name / f"rank={rank}"
        folder.mkdir(parents=True, exist_ok=True)
        write_parquet(table, folder / f"part-{position:05d}.parquet")


def read_dataset(folder: Path) -> pd.DataFrame:
    """A partitioned table written by ``write_rank_partition``, with ``rank`` (from the path) as int32."""
    try:
        table = pq.read_table(folder, partitioning=ds.partitioning(pa.schema([("rank", pa.int32())]), flavor="hive"))
    except (OSError, pa.ArrowException) as e:
        raise KprofInputError(folder, f"not a readable parquet dataset ({e})") from None
    return table.to_pandas()


def save_frames(out: Path, frames: dict[str, pd.DataFrame], meta: dict[str, Any]) -> list[Path]:
    """Write each (small) frame as ``NAME.parquet`` and ``meta.json``."""
    prepare_dir(out)
    written = []
    for name, frame in frames.items():
        path = out / f"{name}.parquet"
        if "rank" in frame.columns:  # int32, as the partitioned tables' rank folders read back
            frame = frame.astype({"rank": "int32"})
        write_parquet(pa.Table.from_pandas(frame, preserve_index=False), path)
        written.append(path)
    meta_path = out / META
    write_text(json.dumps(dict(meta, kprof_schema_version=SCHEMA_VERSION), indent=2, default=str) + "\n", meta_path)
    return [*written, meta_path]


def load_frame(path: Path) -> pd.DataFrame:
    try:
        return pq.read_table(path).to_pandas()
    except (OSError, pa.ArrowException) as e:
        raise KprofInputError(path, f"not a readable parquet table ({e})") from None
