from kprof.cli import app

app()
