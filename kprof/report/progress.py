"""The live display of a run: what it is about to do, then a bar per phase — preparing (buffers,
correctness gate, capture, warm-up), burn-in, timed rounds — each with its own count and time
left, as hyperfine and pytest-benchmark show a benchmark's phases. Piped (a CI log), the same as
plain lines: one per phase of a case, however many legs and buffer sets it checks, and one per
round. Warnings and notes are printed as they come, in both."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from kprof.events import Event, LegFailed, Phase, RoundDone, Started
from kprof.report.refusals import refusal_lines
from kprof.run_model import Run

PREPARE, BURN_IN, ROUNDS = "preparing", "burn-in", "timed rounds"


def plan_line(run: Run, root: object) -> str:
    """What the run will do, said before anything is timed (the first cases take seconds to start)."""
    cases, legs = len(run.cases), len(run.legs)
    rounds, burn = run.protocol.rounds, run.protocol.processes  # a burn-in round per process
    where = run.placement.device + (f" · GPUs {','.join(map(str, run.placement.gpus))}" if run.placement.gpus else "")
    return (
        f"{run.subject.name}: {cases} case{'s' * (cases != 1)} × {legs} legs, {rounds} rounds each (+{burn} burn-in) "
        f"on {where} → {root}"
    )


class RunProgress:
    """A run's progress on ``console``: bars on a terminal, plain lines when piped, nothing but
    warnings with ``quiet``. Use as a context manager; ``on_event`` takes the run's events."""

    def __init__(self, console: Console, run: Run, root: object, transient: bool, quiet: bool) -> None:
        self.console, self.quiet = console, quiet
        self.plan = plan_line(run, root)
        self.plain = not quiet and not console.is_terminal
        starts = len(run.cases) * run.protocol.processes  # each process of a case prepares and burns in
        self.bars = Progress(
            TextColumn("{task.fields[phase]:<12}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.description}"),
            console=console,
            transient=transient,
            disable=quiet or not console.is_terminal,
        )
        self.tasks: dict[str, TaskID] = {
            PREPARE: self.bars.add_task("", total=starts, phase=PREPARE),
            BURN_IN: self.bars.add_task("", total=starts, phase=BURN_IN),
            ROUNDS: self.bars.add_task("", total=len(run.cases) * run.protocol.rounds, phase=ROUNDS),
        }
        self.done = dict.fromkeys(self.tasks, 0)
        self.warmed: set[tuple[str, str | None]] = set()  # (case, process) past its preparation
        self.said: dict[tuple[str, str | None], str] = {}  # the last stage said of each (case, process)
        self.legs = run.legs
        self.refused: dict[str, list[LegFailed]] = {}  # a case's gate refusals, said together after its gate

    def __enter__(self) -> RunProgress:
        self.bars.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for case in list(self.refused):
            self._say_refused(case)
        self.bars.__exit__(kind, error, trace)

    def on_event(self, event: Event) -> None:
        if isinstance(event, Started):
            if not self.quiet:  # before the first case, which takes seconds to start
                self.console.print(self.plan, highlight=False, soft_wrap=True)
        elif isinstance(event, LegFailed) and event.round is None:  # the gate's: said once it is over
            self.refused.setdefault(event.case, []).append(event)
        elif isinstance(event, Phase):
            if event.stage != "gate":
                self._say_refused(event.case)
            self._phase(event)
        elif isinstance(event, RoundDone):
            self._say_refused(event.case)
            self._round(event)
        elif (text := event.sentence()) is not None:
            self._warn(text)

    def _warn(self, text: str) -> None:
        self.console.print(f"[yellow]{escape(text)}[/yellow]", highlight=False)

    def _say_refused(self, case: str) -> None:
        """A case's refused legs, one line per reason (kprof.report.refusals)."""
        refused = self.refused.pop(case, [])
        for line in refusal_lines(((e.case, e.leg, e.reason) for e in refused), self.legs):
            self._warn(line)

    def _phase(self, event: Phase) -> None:
        key = (event.case, event.process)
        if event.step == "warmup" and key not in self.warmed:
            self.warmed.add(key)
            self._count(PREPARE, self.done[PREPARE] + 1)
        self.bars.update(self.tasks[PREPARE], description=event.text())
        if self.plain and self.said.get(key) != event.stage:
            self.said[key] = event.stage
            self.console.print(event.stage_text(), highlight=False)

    def _round(self, event: RoundDone) -> None:
        phase = BURN_IN if event.burn_in else ROUNDS
        self._count(phase, self.done[phase] + 1)
        # leg hosts and programs say no warm-up: a process's burn-in round ends its preparation
        self._count(PREPARE, max(self.done[PREPARE], self.done[BURN_IN]))
        self.bars.update(self.tasks[phase], description=event.text())
        if self.plain:
            self.console.print(event.text(), highlight=False)

    def _count(self, phase: str, done: int) -> None:
        self.done[phase] = done
        self.bars.update(self.tasks[phase], completed=done)
