"""Smoke test of ``benchmarks/bench_ops_rbf_context.py`` on tiny sizes."""

import argparse
import io
import subprocess
from contextlib import redirect_stdout

import pytest

from _benchmarks import BENCHMARKS, load_benchmark, run_children_in_process

SCRIPT = BENCHMARKS / "bench_ops_rbf_context.py"


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_ops_rbf_context")


def test_main_prints_ratios_and_skips_large_dense(bench, monkeypatch, capsys):
    run_children_in_process(bench, monkeypatch)
    # 40 x 40 float64 is 1.3e-5 GB, 60 x 60 is 2.9e-5 GB.
    bench.main(["--sizes", "40", "60", "--p", "3", "--d", "5", "--n-masks", "2", "--threads", "1",
                "--repeats", "1", "--max-dense-gb", "2e-5"])
    out = capsys.readouterr().out
    assert "speed" in out and "memory" in out and "max rel diff" in out
    (row_40,) = [line for line in out.splitlines() if line.split()[:1] == ["40"]]
    cells = row_40.split()
    speed, memory, diff = cells[4], cells[7], float(cells[-1])
    assert speed.endswith("x") and memory.endswith("x")
    assert diff < 1e-12  # the op and the dense product agree
    assert "dense skipped at n = 60: its kernel needs 2.88e-05 GB > --max-dense-gb 2e-05" in out


def test_spawn_command_runs_the_child(bench, monkeypatch):
    # The command _spawn builds, run through main in this process.
    def run(command, **kwargs):
        assert command[1] == str(SCRIPT) and kwargs["env"]["OMP_NUM_THREADS"] == "1"
        out = io.StringIO()
        with redirect_stdout(out):
            bench.main(command[2:])
        return subprocess.CompletedProcess(command, 0, out.getvalue(), "")

    monkeypatch.setattr(subprocess, "run", run)
    args = argparse.Namespace(p=2, d=3, n_masks=1, threads=1, repeats=1)
    result = bench._spawn("op", 32, args)
    assert result["seconds"] > 0 and result["peak_mb"] > 0
    assert len(result["sample"]) == 32 and len(result["sample"][0]) == 3
