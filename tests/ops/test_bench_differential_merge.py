"""Smoke test of ``benchmarks/bench_ops_differential_merge.py`` on tiny sizes."""

import argparse
import io
import subprocess
from contextlib import redirect_stdout

import pytest

from _benchmarks import BENCHMARKS, load_benchmark, run_children_in_process

SCRIPT = BENCHMARKS / "bench_ops_differential_merge.py"


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_ops_differential_merge")


def test_main_prints_ratios_and_skips_large_naive(bench, monkeypatch, capsys):
    run_children_in_process(bench, monkeypatch)
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

    monkeypatch.setattr(subprocess, "run", run)
    args = argparse.Namespace(patches=3, dim=4, threads=1, repeats=1)
    result = bench._spawn("loop", 50, args)
    assert result["seconds"] > 0 and result["peak_mb"] > 0
    # 50 frames, 32 of them keyframes: 18 merged rows, 4 values per token.
    assert result["rows"] == 18 and len(result["sample"]) == 18 and len(result["sample"][0]) == 4
