"""A run folder: ``meta.json`` (the typed :class:`~kprof.run_model.Run`) and parquet parts.

Parts are written one per (table, case, round) as the run goes (``samples/c000-r0003.parquet``),
so an interrupted run keeps every finished round and ``--resume`` continues after the last one.
Any parquet reader reads a table folder as one dataset (pyarrow, pandas, DuckDB, polars).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from kprof.errors import KprofInputError
from kprof.run_model import CaseStatus, Run
from kprof.store.atomic import write_parquet, write_text
from kprof.store.locks import exclusive_lock
from kprof.store.run_tables import TABLES, check_columns, to_arrow

META = "meta.json"


def is_run_folder(path: Path) -> bool:
    return (path / META).is_file()


class RunFolder:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.skipped: list[str] = []  # damaged parts left out of the last reads, with why

    @property
    def meta_path(self) -> Path:
        return self.root / META

    def create(self, run: Run) -> None:
        if self.meta_path.exists():
            raise KprofInputError(self.root, "already holds a run (use --resume to continue it, or another --out)")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self.write_run(run)
        except OSError as e:
            raise KprofInputError(self.root, f"cannot hold a run folder ({e.strerror or e})") from None

    def read_run(self) -> Run:
        if not self.meta_path.exists():
            raise KprofInputError(self.root, "is not a kprof run folder (no meta.json)")
        try:
            text = self.meta_path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise KprofInputError(self.meta_path, f"is not UTF-8 text ({e.reason} at byte {e.start})") from None
        return Run.from_json(text, str(self.meta_path))

    def write_run(self, run: Run) -> None:
        write_text(run.to_json(), self.meta_path)

    def _meta_lock(self) -> AbstractContextManager[None]:
        """meta.json is read, changed and written by several processes when cases run on several
        GPUs at once: each read-modify-write holds this lock so none is lost."""
        return exclusive_lock(self.root / ".meta.lock")

    def update(self, **fields: Any) -> Run:
        with self._meta_lock():
            run = self.read_run().updated(**fields)
            self.write_run(run)
        return run

    def update_case(self, case: str, **fields: Any) -> CaseStatus:
        """Set fields of one case's status (unknown names go to its ``extra``) and store it."""
        with self._meta_lock():
            run = self.read_run()
            status = run.status(case)
            for key, value in fields.items():
                if hasattr(status, key) and key != "extra":
                    setattr(status, key, value)
                else:
                    status.extra[key] = value
            self.write_run(run)
        return status

    def record_measurements(
        self, measured: dict[str, Any], gpu: str | None, timer: Callable[[dict[str, Any]], str]
    ) -> Run:
        """Store one GPU's timer measurements (``timer_info["gpus"][gpu]``; the run's own when the
        run is not sharded, and the first GPU's stand for the run) and the run's timer label."""
        with self._meta_lock():
            run = self.read_run()
            info = dict(run.timer_info)
            if gpu is not None:
                info["gpus"] = {**(info.get("gpus") or {}), gpu: measured}
            if gpu is None or "measured_in_case" not in info:
                info.update(measured)
            run = run.updated(timer_info=info, timer=timer(info))
            self.write_run(run)
        return run

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the folder for one kprof process: a second run or --resume on it is refused at once
        (an OS lock, released when the process ends, however it ends)."""
        import fcntl

        with (self.root / ".lock").open("w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise KprofInputError(self.root, "is being run by another kprof process (one at a time)") from None
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def part_path(self, table: str, case_index: int, round_index: int | None, part: int = 0) -> Path:
        """A round's file, or (no round) what a case's process wrote before its rounds."""
        suffix = ("pre" if part == 0 else f"pre-p{part}") if round_index is None else f"r{round_index:04d}"
        return self.root / table / f"c{case_index:03d}-{suffix}.parquet"

    def write_part(
        self, table: str, case_index: int, round_index: int | None, frame: pd.DataFrame, part: int = 0
    ) -> None:
        write_parquet(to_arrow(table, frame), self.part_path(table, case_index, round_index, part))

    def read(self, table: str, skip_damaged: bool = False) -> pd.DataFrame:
        """Every part of ``table``. A part that cannot be read (truncated, not parquet, unrelated
        columns) is a one-line error naming it, or, with ``skip_damaged``, left out and recorded in
        ``skipped`` so the rounds that are intact are still reported."""
        assert table in TABLES, table
        folder = self.root / table
        parts = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
        frames = []
        for p in parts:
            try:
                frame = pq.read_table(p).to_pandas()
                check_columns(table, frame, str(p))
            except (OSError, pa.ArrowException, KprofInputError) as e:
                reason = e.problem if isinstance(e, KprofInputError) else f"not a readable parquet part ({e})"
                if not skip_damaged:
                    raise KprofInputError(p, reason) from None
                self.skipped.append(f"{p}: {reason}")
                continue
            frames.append(frame)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def finished_rounds(self, case_index: int) -> list[int]:
        folder = self.root / "samples"
        if not folder.is_dir():
            return []
        return sorted(int(p.stem.split("-r")[1]) for p in folder.glob(f"c{case_index:03d}-r*.parquet"))
