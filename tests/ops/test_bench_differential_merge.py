"""Smoke test of ``benchmarks/bench_ops_differential_merge.py`` on tiny sizes."""

import argparse
import importlib.util
import io
import json
import subprocess
from contextlib import redirect_stdout
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_ops_differential_merge.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_ops_differential_merge", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_main_prints_ratios_and_skips_large_naive(bench, monkeypatch, capsys):
    # Children run in this process (a fresh interpreter per child costs
    # seconds); test_spawn_command_runs_the_child covers the command line.
    def in_process(route, n, args):
        out = io.StringIO()
        with redirect_stdout(out):
            bench.child(route, n, args)
        return json.loads(out.getvalue().splitlines()[-1])

    monkeypatch.setattr(bench, "_spawn", in_process)
    # Naive needs 5 * N * 3 * 4 * 4 bytes: 1.44e-5 GB at N = 60, 2.4e-5 GB at 100.
    bench.main(["--sizes", "60", "100", "--patches", "3", "--dim", "4", "--threads", "1",
                "--repeats", "1", "--max-naive-gb", "2e-5", "--skip-gpu"])
    out = capsys.readouterr().out
    assert "naive/op" in out and "loop/op" in out and "max diff" in out
    (row_60,) = [line for line in out.splitlines() if line.split()[:1] == ["60"]]
    cells = row_60.split()
    assert cells[4].endswith("x") and cells[5].endswith("x")
    assert float(cells[-1]) < 1e-5  # the three routes agree
    (row_100,) = [line for line in out.splitlines() if line.split()[:1] == ["100"]]
    assert row_100.split()[2] == "-"
    assert "naive skipped at N = 100: it needs about 2.4e-05 GB > --max-naive-gb 2e-05" in out


def test_spawn_command_runs_the_child(bench, monkeypatch):
    def run(command, **kwargs):
        assert command[1] == str(SCRIPT) and kwargs["env"]["OMP_NUM_THREADS"] == "1"
        out = io.StringIO()
        with redirect_stdout(out):
            bench.main(command[2:])
        return subprocess.CompletedProcess(command, 0, out.getvalue(), "")

    monkeypatch.setattr(bench.subprocess, "run", run)
    args = argparse.Namespace(patches=3, dim=4, threads=1, repeats=1)
    result = bench._spawn("loop", 50, args)
    assert result["seconds"] > 0 and result["peak_mb"] > 0
    # 50 frames, 32 of them keyframes: 18 merged rows, 4 values per token.
    assert result["rows"] == 18 and len(result["sample"]) == 18 and len(result["sample"][0]) == 4
