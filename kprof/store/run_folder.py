"""A run folder: ``meta.json`` (the typed :class:`~kprof.run_model.Run`), one status file per case,
and parquet parts (the names: kprof.store.layout).

meta.json holds what was asked for and is written once, when the run is made; a case's status
(how far it got, legs refused, worker deaths) is ``status/cNNN.json``, written by whoever runs that
case, and what the run finds out while it runs (each GPU's measurements, revisions refused) is
``state.json``. Folders written before the status files keep the statuses inside meta.json; they
read the same, and a status written later goes to its file.

Parts are written one per (table, case, round) as the run goes (``samples/c000-r0003.parquet``),
so an interrupted run keeps every finished round and ``--resume`` continues after the last one.
When a run's execution ends, each table's parts are compacted into one zstd file,
``TABLE/compact.parquet``, whose ``_part`` column says which part each row came from (thousands of
4 KB files become one file per table). A resumed run writes parts beside it again; a part written
after the compaction replaces the rows of its name, so the folder always reads as one table. Any
parquet reader reads a table folder as one dataset (pyarrow, pandas, DuckDB, polars).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import msgspec
import pandas as pd
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute, for filtering a compacted table
import pyarrow.parquet as pq

from kprof.errors import KprofInputError, checked_file
from kprof.run_model import CaseStatus, CaseStatuses, Run, RunState, meta_record
from kprof.store.atomic import write_parquet, write_text
from kprof.store.layout import META, META_LOCK, STATE, STATUS, status_file
from kprof.store.locks import exclusive_lock, held_alone
from kprof.store.run_tables import REQUIRED, TABLES, checked_part, to_arrow

META_LIMIT = 256 << 20  # a meta.json of a 10,000-case run is a few MB; anything this large is not one
COMPACT = "compact.parquet"
PART_NAME = re.compile(r"c\d{3,}-(r\d{4,}|pre(-p\d+)?)")  # kprof.store.run_folder.RunFolder.part_path
PART_COLUMN = "_part"  # in a compacted table: the part (``c000-r0003``) each row was written as


def read_status(path: Path) -> CaseStatus:
    """One case's status file; one that is damaged is a one-line error naming it."""
    checked_file(path, "a case status", limit=META_LIMIT)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise KprofInputError(path, f"is not a case status kprof can read ({type(e).__name__}: {e})") from None
    return CaseStatus.from_record(raw, str(path))


def _rounds_of(stems: set[str], case_index: int) -> list[int]:
    prefix = f"c{case_index:03d}-r"
    return sorted(int(s[len(prefix) :]) for s in stems if s.startswith(prefix))


ARCHIVES = (".tar.gz", ".tgz", ".tar", ".tar.zst", ".zip")  # a run folder packed for sending


class RunFolder:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.skipped: list[str] = []  # damaged parts left out of the last reads, with why
        self._case_names: list[str] | None = None  # the plan's, once read (meta.json is written once)
        self._legacy: dict[str, Any] = {}  # statuses a folder of versions 1–3 kept in meta.json

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
        """The plan, meta.json (written once, when the run is made), with what the run has found out
        since (state.json: the timer's measurements, revisions refused); the cases' statuses are
        :meth:`read_statuses`."""
        raw = self._meta_record()
        run = Run.from_record(raw, str(self.meta_path))
        self._read_state().apply(run)
        self._case_names, self._legacy = run.case_names, raw.get("case_status") or {}
        return run

    def _meta_record(self) -> Any:
        if not self.root.exists() and not self.root.is_symlink():
            raise KprofInputError(self.root, "no such run folder")
        if self.root.is_file() and self.root.name.endswith(ARCHIVES):
            unpack = "unzip it" if self.root.suffix == ".zip" else f"tar xf {self.root}"
            raise KprofInputError(self.root, f"is an archive: unpack it first ({unpack}), then give the folder")
        if not self.meta_path.exists() and not self.meta_path.is_symlink():
            raise KprofInputError(self.root, "is not a kprof run folder (no meta.json)")
        checked_file(self.meta_path, "meta.json", limit=META_LIMIT)
        try:
            text = self.meta_path.read_text(encoding="utf-8")
        except OSError as e:
            raise KprofInputError(self.meta_path, f"cannot be read ({e.strerror or e})") from None
        except UnicodeDecodeError as e:
            raise KprofInputError(self.meta_path, f"is not UTF-8 text ({e.reason} at byte {e.start})") from None
        return meta_record(text, str(self.meta_path))

    def read_statuses(self) -> CaseStatuses:
        """Each case's status: its file, else (a folder of versions 1–3) what meta.json kept."""
        files = (self.root / STATUS).is_dir()  # none yet: no file to look for case by case
        stored = ((case, self._stored_status(index, case, files)) for index, case in enumerate(self.case_names))
        return CaseStatuses({case: status for case, status in stored if status is not None})

    def status(self, case: str) -> CaseStatus:
        """One case's status alone, its file read and no other (empty before the case starts)."""
        return self._stored_status(self.case_names.index(case), case) or CaseStatus()

    def _stored_status(self, index: int, case: str, files: bool = True) -> CaseStatus | None:
        path = status_file(self.root, index)
        if files and (path.exists() or path.is_symlink()):
            return read_status(path)
        held = self._legacy.get(case)
        return None if held is None else CaseStatus.from_record(held, str(self.meta_path))

    @property
    def case_names(self) -> list[str]:
        """The plan's cases, read once: meta.json does not change after the run is made."""
        if self._case_names is None:
            self.read_run()
        assert self._case_names is not None
        return self._case_names

    def _read_state(self) -> RunState:
        path = self.root / STATE
        if not path.exists() and not path.is_symlink():
            return RunState()
        checked_file(path, "the run's state", limit=META_LIMIT)
        try:
            return msgspec.json.decode(path.read_bytes(), type=RunState)
        except (OSError, msgspec.DecodeError) as e:
            raise KprofInputError(path, f"is not a run state kprof can read ({e})") from None

    def _write_state(self, state: RunState) -> None:
        write_text(msgspec.json.encode(state).decode() + "\n", self.root / STATE)

    def write_run(self, run: Run) -> None:
        """meta.json, once, when the run is made (statuses go to their cases' files, what the run
        finds out while it runs to state.json)."""
        write_text(run.to_json(), self.meta_path)
        self._case_names, self._legacy = run.case_names, {}

    def _write_status(self, case_index: int, status: CaseStatus) -> None:
        path = status_file(self.root, case_index)
        path.parent.mkdir(exist_ok=True)
        write_text(json.dumps(status.record(), indent=1, default=str) + "\n", path)

    def _meta_lock(self) -> AbstractContextManager[None]:
        """A case's status and state.json are read, changed and written by several processes when
        cases run on several GPUs at once: each read-modify-write holds this lock so none is lost."""
        return exclusive_lock(self.root / META_LOCK)

    def update_case(self, case: str, **fields: Any) -> CaseStatus:
        """Set fields of one case's status and store it in the case's file; meta.json is not touched."""
        return self._change_case(case, fields, merge=False)

    def add_to_case(self, case: str, **fields: Any) -> CaseStatus:
        """Add to fields of one case's status (entries to a mapping, items to a list) under the
        lock: what another process added meanwhile is kept, never read first and written over."""
        return self._change_case(case, fields, merge=True)

    def _change_case(self, case: str, fields: dict[str, Any], merge: bool) -> CaseStatus:
        index = self.case_names.index(case)
        with self._meta_lock():
            status = self.status(case)
            for key, value in fields.items():
                if not hasattr(status, key):
                    raise TypeError(f"{key!r} is not a field of a case's status")
                held = getattr(status, key)
                if merge and isinstance(held, dict):
                    value = {**held, **value}
                elif merge and isinstance(held, list):
                    value = [*held, *value]
                setattr(status, key, value)
            self._write_status(index, status)
        return status

    def update_revision(self, key: str, **fields: Any) -> Run:
        """Set fields of one revision tree's record (a revision refused once for the whole run)."""
        with self._meta_lock():
            state = self._read_state()
            state.revisions[key] = {**state.revisions.get(key, {}), **fields}
            self._write_state(state)
            return self.read_run()

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
            state = self._read_state()
            state.timer_info, state.timer = info, timer(info)
            self._write_state(state)
            return run.updated(timer_info=info, timer=state.timer)

    def lock(self) -> AbstractContextManager[None]:
        """Hold the folder for one kprof process: a second run or --resume on it is refused at once."""
        return held_alone(self.root, "is being run by another kprof process (one at a time)")

    def part_path(self, table: str, case_index: int, round_index: int | None, part: int = 0) -> Path:
        """A round's file, or (no round) what a case's process wrote before its rounds."""
        suffix = ("pre" if part == 0 else f"pre-p{part}") if round_index is None else f"r{round_index:04d}"
        return self.root / table / f"c{case_index:03d}-{suffix}.parquet"

    def write_part(
        self, table: str, case_index: int, round_index: int | None, frame: pd.DataFrame, part: int = 0
    ) -> None:
        write_parquet(to_arrow(table, frame), self.part_path(table, case_index, round_index, part))

    def _parts(self, table: str) -> list[Path]:
        """The table's parts, by the names kprof gives them (``c000-r0001``, ``c000-pre``)."""
        return [p for p in self._files(table) if PART_NAME.fullmatch(p.stem)]

    def table_files(self, table: str) -> tuple[Path | None, list[Path]]:
        """Where a table's rows lie: its compacted file (None before the first compaction) and the
        parts written since, each replacing the compacted rows of its name (for readers like DuckDB)."""
        compact = self.root / table / COMPACT
        return (compact if compact.is_file() else None), self._parts(table)

    def _strays(self, table: str) -> list[Path]:
        """Other parquet files in the table's folder: a copy someone made (whose rows would count
        twice), a damaged compacted file kprof set aside. Never read; every read warns."""
        return [p for p in self._files(table) if p.name != COMPACT and not PART_NAME.fullmatch(p.stem)]

    def _files(self, table: str) -> list[Path]:
        folder = self.root / table
        return sorted(folder.glob("*.parquet")) if folder.is_dir() else []

    def read(self, table: str, skip_damaged: bool = False) -> pd.DataFrame:
        """Every row of ``table``: its compacted file and the parts written since. A file that
        cannot be read (truncated, not parquet, unrelated columns) is a one-line error naming it,
        or, with ``skip_damaged``, left out and recorded in ``skipped`` so the rounds that are
        intact are still reported."""
        assert table in TABLES, table
        parts = self._parts(table)
        self._strays_said(table, skip_damaged)
        frames = []
        compact = self.root / table / COMPACT
        for p in ([compact] if compact.is_file() else []) + parts:
            try:
                frame = self._checked(table, p).to_pandas()
            except KprofInputError as e:
                if not skip_damaged:
                    raise
                self.skipped.append(f"{p}: {e.problem}")
                continue
            if p == compact:
                newer = frame[PART_COLUMN].isin([q.stem for q in parts])
                frame = frame[~newer].drop(columns=PART_COLUMN).reset_index(drop=True)
            frames.append(frame)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def note_damage(self, table: str) -> None:
        """Record in ``skipped`` what ``read(table, skip_damaged=True)`` would leave out, reading only
        each file's required columns: for the tables a report does not read itself."""
        self._strays_said(table, skip_damaged=True)
        compact = self.root / table / COMPACT
        for p in ([compact] if compact.is_file() else []) + self._parts(table):
            try:
                self._checked(table, p, list(REQUIRED[table]))
            except KprofInputError as e:
                self.skipped.append(f"{p}: {e.problem}")

    def _strays_said(self, table: str, skip_damaged: bool) -> None:
        for stray in self._strays(table):
            aside = stray.stem.startswith("damaged-")
            reason = "a damaged compacted table kprof set aside" if aside else "not a part kprof wrote (by its name)"
            if not skip_damaged:
                raise KprofInputError(stray, f"{reason}: move it out of the run folder")
            self.skipped.append(f"{stray}: left out, {reason}")

    def compact(self) -> None:
        """Each table's parts (and an earlier compacted file) as one zstd file; the parts are
        removed once it is in place. A compaction cut short leaves parts that are also in the
        compacted file: the part is read, the compacted copy of its rows is not. A damaged part stays
        as it is, and a damaged compacted file is kept beside as ``damaged-N.parquet``: never merged,
        never deleted, warned about by every read (kprof.store.run_folder.RunFolder.read)."""
        for table in TABLES:
            parts = {p: t for p in self._parts(table) if (t := self._readable(table, p)) is not None}
            if not parts:
                continue
            target = self.root / table / COMPACT
            pieces = []
            if target.is_file():
                kept = self._readable(table, target)
                if kept is None or PART_COLUMN not in kept.column_names:
                    target.rename(self._set_aside(target))
                else:
                    stems = pa.array([p.stem for p in parts])
                    pieces.append(kept.filter(pa.compute.invert(pa.compute.is_in(kept[PART_COLUMN], stems))))
            for p, t in parts.items():
                pieces.append(t.append_column(PART_COLUMN, pa.array([p.stem] * len(t), pa.string())))
            merged = pa.concat_tables(pieces, promote_options="permissive")
            write_parquet(merged, target, compression="zstd")
            for p in parts:
                p.unlink()

    @staticmethod
    def _set_aside(path: Path) -> Path:
        n = 1
        while (aside := path.with_name(f"damaged-{n}.parquet")).exists():
            n += 1
        return aside

    def finished_rounds(self, case_index: int) -> list[int]:
        """The rounds of a case whose samples are stored and read back (in parts, or in the
        compacted table): a damaged part is not a finished round, so ``--resume`` times it again."""
        return _rounds_of(self._finished_parts(), case_index)

    def finished_rounds_of_every_case(self) -> list[list[int]]:
        """``finished_rounds`` of each of the plan's cases, in order, the samples parts read once."""
        finished = self._finished_parts()
        return [_rounds_of(finished, i) for i in range(len(self.case_names))]

    def unfinished_cases(self, run: Run) -> list[int]:
        """The cases a run (or its resume) still has to time: not done, or done with a round whose
        part does not read back."""
        every = set(range(run.protocol.total_rounds))
        finished, statuses = self.finished_rounds_of_every_case(), self.read_statuses()
        return [
            i for i, case in enumerate(run.case_names) if statuses.of(case).status != "done" or every - set(finished[i])
        ]

    def _finished_parts(self) -> set[str]:
        """The names of the samples parts that read back (their required columns only), in parts or
        in the compacted table, where a part replaces the rows of its name."""
        columns = list(REQUIRED["samples"])
        parts = self._parts("samples")
        stems = {p.stem for p in parts if self._readable("samples", p, columns) is not None}
        compact = self._readable("samples", self.root / "samples" / COMPACT, [*columns, PART_COLUMN])
        if compact is not None:
            stems |= set(compact[PART_COLUMN].unique().to_pylist()) - {p.stem for p in parts}
        return stems

    @staticmethod
    def _checked(table: str, path: Path, columns: list[str] | None = None) -> pa.Table:
        """The file's rows (only ``columns``, when given) as an intact part of ``table``, else a
        one-line error saying what is wrong with it."""
        try:
            return checked_part(table, pq.read_table(path, columns=columns), str(path))
        except (OSError, pa.ArrowException, KeyError) as e:
            raise KprofInputError(path, f"not a readable parquet part ({e})") from None

    @classmethod
    def _readable(cls, table: str, path: Path, columns: list[str] | None = None) -> pa.Table | None:
        """The file's rows when it is an intact part of ``table``, else None."""
        try:
            return cls._checked(table, path, columns)
        except KprofInputError:
            return None
