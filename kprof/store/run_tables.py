"""The parquet tables of a run folder: one declared schema each (columns, types, units).

* ``samples/`` — one part per (case, round): every cold sample of every leg. ``burn_in`` marks the
  burn-in round (round 0, and the first round of each further process of a case); ``slot`` is the
  leg's position in the round's order; ``time_ns`` is what the ``timer`` measured (device time, or
  the host clock on a CPU).
* ``rounds/`` — one part per (case, round): ``attempt`` (a round is redone when the SM clock sags)
  and the clock, temperature, power and throttle readings taken after it (null where unknown);
  ``process``: which of the case's worker processes timed it (``--processes``; each process's
  first round is a burn-in).
* ``checks/`` — correctness results: ``round`` −1 before timing, else the race check after that
  round; ``rule`` the check against the baseline (``no outputs`` where the call returns none);
  ``vs_baseline`` in ulp (bitwise/ulp rules) or relative error (tolerance rule); ``vs_reference``
  the relative error against float64 (null where no reference was given or checked).
* ``compile/`` — Triton metadata per leg and kernel (``programs_per_sm`` by the CUDA occupancy
  rules; null on ROCm and under the interpreter).
* ``launches/`` — every Triton launch a leg's call makes: kernel, grid and the scalar and
  constexpr arguments (``signature``, JSON). Legs that differ in features but launch the same
  thing are silent no-ops, and the gate says so.
* ``kernels/`` — with ``--collector torch``: device time per (leg, round, kernel).
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from kprof.errors import KprofInputError

NO_OUTPUTS = "no outputs"  # a checks row's rule when the leg's call returns nothing to check

_STR, _I64, _F64, _BOOL = pa.string(), pa.int64(), pa.float64(), pa.bool_()

SCHEMAS: dict[str, pa.Schema] = {
    "samples": pa.schema(
        [
            ("case", _STR),
            ("leg", _STR),
            ("round", _I64),
            ("sample", _I64),
            ("buffer_set", _I64),
            ("slot", _I64),
            ("time_ns", _F64),
            ("timer", _STR),
            ("burn_in", _BOOL),
        ]
    ),
    "rounds": pa.schema(
        [
            ("case", _STR),
            ("round", _I64),
            ("attempt", _I64),
            ("sm_clock_mhz", _F64),
            ("mem_clock_mhz", _F64),
            ("temperature_c", _F64),
            ("power_w", _F64),
            ("throttle_reasons", _I64),
            ("process", _I64),
        ]
    ),
    "checks": pa.schema(
        [
            ("case", _STR),
            ("leg", _STR),
            ("round", _I64),
            ("buffer_set", _I64),
            ("rule", _STR),
            ("passed", _BOOL),
            ("vs_baseline", _F64),
            ("vs_reference", _F64),
            ("detail", _STR),
        ]
    ),
    "compile": pa.schema(
        [
            ("case", _STR),
            ("leg", _STR),
            ("kernel", _STR),
            ("num_warps", _I64),
            ("num_stages", _I64),
            ("shared_bytes", _I64),
            ("registers", _I64),
            ("spills", _I64),
            ("programs_per_sm", _I64),
        ]
    ),
    "launches": pa.schema(
        [("case", _STR), ("leg", _STR), ("index", _I64), ("kernel", _STR), ("grid", _STR), ("signature", _STR)]
    ),
    "kernels": pa.schema(
        [("case", _STR), ("leg", _STR), ("round", _I64), ("kernel", _STR), ("calls", _I64), ("total_us", _F64)]
    ),
}
TABLES = tuple(SCHEMAS)
#: columns a part must have to be read as that table (older folders may lack the optional ones)
REQUIRED = {
    "samples": ("case", "leg", "round", "time_ns", "burn_in"),
    "rounds": ("case", "round"),
    "checks": ("case", "leg", "round", "passed"),
    "compile": ("case", "leg", "kernel"),
    "launches": ("case", "leg", "kernel", "signature"),
    "kernels": ("case", "leg", "round", "kernel", "total_us"),
}


def to_arrow(name: str, frame: pd.DataFrame) -> pa.Table:
    """``frame`` as the declared table: missing optional columns become nulls; an undeclared
    column is a bug in the stage that wrote it."""
    schema = SCHEMAS[name]
    extra = set(frame.columns) - set(schema.names)
    if extra:
        raise ValueError(f"{name}: undeclared columns {sorted(extra)}")
    n = len(frame)
    arrays = [
        pa.array(frame[f.name], type=f.type, from_pandas=True) if f.name in frame else pa.nulls(n, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def checked_part(name: str, table: pa.Table, where: str) -> pa.Table:
    """A part (or compacted file) read back, its required columns present, of their declared types
    (or losslessly castable to them), never null, and its times > 0 and finite: anything else is a
    damaged part, not rows."""
    schema = SCHEMAS[name]
    columns = {}
    for column in REQUIRED[name]:
        if column not in table.column_names:
            raise KprofInputError(where, f"is not a {name} part of a kprof run (no column {column})")
        values = table[column]
        if values.null_count:
            raise KprofInputError(where, f"is a damaged {name} part ({values.null_count} null {column} values)")
        try:
            columns[column] = values.cast(schema.field(column).type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise KprofInputError(where, f"is a damaged {name} part ({column} is {values.type})") from None
    if "time_ns" in columns:  # no clock measures a call as taking no time, or less, or forever
        import pyarrow.compute as pc

        times = columns["time_ns"]
        bad = len(times) - pc.sum(pc.and_(pc.greater(times, 0), pc.is_finite(times))).as_py() if len(times) else 0
        if bad:
            raise KprofInputError(where, f"is a damaged {name} part ({bad} time_ns values that are not > 0 and finite)")
    for column, values in columns.items():
        table = table.set_column(table.column_names.index(column), column, values)
    return table
