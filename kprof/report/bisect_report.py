"""`kprof run … --design bisect` output: the path the search took, every step with its intervals."""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from kprof.bisect_model import Bisect, Segment
from kprof.report.run_report import paths_line
from kprof.report.table import Cell, Column, Document, Table, verdict_cell
from kprof.report.text import cut_words


def _span(b: Bisect, lo: int, hi: int) -> str:
    shas = [c["sha"][:7] for c in b.commits]
    return shas[lo] if hi - lo == 1 else f"{shas[lo]}…{shas[hi - 1]} ({hi - lo} commits)"


def _cell(s: Segment) -> Cell:
    text = f"{s.effect_pct:+.2f}% [{s.ci_low_pct:+.2f}, {s.ci_high_pct:+.2f}]"
    return verdict_cell(text + (" ← here" if s.resolved else ""), "SLOWER" if s.resolved else "")


def bisect_document(b: Bisect) -> Document:
    doc = Document()
    base = b.base["sha"][:7]
    confidence = 100 * (1 - b.alpha_per_interval)
    doc.text(
        f"bisect of {len(b.commits)} commits after {base}, case {b.case}: each step times evenly spaced revisions "
        f"in interleaved rounds (one process each, with an A/A process); every interval is at "
        f"{confidence:.2f}% (Bonferroni over all steps and segments: the whole search errs with at most 5%); "
        "effect = 100·(t_before/t_after − 1) per segment, positive = the segment's commits made it faster.",
        "bold",
    )
    t = Table(
        "steps",
        [
            Column("step"),
            Column("span", "left"),
            Column("rounds"),
            Column("span's total [CI]"),
            Column("segments: commits, effect [CI]", "left", is_name=True),
        ],
    )
    for i, step in enumerate(b.steps, 1):
        segs = "; ".join(f"{_span(b, s.lo, s.hi)}: {_cell(s).text}" for s in step.segments)
        t.add(str(i), _span(b, step.lo, step.hi), str(step.rounds), _cell(step.total), segs)
    doc.table(t)
    if b.changes:
        doc.table(changes_table(b))
    if b.skipped:
        skipped = Table(
            "revisions that could not be timed (skipped, as git bisect skip does)",
            [Column("after commit", "left"), Column("subject", "left"), Column("why", "left", is_name=True)],
        )
        for number, why in sorted(b.skipped.items()):
            commit = b.commits[number - 1] if number else b.base
            skipped.add(commit["sha"][:7], cut_words(commit.get("subject", ""), 60), why)
        doc.table(skipped)
    if b.paths:
        doc.text(
            paths_line(b.paths, len(b.commits), b.left_out, "each counts in the segment of the next commit bisected")
        )
    doc.text(verdict_line(b), "bold")
    doc.data = asdict(b)
    doc.records = segment_rows(b)
    return doc


MEANS = {
    "FOUND": "one commit",
    "RANGE": "in these commits: the revisions between them could not be timed",
    "SPREAD": "over these commits: their span changed, no single segment of it did",
    "UNRESOLVED": "seen in an earlier step, not resolved when its span was timed on its own",
    "NOT FOLLOWED": "the search's steps (its error budget) were spent before this span was searched",
}


def changes_table(b: Bisect) -> Table:
    """Every change the search followed, oldest first: its commits, effect and how far it got."""
    t = Table(
        f"the commits behind each change ({len(b.changes)} found)",
        [Column("commits", "left"), Column("subject", "left", is_name=True), Column("effect [CI]")]
        + [Column("verdict", "left")],
    )
    for c in b.changes:
        first = b.commits[c.lo]
        subject = cut_words(first.get("subject", ""), 60) if c.hi - c.lo == 1 else MEANS[c.verdict]
        effect = f"{c.effect_pct:+.2f}% [{c.ci_low_pct:+.2f}, {c.ci_high_pct:+.2f}]"
        verdict = c.verdict + (f" (needs ~{c.rounds_needed} rounds)" if c.rounds_needed else "")
        t.add(_span(b, c.lo, c.hi), subject, effect, verdict_cell(verdict, "SLOWER" if c.verdict == "FOUND" else ""))
    return t


def verdict_line(b: Bisect) -> str:
    """The search's overall verdict, and the rounds that would settle what it left open."""
    line = f"verdict: {b.verdict}"
    if len(b.changes) > 1:
        line += f" ({len(b.changes)} changes: {', '.join(c.verdict for c in b.changes)})"
    elif b.verdict in MEANS and b.verdict != "FOUND":
        line += f" ({MEANS[b.verdict]})"
    if b.verdict == "UNRESOLVED":
        if b.rounds_needed:
            line += f"; about {b.rounds_needed} rounds would settle it at this noise (--rounds)"
        else:
            line += "; more than 64 rounds would be needed at this noise: quiet the machine or raise --threshold"
    return line


def segment_rows(b: Bisect) -> pd.DataFrame:
    """One CSV row per step and segment (the step's own span first, as ``segment`` 0)."""
    rows = [
        {"step": i, "segment": k, "first": b.commits[s.lo]["sha"], "last": b.commits[s.hi - 1]["sha"], **asdict(s)}
        for i, step in enumerate(b.steps, 1)
        for k, s in enumerate([step.total, *step.segments])
        if s.hi > s.lo
    ]
    return pd.DataFrame(rows)
