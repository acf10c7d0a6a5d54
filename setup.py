"""The one compiled part of kprof: the Kineto scanner (optional: without a C compiler the install
still succeeds and every trace is decoded by msgspec alone)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kprof.ingest.formats._kineto_scan",
            ["kprof/ingest/formats/_kineto_scan.c"],
            extra_compile_args=["-O3"],
            optional=True,
        )
    ]
)
