"""`kprof trace` end to end through the command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import EAGER, GRAPH, ROOT, real
from kprof.cli import app
from kprof.report.table import Column, Document, Table, render_markdown
from kprof.schema import KERNEL_EVENTS
from kprof.store.trace_folder import read_dataset

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_json_has_the_documented_keys() -> None:
    res = _run("trace", str(GRAPH), "--format", "json")
    assert res.exit_code == 0
    out = json.loads(res.stdout)
    assert set(out) >= {"kernels", "steps", "annotations", "summary"}
    assert set(out["kernels"][0]) >= {
        "name",
        "short_name",
        "calls",
        "total_us",
        "mean_us",
        "median_us",
        "p90_us",
        "pct_busy",
    }
    assert set(out["steps"][0]) >= {"step", "span_us", "busy_us", "kernels", "kernel_us", "idle_us"}
    assert set(out["annotations"][0]) >= {"name", "calls", "gpu_us"}
    assert set(out["summary"]) >= {"format", "kernels", "kernel_total_us", "busy_us"}
    assert out["summary"]["kernels"] == 310


def test_markdown_and_csv() -> None:
    md = _run("trace", str(EAGER), "--format", "md", "--top", "5")
    assert md.exit_code == 0
    assert (
        "| kernel | calls | total µs |" in md.stdout
        and "not shown here: kind, p10, min, max, std" in md.stdout
        and "(warm-up)" in md.stdout
        and "steady (median of 4)" in md.stdout
    )
    # template arguments are text, not HTML tags or emphasis, to a markdown renderer
    rows = [line for line in md.stdout.splitlines() if line.startswith("| at::native::")]
    assert any("\\<" in line for line in rows)
    assert not any(re.search(r"(?<!\\)[<*]", line) for line in rows)
    assert "| **steady (median of 4)** | **" in md.stdout  # the bold row is emphasis, not escaped stars
    csv = _run("trace", str(EAGER), "--format", "csv")
    assert csv.exit_code == 0
    header = csv.stdout.splitlines()[0]
    assert header.startswith("rank,name,short_name,kind,calls,total_us")


def test_markdown_escapes_titles_notes_and_paragraphs() -> None:
    """A program run's case titles are kernel names (``k<float> (per call)``): GitHub drops ``<float>``
    unless it is escaped, wherever the name is printed."""
    doc = Document()
    doc.text("case k<float> failed", "warning")
    table = doc.table(Table("k<float> (per call)", [Column("leg", "left")]))
    table.add("a*b")
    table.notes.append("A/A of k<half>")
    md = render_markdown(doc)
    assert "> warning: case k\\<float> failed" in md and "**k\\<float> (per call)**" in md
    assert "| a\\*b |" in md and "A/A of k\\<half>" in md


def test_terminal_table_and_save(tmp_path: Path) -> None:
    res = _run("trace", str(GRAPH), "--save", str(tmp_path / "out"))
    assert res.exit_code == 0
    assert "per kernel" in res.stdout and "per step" in res.stdout
    events = read_dataset(tmp_path / "out" / "kernel_events")
    assert list(events.columns) == [*(n for n in KERNEL_EVENTS.names if n != "rank"), "rank"]
    assert len(events) == 320 and set(events["rank"]) == {0}
    assert (tmp_path / "out" / "kernel_events" / "rank=0").is_dir()  # hive layout
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["kprof_schema_version"] == 2
    assert set(events["file"]) == {str(GRAPH)}
    for name in ("kernels", "steps", "annotations"):
        assert (tmp_path / "out" / f"{name}.parquet").exists()
    assert (tmp_path / "out" / "ranges" / "rank=0").is_dir()


def test_two_ranks_ordered_by_rank() -> None:
    r1 = real("kineto_cuda_2ranks_hta_sampled_rank-1.json.gz")
    r0 = real("kineto_cuda_2ranks_hta_sampled_rank-0.json.gz")
    out = json.loads(_run("trace", str(r1), str(r0), "--format", "json").stdout)
    assert [r["rank"] for r in out["summary"]["ranks"]] == [0, 1]
    assert {k["rank"] for k in out["kernels"]} == {0, 1}


def test_two_files_claiming_one_rank_are_refused() -> None:
    """Two rank-0 traces of different jobs: merging them would count rank 0's work twice."""
    first, second = real("hta_negative_queue_rank0.json.gz"), real("hta_nccl_data.json.gz")
    _one_line_error(_run("trace", str(first), str(second)), second.name, "claims rank 0", first.name)


def test_kernel_filter() -> None:
    out = json.loads(_run("trace", str(EAGER), "--format", "json", "--kernels", "nvjet").stdout)
    assert out["kernels"] and all("nvjet" in k["name"] for k in out["kernels"])


def _one_line_error(res, *words: str) -> None:
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kprof: error:")
    assert "Traceback" not in res.output
    for w in words:
        assert w in lines[0]


def test_bad_inputs_give_one_line_and_exit_2(tmp_path: Path) -> None:
    _one_line_error(_run("trace", str(tmp_path / "missing.json")), "missing.json", "no such file")
    _one_line_error(_run("trace", str(tmp_path)), "holds no trace files")
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    _one_line_error(_run("trace", str(empty)), "empty file")
    other = tmp_path / "notes.txt"
    other.write_text("hello, world\n")
    _one_line_error(_run("trace", str(other)), "notes.txt", "not a trace")
    badgz = tmp_path / "cut.json.gz"
    badgz.write_bytes(GRAPH.read_bytes()[:4000])
    _one_line_error(_run("trace", str(badgz)), "cut.json.gz", "gzip")
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "\xe9", "ts": 1, "dur": 1}]}')
    _one_line_error(_run("trace", str(latin)), "latin.json")
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "soon", "dur": 1}]}')
    _one_line_error(_run("trace", str(wrong)), "wrong.json", "ts")
    _one_line_error(_run("trace", str(GRAPH), "--steps", "("), "--steps")


def test_a_long_read_prints_progress_lines(monkeypatch) -> None:
    """Reading a large trace prints a plain progress line every few seconds (here: every read)."""
    from kprof import cli
    from kprof.ingest import source

    monkeypatch.setattr(cli.ReadProgress, "every_s", 0.0)
    monkeypatch.setattr(source, "_RAW_BYTES", 4096)
    res = _run("trace", str(GRAPH), "--format", "json")
    assert res.exit_code == 0
    assert f"kprof: reading {GRAPH.name}: " in res.stderr and "% of" in res.stderr


def test_steps_that_match_nothing_are_named() -> None:
    """--steps that matches no range says so, not that the trace lacks ProfilerStep ranges."""
    res = _run("trace", str(EAGER), "--steps", "no_such_range")
    assert res.exit_code == 0
    assert "--steps 'no_such_range' matches no range" in res.stdout and "ProfilerStep#N" not in res.stdout


def test_help_is_literal_text_that_can_be_pasted() -> None:
    """Help was read as rich markup: `pip install 'kprof[sql]'` printed as 'kprof', `[ray]` vanished
    and the regex example lost its backslash (pasted, it was not a valid regular expression)."""
    assert "pip install 'kprof[sql]'" in runner.invoke(app, ["sql", "--help"]).stdout
    assert "'kprof[ray]'" in " ".join(runner.invoke(app, ["run", "--help"]).stdout.split())
    trace_help = runner.invoke(app, ["trace", "--help"]).stdout
    example = re.search(r"e\.g\. '([^']+)'", trace_help)
    assert example is not None and example.group(1) == r"step\[DECODE"
    re.compile(example.group(1))


def test_a_run_folder_that_does_not_exist_is_named_as_such(tmp_path: Path) -> None:
    """`kprof report runs/does-not-exist` said "no meta.json", as if the folder were there."""
    for command in ("report", "attribute"):
        res = runner.invoke(app, [command, str(tmp_path / "gone" / "run")])
        assert res.exit_code == 2 and res.stderr.strip().endswith("run: no such run folder"), res.output
    res = runner.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 2 and "is not a kprof run folder (no meta.json)" in res.stderr


def test_short_help_and_shell_completion() -> None:
    """-h works where --help does, and the shell completion typer offers is installed with kprof."""
    for args in ([], ["run"], ["trace"], ["compare"]):
        short, long = runner.invoke(app, [*args, "-h"]), runner.invoke(app, [*args, "--help"])
        assert short.exit_code == 0 and short.stdout == long.stdout and "Usage: kprof" in short.stdout
    # the script the shell sources; asked through the environment, as the installed script does
    # (--show-completion detects the shell from the process tree, which a detached test run lacks)
    completion = runner.invoke(app, [], prog_name="kprof", env={"_KPROF_COMPLETE": "source_bash"})
    assert completion.exit_code == 0 and "complete -o default -F _kprof_completion kprof" in completion.stdout
    assert "--install-completion" in runner.invoke(app, ["-h"]).stdout


def test_output_writes_a_file_in_its_suffixs_format_and_says_so_in_one_line(tmp_path: Path) -> None:
    """-o/--output: the file in the format its suffix names and one line saying where; the terminal
    shows the result too only when --format is given. The file holds exactly what --format of that
    kind prints (csv included, on every command that prints a table)."""
    stored = str(ROOT / "docs" / "runs" / "h200-2026-12-02-s17" / "mla_end_1")  # small: 4 legs, 1 case
    bisect = str(ROOT / "docs" / "runs" / "h200-2026-12-02-s16" / "fla_bisect")
    for args in (["trace", str(EAGER)], ["report", stored], ["report", bisect], ["attribute", stored], ["kernels"]):
        for suffix in (".md", ".json", ".csv"):
            out = tmp_path / f"{args[0]}{suffix}"
            res = runner.invoke(app, [*args, "-o", str(out)])
            assert res.exit_code == 0, res.output
            assert res.stdout == "" and res.stderr.startswith(f"wrote {out} (") and res.stderr.count("\n") == 1
            kind = suffix.removeprefix(".")
            alone = runner.invoke(app, [*args, "--format", kind])
            assert alone.exit_code == 0 and out.read_text() == alone.stdout, (args, suffix)
            if kind == "csv":
                assert out.read_text().startswith(("case,", "workload,", "rank,", "step,")), out.read_text()[:80]
    both = runner.invoke(app, ["trace", str(EAGER), "-o", str(tmp_path / "both.md"), "--format", "table"])
    assert both.exit_code == 0 and "┃" in both.stdout  # --format given: the terminal shows it too


def test_csv_of_a_result_without_rows_is_one_line() -> None:
    from kprof.cli import TableFormat, _write
    from kprof.errors import KprofInputError

    with pytest.raises(KprofInputError, match="csv: this result has no table of rows"):
        _write(Document(), TableFormat.csv)


def test_attribute_writes_its_html_page_beside_markdown(tmp_path: Path) -> None:
    stored = str(ROOT / "docs" / "runs" / "h200-2026-11-30-s3" / "gdn_pr")
    page = tmp_path / "levers.html"
    res = runner.invoke(app, ["attribute", stored, "-o", str(page), "--format", "md"])
    assert res.exit_code == 0 and page.read_text().startswith("<!doctype html>") and res.stdout.startswith("**")


def test_output_refuses_what_it_cannot_write_or_must_not_touch(tmp_path: Path) -> None:
    stored = ROOT / "docs" / "runs" / "h200-2026-11-30-s3" / "gdn_pr"
    for target, words in (
        (tmp_path / "report.txt", "name a file ending in"),
        (tmp_path, "is a folder or lies in a kprof folder"),
        (stored / "notes.md", "is a folder or lies in a kprof folder"),
    ):
        res = runner.invoke(app, ["report", str(stored), "-o", str(target)])
        assert res.exit_code == 2 and words in res.stderr and res.stderr.count("\n") == 1, res.output
    assert not (stored / "notes.md").exists()


def test_an_output_the_result_cannot_go_to_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """A run takes minutes to hours: -o's suffix and place are checked before it starts."""
    for command in (["run", "paged_decode"], ["calibrate"], ["attribute", "paged_decode"]):
        out = tmp_path / command[0]
        args = [*command, "--device", "cpu", "--out", str(out), "-o", str(tmp_path / "result.txt")]
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and "name a file ending in" in res.stderr, res.output
        assert not out.exists()  # no run folder was made: nothing ran


def test_trace_quiet_says_nothing_on_stderr(tmp_path: Path) -> None:
    loud = runner.invoke(app, ["trace", str(EAGER), "--save", str(tmp_path / "a")])
    quiet = runner.invoke(app, ["trace", str(EAGER), "--save", str(tmp_path / "b"), "-q"])
    assert loud.exit_code == quiet.exit_code == 0 and "saved" in loud.stderr
    assert quiet.stderr == "" and quiet.stdout == loud.stdout


def test_every_help_page_ends_with_examples_that_use_its_own_options() -> None:
    """Each command's help closes with examples; every option an example uses is one the command
    has (a renamed option would otherwise leave a help page teaching what fails)."""
    import shlex

    import typer

    from kprof.cli_help import EXAMPLES

    commands = typer.main.get_command(app).commands
    assert set(EXAMPLES) == set(commands)
    for name, command in commands.items():
        page = runner.invoke(app, [name, "-h"], env={"COLUMNS": "200"}).stdout
        assert "Examples:" in page and all(line in page for line in EXAMPLES[name]), name
        known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
        for line in EXAMPLES[name]:
            words = shlex.split(line)
            assert words[:2] == ["kprof", name], line
            words = words[: words.index("--")] if "--" in words else words
            used = {w.split("=")[0] for w in words if w.startswith("-")}
            assert used <= known, (line, used - known)


def test_every_help_page_fits_80_columns() -> None:
    """`kprof -h` and each command's help at COLUMNS=80: no line wider (examples included)."""
    import typer

    for name in ["", *typer.main.get_command(app).commands]:
        page = runner.invoke(app, [name, "-h"] if name else ["-h"], env={"COLUMNS": "80"}).stdout
        assert page and max(len(line) for line in page.splitlines()) <= 80, (name, max(page.splitlines(), key=len))


def test_usage_errors_speak_in_kprofs_one_error_style() -> None:
    """An unknown command or option, a missing argument and a bad value read like every other bad
    input: one line, ``kprof: error: …``, exit 2, with where to find help (click printed a usage
    block and ``Error:`` instead)."""
    for args, words in (
        (["repor"], "No such command 'repor'. Did you mean 'report'? ('kprof -h' for help)"),
        (["trace"], "Missing argument 'FILE'. ('kprof trace -h' for help)"),
        (["compare", "a", "b", "--bogus"], "No such option: --bogus"),
        (["report", "x", "--sort", "size"], "--sort: 'size' is not one of 'run', 'effect', 'time'."),
        (["trace", "x", "--top", "many"], "--top: must be a valid integer ('kprof trace -h' for help)"),
        (["trace", "x", "--jobs", "-1"], "--jobs: must be greater than or equal to 0"),
    ):
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        assert "Value error" not in res.stderr and "Input should" not in res.stderr  # typer's validator, leaking
        assert res.stderr.startswith("kprof: error: ") and words in res.stderr and res.stderr.count("\n") == 1, (
            res.stderr
        )
    bare = runner.invoke(app, [])
    assert bare.exit_code == 2 and bare.stderr.startswith("Usage: kprof")  # kprof alone: its help


def test_a_mistyped_option_after_a_bundled_workload_is_named() -> None:
    res = runner.invoke(app, ["run", "paged_decode", "--roundz", "8"])
    assert (
        res.exit_code == 2
        and res.stderr == "kprof: error: --roundz: no such option of kprof run ('kprof run -h' lists them)\n"
    )


def test_help_shows_values_as_a_user_types_them_not_python_types() -> None:
    """Metavars read as a person writes them (``--rounds N``, ``--revisions A..B``, ``FILE...``),
    never typer's Python types (``<int range>``, ``files... <list[Path]>``, ``<str>``), and the
    usage line as click writes it (``FILE...``, not ``{files}...``)."""
    import typer

    from kprof.cli_help import METAVARS

    commands = typer.main.get_command(app).commands
    seen: set[str] = set()
    for name in commands:
        page = runner.invoke(app, [name, "-h"], env={"COLUMNS": "200"}).stdout
        python_types = re.findall(r"<(?:str|int|int range|float|path|bool|list\[[^\]]*\])>", page)
        assert not python_types, (name, python_types)
        assert "{" not in page.splitlines()[0], page.splitlines()[0]
        seen |= {option for option, metavar in METAVARS.items() if f"{option} {metavar}" in page}
    assert seen == set(METAVARS)  # every metavar is shown by some command (none names a gone option)
    assert runner.invoke(app, ["trace", "-h"]).stdout.startswith("Usage: kprof trace [OPTIONS] FILE...")


def test_every_command_takes_quiet_and_short_help() -> None:
    """`kprof report … -q` was `No such option: -q` (also compare, sql, kernels), though the README
    promises -q everywhere."""
    import typer.main

    group = typer.main.get_command(app)
    names = sorted(group.commands)  # type: ignore[attr-defined]
    assert {"trace", "run", "report", "compare", "sql", "kernels", "attribute", "calibrate", "cache"} <= set(names)
    for name in names:
        res = runner.invoke(app, [name, "-h"])
        assert res.exit_code == 0 and "--quiet" in res.output and "-q" in res.output, name


def test_what_the_arguments_alone_decide_is_said_before_anything_heavy(tmp_path: Path) -> None:
    """An unknown workload took 16 s to refuse, a -o suffix kprof cannot write was refused after
    reading the whole trace, --threshold -5 started a run. Each is one line, in a time measured
    against `kprof --help` in the same process tree (a busy machine slows both)."""
    import subprocess
    import sys
    import time

    def timed(*args: str) -> tuple[float, subprocess.CompletedProcess]:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "kprof", *args], capture_output=True, text=True)
        return time.perf_counter() - start, done

    baseline, _ = timed("--help")
    big = str(ROOT / "traces" / "llama_eager_decode.pt.trace.json.gz")
    for args, says in (
        (["run", "nosuch_workload"], "not a bundled workload"),
        (["run", "paged_decode", "--threshold", "-5"], "--threshold: is -5"),
        (["trace", big, "-o", str(tmp_path / "out.txt")], "name a file ending in"),
        (["compare", big, big, "--fail-on", "nonsense"], "--fail-on: expected e.g."),
    ):
        took, done = timed(*args)
        assert done.returncode == 2 and says in done.stderr and done.stderr.count("\n") == 1, (args, done.stderr)
        assert took < max(1.0, 12 * baseline), (args, took, baseline)  # torch and a run take far longer


def test_a_trace_save_and_an_archived_run_are_named_as_such(tmp_path: Path) -> None:
    saved = tmp_path / "saved"
    res = runner.invoke(app, ["trace", str(EAGER), str(GRAPH), "--save", str(saved)])
    assert res.exit_code == 0 and "saved 9 entries" in res.stderr, res.stderr  # as many as it wrote
    assert len([p for p in saved.iterdir() if not p.name.startswith(".")]) == 9
    said = runner.invoke(app, ["report", str(saved)])
    assert said.exit_code == 2 and "is a `kprof trace --save` folder's, not a run's" in said.stderr
    archive = tmp_path / "run.tar.gz"
    archive.write_bytes(b"\x1f\x8b")
    said = runner.invoke(app, ["report", str(archive)])
    assert said.exit_code == 2 and "is an archive: unpack it first (tar xf" in said.stderr
