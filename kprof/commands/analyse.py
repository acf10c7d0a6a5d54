"""A run folder read and analysed: the tables a report reads (kprof.analysis.run_analysis takes
them from here), with what the reading found — damaged parts left out, rows that do not add up."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kprof.analysis.run_analysis import (
    Attribution,
    RunReport,
    RunTables,
    analyse,
    attribution,
    no_rounds_message,
    without_failed_legs,
)
from kprof.errors import KprofInputError
from kprof.run_model import CaseStatuses, Run
from kprof.store.run_folder import RunFolder


def reported_samples(folder: RunFolder, run: Run, statuses: CaseStatuses, skip_damaged: bool = False) -> pd.DataFrame:
    """The samples a report reads (failed legs left out), or a one-line error when no round past
    the burn-in (which is never reported) is stored: a run stopped that early has nothing to say."""
    return _reportable(folder.read("samples", skip_damaged=skip_damaged), folder, run, statuses)


def _reportable(stored: pd.DataFrame, folder: RunFolder, run: Run, statuses: CaseStatuses) -> pd.DataFrame:
    """``reported_samples`` of samples already read."""
    samples = without_failed_legs(stored, statuses)
    if samples.empty or samples["burn_in"].astype(bool).all():
        damaged = (
            f" ({len(folder.skipped)} damaged parts left out; first: {folder.skipped[0]})" if folder.skipped else ""
        )
        raise KprofInputError(folder.root, no_rounds_message(run, statuses) + damaged)
    return samples


def run_tables(folder: RunFolder, run: Run) -> RunTables:
    """Every table a report reads, damaged parts left out and said."""
    statuses, stored = folder.read_statuses(), folder.read("samples", skip_damaged=True)  # each read once
    samples = _reportable(stored, folder, run, statuses)
    kernels = folder.read("kernels", skip_damaged=True)
    checks = folder.read("checks", skip_damaged=True)
    compile_rows = folder.read("compile", skip_damaged=True)
    warnings = [*damage_warnings(folder), *missing_round_lines(folder, run, statuses, stored)]
    return RunTables(samples, kernels, checks, compile_rows, statuses, warnings)


def analyse_run(root: Path, threshold_pct: float | None = None, between_runs_pct: float | None = None) -> RunReport:
    """The report of the run folder at ``root`` (``None``: the run's own threshold and spread between runs)."""
    folder = RunFolder(root)
    run = folder.read_run()
    return analyse(run, run_tables(folder, run), threshold_pct, between_runs_pct)


def attribute(root: Path, threshold_pct: float | None = None, between_runs_pct: float | None = None) -> Attribution:
    """The attribution of the run folder at ``root``."""
    return attribution(analyse_run(root, threshold_pct, between_runs_pct))


def missing_round_lines(folder: RunFolder, run: Run, statuses: CaseStatuses, stored: pd.DataFrame) -> list[str]:
    """Finished cases whose ``stored`` samples do not add up — rounds absent, or rounds with fewer
    rows than their legs × samples (rows lost from a compacted table): the report reads what is
    there, and says so."""
    lines = []
    every = set(range(run.protocol.total_rounds))
    on_disk = {p.stem for p in folder.table_files("samples")[1]}  # a damaged part is said as such
    finished = folder.finished_rounds_of_every_case()  # the parts read once, not once per case
    rows = stored.groupby([stored["case"].astype(str), "round"]).size() if len(stored) else None
    for index, case in enumerate(run.case_names):
        status = statuses.of(case)
        if status.status != "done":
            continue
        said = {r for r in every if folder.part_path("samples", index, r).stem in on_disk}
        lost = sorted(every - set(finished[index]) - said)
        short: list[int] = []
        if not run.is_program and status.samples and status.legs_timed and rows is not None and case in rows.index:
            per_round = rows.loc[case]
            short = sorted(int(r) for r, n in per_round.items() if n < status.samples * len(status.legs_timed))
        if lost or short:
            said = [f"{len(lost)} of {len(every)} rounds absent"] if lost else []
            said += [f"{len(short)} round(s) short of rows (rounds {_listed(short)})"] if short else []
            lines.append(
                f"{case}: the stored samples do not add up ({'; '.join(said)}): rows lost from the folder? "
                "the report reads the rows that are there"
            )
    return lines


def _listed(rounds: list[int]) -> str:
    return ", ".join(map(str, rounds[:8])) + (" …" if len(rounds) > 8 else "")


def damage_warnings(folder: RunFolder) -> list[str]:
    """What the report left out: every damaged or stray file of the folder's tables, the ones it
    does not read itself (rounds, launches) included."""
    for table in ("rounds", "launches"):
        folder.note_damage(table)
    return [f"skipped a damaged part: {s}" for s in dict.fromkeys(folder.skipped)]
