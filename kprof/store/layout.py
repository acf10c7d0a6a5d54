"""The names of a run folder's files: the one place that spells them (kprof.store.run_folder reads
and writes the tables and meta.json; the engine writes its progress notes and logs where these say;
code that must recognise a folder without reading it imports this alone: pandas and pyarrow are not
imported here).

    meta.json               the run: what was asked for and the plan, written once when the run is made
    state.json              what the run found out while it ran: each GPU's timer measurements,
                            revisions refused or made again
    status/cNNN.json        case NNN's status, written by whoever runs that case
    TABLE/…parquet          the tables (kprof.store.run_tables), parts while live, compacted after
    outputs/cNNN/…pt        revision runs: each leg's gate outputs, compared across revisions, then removed
    .lock, .meta.lock       one kprof process per folder; one read-modify-write at a time
    .progress-cNNN.json     where case NNN's worker is (which leg to blame when it dies)
    .worker-cNNN.log, .host-cNNN-KEY.log   the stderr of a case's worker, of its leg hosts
    bisect.json, step-N/    a bisect's record and the run folder of each of its steps
"""

from __future__ import annotations

from pathlib import Path

META = "meta.json"
META_LOCK = ".meta.lock"
FOLDER_LOCK = ".lock"
STATUS = "status"
STATE = "state.json"
BISECT_FILE = "bisect.json"


def is_run_folder(path: Path) -> bool:
    """Whether ``path`` holds a meta.json of any kind: one that cannot be read is then a one-line
    error naming it (kprof.store.run_folder.RunFolder.read_run), not "no run folder"."""
    meta = path / META
    return meta.exists() or meta.is_symlink()


def case_stem(case_index: int) -> str:
    return f"c{case_index:03d}"


def status_file(root: Path, case_index: int) -> Path:
    return root / STATUS / f"{case_stem(case_index)}.json"


def progress_file(root: Path, case_index: int) -> Path:
    return root / f".progress-{case_stem(case_index)}.json"


def worker_log(root: Path, case_index: int) -> Path:
    return root / f".worker-{case_stem(case_index)}.log"


def host_log(root: Path, case_index: int, revision_key: str) -> Path:
    safe = "".join(c if c.isalnum() else "_" for c in revision_key)
    return root / f".host-{case_stem(case_index)}-{safe}.log"


def outputs_file(root: Path, case_index: int, leg: str, buffer_set: int) -> Path:
    """Where a leg's gate outputs on a buffer set are saved for the cross-revision comparison."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in leg)
    return root / "outputs" / case_stem(case_index) / f"{safe}-k{buffer_set}.pt"


def bisect_step(root: Path, step: int) -> Path:
    return root / f"step-{step}"
