"""`kprof kernels`: the bundled workloads, their levers (with the exactness each promises), presets and sweeps."""

from __future__ import annotations

import pandas as pd

from kprof.report.table import Column, Document, Table
from kprof.workload import bundled_names, load_workload


def kernels_document() -> Document:
    doc = Document()
    listing = []
    for name in bundled_names():
        w = load_workload(name)
        doc.text(f"{name} · {w.description}", "rule")
        if w.features:
            t = Table(
                "levers",
                [
                    Column("feature", "left"),
                    Column("exactness", "left"),
                    Column("what it switches", "left", is_name=True),
                ],
            )
            for f in w.features:
                t.add(f.name, f.exactness_text, f.doc)
            doc.table(t)
        else:
            doc.text("no features: a reference workload")
        for preset, cases in w.presets.items():
            doc.text(f"preset {preset}: " + ", ".join(c.name for c in cases))
        for s in w.sweeps:
            doc.text(f"sweep {s.name}: {s.doc}")
        listing.append(
            {
                "name": name,
                "description": w.description,
                "features": [{"name": f.name, "exactness": f.exactness_text, "doc": f.doc} for f in w.features],
                "presets": {p: [c.name for c in cases] for p, cases in w.presets.items()},
                "sweeps": [{"name": s.name, "doc": s.doc} for s in w.sweeps],
            }
        )
    doc.data = {"workloads": listing}
    doc.records = pd.DataFrame(
        [
            {"workload": w["name"], "feature": f["name"], "exactness": f["exactness"]}
            for w in listing
            for f in w["features"]
        ]
    )
    return doc
