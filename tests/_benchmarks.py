"""What the benchmarks' tests share: loading a script as it runs, running its children in process."""

import importlib.util
import io
import json
import sys
from contextlib import redirect_stdout
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name):
    """The module of ``benchmarks/<name>.py``, with its folder on the path as when it runs as a script.

    The scripts import their shared scaffolding as ``from _common import ...``.
    """
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_children_in_process(bench, monkeypatch):
    """Replace the script's ``_spawn`` by a call of its ``child`` in this process.

    A fresh interpreter per child costs seconds; each smoke test's
    ``test_spawn_command_runs_the_child`` covers the command line.
    """

    def in_process(route, n, args):
        out = io.StringIO()
        with redirect_stdout(out):
            bench.child(route, n, args)
        return json.loads(out.getvalue().splitlines()[-1])

    monkeypatch.setattr(bench, "_spawn", in_process)
